"""The fleet's limits from the command line: `resume` a usage-limit pause, set the `budget`.

A usage limit pauses assignment for the whole fleet until the limit lifts (see
`limits`); `resume` asks the server to assign again now, for when the operator
knows better (the plan was upgraded, the window reset early). `budget` shows
the fleet's budget and what it spent, or sets a new cap live: a higher one
resumes a fleet its budget had stopped.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from codefleet.cli.common import (
    OPERATE,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    fail,
    print_json,
    settings_from,
)
from codefleet.cli.output import console
from codefleet.wording import spent_text

__all__ = ["budget", "resume"]


@app.command(rich_help_panel=OPERATE)
def resume(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Lift the fleet's usage-limit pause now: the server assigns work again at once."""
    settings = settings_from(server_url=server, token=token)
    answer = call_server(settings, lambda c: c.resume())
    was = answer.get("was")
    if not answer["resumed"] or not was:
        console.print("the fleet was not paused; nothing to resume", markup=False)
        return
    console.print(
        f"resumed: the fleet assigns work again (it was paused until {was['until']}, "
        f"{was['remaining_s']:.0f} s early; {was['reason']})",
        markup=False,
    )


@app.command(rich_help_panel=OPERATE)
def budget(
    usd: Annotated[
        float | None,
        typer.Argument(help="The new cap in USD; without it, show the budget and what was spent."),
    ] = None,
    hard: Annotated[
        bool | None,
        typer.Option(
            "--hard/--soft",
            help="When the cap is reached, also stop running attempts (--hard) or let them "
            "finish (--soft, the default).",
        ),
    ] = None,
    none: Annotated[bool, typer.Option("--none", help="Remove the cap.")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the fleet's budget, or set it live (a higher cap resumes a stopped fleet)."""
    if usd is not None and usd <= 0:
        raise fail("the budget must be more than 0 USD; --none removes it")
    if usd is not None and none:
        raise fail("give a cap in USD or --none, not both")
    settings = settings_from(server_url=server, token=token)

    async def act(client: Any) -> dict[str, Any]:
        current: dict[str, Any] = (await client.health())["budget"]
        if usd is None and not none and hard is None:
            return current
        cap = None if none else (usd if usd is not None else current["max_cost_usd"])
        stop = bool(current["hard"] if hard is None else hard)
        answer: dict[str, Any] = await client.set_budget(cap, stop)
        return answer

    answer = call_server(settings, act)
    if json_out:
        print_json(answer)
        return
    console.print(budget_line(answer), markup=False)


def budget_line(budget: dict[str, Any]) -> str:
    """The budget in one line: the cap and its kind of stop, what was spent, whether it holds."""
    spent = spent_text(budget["spent_usd"], bool(budget.get("simulated")))
    if budget["max_cost_usd"] is None:
        return f"no fleet budget · {spent}"
    stop = "hard stop" if budget["hard"] else "running tasks finish"
    state = "EXHAUSTED: no new task is assigned" if budget["exhausted"] else "assigning"
    return f"fleet budget ${budget['max_cost_usd']:.4f} ({stop}) · {spent} · {state}"
