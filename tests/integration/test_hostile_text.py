"""What an agent writes reaches a person's screen escaped, never interpreted.

A question, a title, an error or a summary may carry terminal control
sequences (a title change, a screen clear, a carriage return over a line, a
C1 CSI, a bidi override) or Rich markup. Each surface a person reads — the
CLI's commands piped and in a terminal, the dashboard's frame and log lines,
the report in Markdown and HTML — shows them as visible escapes.
"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks
from codefleet.cli.app import app
from codefleet.cli.output import PlainConsole
from codefleet.review.report.reportblocks import Code, Facts, Para, Report, Section, Table
from codefleet.review.report.reportrender import render_html, render_markdown
from codefleet.server.thread import ServerThread
from codefleet.ui.dashboardrender import log_text, render
from codefleet.ui.viewmodel import LogLine, TaskRow, ViewModel, describe

# A title change (OSC ... BEL), a screen clear, a line overwritten with a fake verdict,
# a C1 CSI, a bidi override, and Rich markup that would colour or break the line.
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2Jq\rall tasks PASS \x9b31mred \u202egnp.exe [red]RED[/red] [/] \x7f"
)
RAW = ("\x1b]", "\x1b[2J", "\r", "\x07", "\x9b", "\u202e", "\x7f")
SHOWN = ("\\x1b]0;pwned", "\\x1b[2J", "\\x0d", "\\x9b31m", "\\u202e", "[red]RED[/red] [/]")


def assert_escaped(out: str, dropped: tuple[str, ...] = ()) -> None:
    """No hostile control character reaches `out`; each is shown as a visible escape
    (but those in `dropped`: a rich `Text` drops CR, BEL, BS, VT and FF itself)."""
    assert [raw for raw in RAW if raw in out] == []
    assert [shown for shown in SHOWN if shown not in out and shown not in dropped] == []


def assert_plain(out: str, dropped: tuple[str, ...] = ()) -> None:
    """Piped output carries no escape character at all (Rich adds none there)."""
    assert_escaped(out, dropped)
    assert "\x1b" not in out


def hostile_task(task_id: str = "T1") -> dict[str, Any]:
    return {"id": task_id, "title": f"title {HOSTILE}", "description": f"desc {HOSTILE}"}


async def asked(server: ServerThread, wait_until: Callable[..., Any]) -> None:
    """A task titled with `HOSTILE` whose session asks `HOSTILE` and fails with it."""
    async with FleetClient(server.url) as client:
        agent = await client.register("runner-1", (await client.health())["workdir"], 1234)
        ids = (agent["agent_id"], agent["epoch"])
        await client.create_tasks(GraphTasks([hostile_task()]))
        await wait_until(lambda: client.assignment(*ids))
        await client.ask("T1", ids[0], ids[1], f"question {HOSTILE}")


def piped(*args: str) -> str:
    """`codefleet ARGS | cat`: standard output a pipe."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        stdout=subprocess.PIPE,
        env={**env, "COLUMNS": "200"},
        timeout=120,
        check=True,
    )
    return done.stdout.decode("utf-8")


def in_a_terminal(*args: str) -> str:
    """`codefleet ARGS` as a terminal shows it (Rich's colours on)."""
    env = {"COLUMNS": "200", "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "NO_COLOR": None}
    result = CliRunner().invoke(app, list(args), env=env)  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_codefleet_questions_shows_a_hostile_question_escaped_piped_and_in_a_terminal(
    server: ServerThread, wait_until: Callable[..., Any]
) -> None:
    await asked(server, wait_until)

    shown = piped("questions", "--server", server.url)
    coloured = await asyncio.to_thread(in_a_terminal, "questions", "--server", server.url)

    assert "T1 asks" in shown and "question " in shown
    assert_plain(shown)
    assert_escaped(coloured)


async def test_codefleet_tasks_and_tasks_id_show_a_hostile_title_and_description_escaped(
    server: ServerThread, wait_until: Callable[..., Any]
) -> None:
    await asked(server, wait_until)

    one = piped("tasks", "T1", "--server", server.url)
    listed = piped("tasks", "--server", server.url)
    coloured = await asyncio.to_thread(in_a_terminal, "tasks", "T1", "--server", server.url)

    assert "desc " in one
    assert_plain(one, dropped=("\\x0d",))
    assert_escaped(coloured, dropped=("\\x0d",))
    assert [raw for raw in RAW if raw in listed] == []


async def test_the_log_line_of_a_hostile_question_is_one_escaped_line_on_any_console(
    server: ServerThread, wait_until: Callable[..., Any]
) -> None:
    await asked(server, wait_until)
    async with FleetClient(server.url) as client:
        events = await client.all_events()
    event = next(e for e in events if e["type"] == "question_asked")
    event["payload"]["text"] += "\n#99    12:00:00 T9: all tasks PASS"

    line = describe(event, {})
    for console in (Console(file=io.StringIO(), force_terminal=True, width=400), terminal()):
        console.print(log_text(line))
        out = console.file.getvalue()  # type: ignore[attr-defined]
        assert_escaped(out)
        assert out.count("\n") == 1 and "\\x0a#99" in out


def terminal() -> PlainConsole:
    return PlainConsole(file=io.StringIO(), force_terminal=True, width=400)


def test_the_dashboard_frame_shows_hostile_titles_notes_and_names_escaped_on_any_console() -> None:
    view = ViewModel(
        server="http://127.0.0.1:8099",
        connection="live",
        tasks=(TaskRow("T1", f"t {HOSTILE}", "failed", 1, 3, 0.0, f"n {HOSTILE}"),),
        log=(LogLine(1, "18:00:00", f"T1: {HOSTILE}", "dim", False),),
    )
    for console in (Console(file=io.StringIO(), force_terminal=True, width=400), terminal()):
        console.print(render(view))
        assert [raw for raw in RAW if raw in console.file.getvalue()] == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("draw", [render_markdown, render_html])
def test_the_report_in_markdown_and_html_shows_hostile_text_escaped(
    draw: Callable[[Report], str],
) -> None:
    report = Report(
        title=f"run {HOSTILE}",
        verdict="FAIL",
        generated_at=datetime(2026, 7, 31, tzinfo=UTC).isoformat(),
        sections=(
            Section(
                "s",
                f"section {HOSTILE}",
                (
                    Para(f"p {HOSTILE}", "bad"),
                    Facts(((f"k {HOSTILE}", f"v {HOSTILE}"),)),
                    Table(("task", "title"), (("T1", f"t {HOSTILE}"),)),
                    Code(f"output {HOSTILE}\nline two", f"label {HOSTILE}"),
                ),
            ),
        ),
    )

    out = draw(report)

    assert [raw for raw in RAW if raw in out] == []
    assert "\\x1b]0;pwned" in out and "\\u202e" in out and "line two" in out
