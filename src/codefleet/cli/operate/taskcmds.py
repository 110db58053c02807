"""Operator commands over the server's tasks: `tasks`, `cancel`, `retry`, `reset`, `say`, `questions`, `answer`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

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
from codefleet.cli.operate.again import next_run
from codefleet.cli.operate.quicktable import NO_TASKS_HINT
from codefleet.cli.output import console, err_console
from codefleet.errors import DomainError, Forbidden, Unauthorized
from codefleet.models import TaskStatus
from codefleet.ui.report import task_table
from codefleet.ui.task_view import task_detail

if TYPE_CHECKING:
    from codefleet.api.client import FleetClient

__all__ = ["answer", "cancel", "questions", "reset", "retry", "say", "tasks"]

STATUSES = tuple(TaskStatus)


@app.command(rich_help_panel=OPERATE)
def tasks(
    task_id: Annotated[str | None, typer.Argument(help="Show one task in full.")] = None,
    status: Annotated[
        str | None,
        typer.Option(help=f"Only tasks with this status ({', '.join(STATUSES)})."),
    ] = None,
    patch: Annotated[
        bool, typer.Option("--patch", help="With ID: print the task's recorded change as a diff.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the tasks (or one task with its dependencies, file changes and patch size)."""
    if status is not None and status not in STATUSES:
        raise fail(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
    if patch and not task_id:
        raise fail("--patch needs a task ID: `codefleet tasks ID --patch`")
    settings = settings_from(server_url=server, token=token)
    if task_id and patch:
        found = call_server(settings, lambda c: c.patch(task_id))
        if json_out:
            print_json(found)
        elif not found["files"]:
            err_console.print(f"task {task_id} has no recorded change", markup=False)
        else:
            sys.stdout.write("".join(f["diff"] for f in found["files"]))
        return
    if task_id:
        data = call_server(settings, lambda c: c.task(task_id))
        if json_out:
            print_json(data)
        else:
            reads = call_server(settings, lambda c: _read_events(c, task_id))
            budget = call_server(settings, lambda c: c.health())["budget"]
            simulated = bool(budget.get("simulated"))
            console.print(task_detail(data, reads, crop=console.is_terminal, simulated=simulated))
            hint = _next_for(data, call_server(settings, _next_run))
            if hint:
                console.print(hint, markup=False)
        return
    rows = call_server(settings, lambda c: c.tasks(status))
    if json_out:
        print_json(rows)
    else:
        console.print(task_table(rows, crop=console.is_terminal))
        if not rows and not status:
            err_console.print(NO_TASKS_HINT, markup=False)


_TASK_EVENTS = (
    "stale_read",
    "reconciled",
    "operator_message",
    "file_restored",
    "check_reused",  # a check not run again on the same content
    "check_deferred",  # a verify left to the landing check
    "lease_acquired",  # those `stacked_on` a task waiting to land are shown
    "stack_unwound",  # undone with the task it stacked on
    "repair_started",  # a failed check repaired in the same session (decision 0161)
    "repair_finished",
    "task_requeued",  # ... or reworked: rolled back for a new attempt
)
_LANDING_EVENTS = ("landing_queued", "landed", "integration_failed")
_LANDING_CHECKS = ("landing_check_started", "landing_check_finished")  # named by their batch


async def _next_run(client: FleetClient) -> str:
    return await next_run(client)


def _next_for(task: dict[str, Any], again: str) -> str | None:
    """What to type next for this task, with the last run's flags (`cli.operate.again`)."""
    if task["status"] in ("failed", "cancelled"):
        return f"next: `codefleet retry {task['id']}`, then `{again}`"
    if task["status"] == "blocked_upstream":
        return f"next: retry what it waits on (`codefleet retry --failed`), then `{again}`"
    if task["status"] == "pending":
        return f"next: `{again}` runs it"
    return None


async def _read_events(client: FleetClient, task_id: str) -> list[dict[str, Any]]:
    """The task's stale reads, reconciles, messages, rollbacks and landing events, in log
    order."""
    found = [
        e
        for kind in _TASK_EVENTS + _LANDING_EVENTS
        for e in await client.events(type_=kind)
        if e.get("task_id") == task_id
    ]
    found += [
        e
        for kind in _LANDING_CHECKS
        for e in await client.events(type_=kind)
        if task_id in ((e.get("payload") or {}).get("batch") or ())
    ]
    return sorted(found, key=lambda e: int(e["id"]))


@app.command(rich_help_panel=OPERATE)
def cancel(
    task_ids: Annotated[list[str], typer.Argument(help="The task(s) to cancel.", metavar="ID...")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Cancel tasks: a running attempt is stopped and rolled back; dependents are blocked.

    Each task is tried in turn: one that cannot be cancelled is named with the reason and
    the rest are still tried. Exits 0 only if every task was cancelled.
    """
    settings = settings_from(server_url=server, token=token)

    async def go(client: FleetClient) -> tuple[dict[str, str | None], str]:
        refused: dict[str, str | None] = {}
        for task_id in task_ids:
            try:
                await client.cancel(task_id)
                refused[task_id] = None
            except (Unauthorized, Forbidden):
                raise  # the token, not the task: no other task would fare better
            except DomainError as err:  # refused for this task (unknown, already ended): go on
                refused[task_id] = err.message
        return refused, await next_run(client)

    outcome, again = call_server(settings, go)
    for task_id, why in outcome.items():
        if why is None:
            console.print(
                f"{task_id}: cancelled (`codefleet retry {task_id}`, then `{again}`, brings it "
                "back)",
                markup=False,
            )
        else:
            err_console.print(f"{task_id}: not cancelled: {why}", markup=False)
    done = sum(why is None for why in outcome.values())
    if done < len(outcome):
        err_console.print(f"{done} of {len(outcome)} task(s) cancelled", markup=False)
        raise typer.Exit(1)


@app.command(rich_help_panel=OPERATE)
def say(
    task_id: Annotated[str, typer.Argument(help="The task to tell.", metavar="TASK")],
    text: Annotated[str, typer.Argument(help="The message (at most 16 KiB).", metavar="MESSAGE")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Tell a task something: a running session gets it at its next turn boundary, a task
    that is not running gets it in its next attempt's prompt ("Notes from the operator")."""
    settings = settings_from(server_url=server, token=token)
    said = call_server(settings, lambda c: c.say(task_id, text))
    if json_out:
        print_json(said)
        return
    where = {
        "running": "the running session gets it at its next turn boundary",
        "next_attempt": f"attempt {said['attempt']}'s prompt will carry it",
    }[str(said["delivered"])]
    console.print(f"{task_id}: message #{said['seq']} kept; {where}", markup=False)


@app.command(rich_help_panel=OPERATE)
def questions(server: ServerOpt = None, token: TokenOpt = None, json_out: JsonOpt = False) -> None:
    """List the agents' open questions (ask_operator), oldest first, with how to answer."""
    settings = settings_from(server_url=server, token=token)
    found = call_server(settings, lambda c: c.questions())
    if json_out:
        print_json(found)
        return
    if not found:
        console.print("no open question", markup=False)
    for q in found:
        console.print(
            f"{q['task_id']} asks ({q['question_id']}, attempt {q['attempt']}): "
            f'{q["text"]}\n  answer: codefleet answer {q["task_id"]} "..."',
            markup=False,
        )


@app.command(rich_help_panel=OPERATE)
def answer(
    task_id: Annotated[str, typer.Argument(help="The asking task.", metavar="TASK")],
    text: Annotated[str, typer.Argument(help="The answer (at most 16 KiB).", metavar="ANSWER")],
    question: Annotated[
        str | None, typer.Option("--question", help="The question's id (default: its oldest).")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Answer a task's open question; the waiting agent gets the answer and goes on."""
    settings = settings_from(server_url=server, token=token)
    answered = call_server(settings, lambda c: c.answer(task_id, text, question))
    if json_out:
        print_json(answered)
        return
    console.print(f"{task_id}: answered {answered['question_id']}", markup=False)


@app.command(rich_help_panel=OPERATE)
def retry(
    task_ids: Annotated[
        list[str] | None, typer.Argument(help="The failed or cancelled task(s).", metavar="[ID...]")
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Every failed (and cancelled) task.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Start failed or cancelled tasks over; their blocked dependents follow.

    Earlier attempts stay in the record, not charged. Then codefleet run runs them.
    """
    if bool(task_ids) == failed:
        raise fail("name the task(s) to retry, or pass --failed for every failed one (not both)")
    settings = settings_from(server_url=server, token=token)

    async def go(client: FleetClient) -> tuple[list[str], str]:
        ids = list(task_ids or ())
        if failed:
            ids = [t["id"] for t in await client.tasks() if t["status"] in ("failed", "cancelled")]
        for task_id in ids:
            await client.retry(task_id)
        return ids, await next_run(client)

    retried, again = call_server(settings, go)
    if not retried:
        console.print("no failed or cancelled task to retry", markup=False)
    for task_id in retried:
        console.print(
            f"{task_id}: pending again (a fresh allowance of attempts; the earlier ones are "
            "kept, not charged)",
            markup=False,
        )
    if retried:
        console.print(f"next: `{again}` runs them (the flags of the last run)", markup=False)


@app.command(rich_help_panel=OPERATE)
def reset(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Delete every task, agent, lease and event. Needs CODEFLEET_ALLOW_RESET=1."""
    if os.environ.get("CODEFLEET_ALLOW_RESET") not in ("1", "true", "yes"):
        raise fail("reset deletes everything; set CODEFLEET_ALLOW_RESET=1 to confirm")
    settings = settings_from(server_url=server, token=token)
    call_server(settings, lambda c: c.reset())
    console.print("reset: the database is empty")
