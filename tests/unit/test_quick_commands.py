"""The commands a person types while a fleet runs start without the heavy packages.

`tasks`, `say`, `answer`, `questions`, `hold` and `release` go through
`cli.operate.quick` (standard library only) when the `codefleet` executable starts
them: this guards what they load, not how long they take (the figures are in
docs/performance-startup.md, "The fleet-time commands"). Each runs in a new
process against a port where nothing answers, so it goes as far as its
request. Their output beside Typer's is tests/integration/test_quick_commands.py.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys

import pytest

# Never loaded by the fast commands; each is what the full command line brings.
HEAVY = (
    "typer",
    "click",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "rich",
    "asyncio",
    "yaml",
    "fastapi",
    "starlette",
    "uvicorn",
    "claude_agent_sdk",
    "codefleet.coord",
    "codefleet.config",
    "codefleet.api.client",
)
# Never loaded by a fleet-time command's help: it loads that command's module (and the wire
# client the module imports, httpx), never the server, the engine or a session.
SERVER_SIDE = ("fastapi", "starlette", "uvicorn", "claude_agent_sdk", "codefleet.coord")
FAST = [
    ["--version"],
    ["tasks"],
    ["tasks", "--json"],
    ["tasks", "T1", "--patch"],
    ["say", "T1", "hello"],
    ["answer", "T1", "yes"],
    ["questions"],
    ["hold", "db"],
    ["release", "db"],
    ["release", "--all-interactive"],
    ["release"],
]


def loaded_after(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of `names` are in `sys.modules` once `codefleet <argv>` has run (the launcher)."""
    code = (
        "import sys\n"
        f"sys.argv = ['codefleet', *{argv!r}]\n"
        "from codefleet.cli.launch import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {names!r} if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
    env["CODEFLEET_SERVER_URL"] = "http://127.0.0.1:9"  # nothing answers there
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    marker = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert marker, done.stdout + done.stderr
    return list(ast.literal_eval(marker[-1].removeprefix("LOADED ")))


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
def test_a_fleet_time_command_loads_none_of_the_heavy_packages(argv: list[str]) -> None:
    assert loaded_after(argv, HEAVY) == [], (
        f"`codefleet {' '.join(argv)}` took the full command line: see cli/operate/quick.py"
    )


@pytest.mark.parametrize("command", ["tasks", "say", "release"])
def test_a_fleet_time_commands_help_loads_no_server_client_or_session(command: str) -> None:
    assert loaded_after([command, "--help"], SERVER_SIDE) == []


def test_the_launcher_and_the_fast_path_name_the_same_commands() -> None:
    from codefleet.cli.launch import QUICK_COMMANDS
    from codefleet.cli.operate.quick import COMMANDS

    assert QUICK_COMMANDS == COMMANDS


@pytest.mark.parametrize(
    "argv",
    [
        ["tasks", "--help"],
        ["tasks", "-h"],
        ["tasks", "T1"],  # the detail view is Rich's
        ["say", "T1"],
        ["say", "T1", "a", "b"],
        ["say", "T1", "--", "-x"],
        ["hold"],
        ["tasks", "--status"],
        ["tasks", "--json", "--json"],
        ["tasks", "--verbose"],
        ["tasks", "--json=yes"],
    ],
    ids=" ".join,
)
def test_what_the_fast_path_does_not_take_exactly_as_typer_goes_to_typer(
    argv: list[str],
) -> None:
    from codefleet.cli.operate.quick import parse

    parsed = parse(argv)

    assert parsed is None or (argv[0] == "tasks" and argv[1:] == ["T1"])


def test_the_fast_table_is_the_text_rich_prints_for_the_task_table() -> None:
    from codefleet.cli.operate.quicktable import render, task_cells
    from codefleet.cli.output import PlainConsole
    from codefleet.ui.report import task_table

    tasks = [
        {"id": "T1", "title": "Add a thing", "status": "succeeded", "attempts": 2,
         "max_attempts": 3, "cost_usd": 0.01234, "result_summary": "did it",
         "error_kind": "veto"},
        {"id": "T22", "title": "x", "status": "failed", "attempts": 3, "max_attempts": 3,
         "error": "boom\nsecond line"},
        {"id": "T3", "title": "ünïcode ✓", "status": "pending", "attempts": 0,
         "max_attempts": 3},
        {"id": "T4", "title": "stopped", "status": "pending", "attempts": 3,
         "uncharged_attempts": 3, "max_attempts": 3, "error": "interrupted"},
        {"id": "T5", "title": "retried", "status": "running", "attempts": 5,
         "uncharged_attempts": 4, "retried_attempts": 3, "max_attempts": 3},
    ]  # fmt: skip
    for shown in (tasks, []):
        out = io.StringIO()
        PlainConsole(file=out).print(task_table(list(shown), crop=False))
        rows = [task_cells(t, crop=False) for t in shown]

        assert render(rows, width=None, styled=False) == out.getvalue()


def test_a_task_s_free_attempts_and_those_before_a_retry_read_apart_from_the_charged_ones() -> None:
    from codefleet.cli.operate.quicktable import task_cells

    interrupted = {"id": "T1", "title": "t", "status": "pending", "attempts": 3,
                   "uncharged_attempts": 3, "max_attempts": 3, "error": "interrupted"}  # fmt: skip
    retried = {**interrupted, "attempts": 5, "uncharged_attempts": 4, "retried_attempts": 3}

    assert task_cells(interrupted, crop=False)[3] == "0/3 +3 free"  # not 3/3: none was charged
    assert task_cells(retried, crop=False)[3] == "1/3 +1 free +3 before retry"


def test_the_fast_table_colours_every_status_the_rich_table_styles() -> None:
    from codefleet.cli.operate.quicktable import STATUS_SGR
    from codefleet.models import TaskStatus
    from codefleet.ui.report import STATUS_STYLE

    assert set(STATUS_SGR) == set(STATUS_STYLE)
    assert set(STATUS_SGR) <= {str(s) for s in TaskStatus}


def test_on_a_narrow_terminal_the_fast_table_wraps_its_widest_column_to_fit() -> None:
    from codefleet.cli.operate.quicktable import render

    row = ("T1", "a title " * 6, "failed", "1/3", "0.0000", "a long error message " * 3)
    lines = render([row], width=60, styled=False).splitlines()

    assert max(len(line) for line in lines) <= 60
    assert "".join(lines).count("error") == 3


def test_the_fast_table_shows_an_agents_control_characters_escaped() -> None:
    from codefleet.cli.operate.quicktable import render, task_cells

    hostile = {"id": "T1", "title": "\x1b]0;pwned\x07 x\r", "status": "failed",
               "attempts": 1, "max_attempts": 3, "error": "\x1b[2Jcleared \u202egnp.exe"}  # fmt: skip

    for styled in (False, True):
        text = render([task_cells(hostile, crop=styled)], width=200, styled=styled)
        raw = [c for c in ("\x1b]", "\x07", "\r", "\x1b[2J", "\u202e") if c in text]
        assert raw == [] and "\\x1b]0;pwned\\x07" in text
