"""The fleet's limits from the command line: `resume` (lift a usage-limit pause by hand).

A usage limit pauses assignment for the whole fleet until the limit lifts (see
`limits`); `resume` asks the server to assign again now, for when the operator
knows better (the plan was upgraded, the window reset early).
"""

from __future__ import annotations

from codefleet.cli_common import (
    OPERATE,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    console,
    settings_from,
)

__all__ = ["resume"]


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
