"""The fast path (`cli.operate.quick`) says what the full command line says, word for word.

Each case runs the same command twice against one real server, as the
installed `codefleet` runs it (`python -m codefleet`: the launcher, so the fast
path) and through Typer alone (`python -m codefleet.cli`, which has no fast
path), both with standard output a pipe, and compares standard output,
standard error and the exit status. Commands that change something are run
in pairs whose second call finds the state the first left (noted per case).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks
from codefleet.server.thread import ServerThread

FAST = [sys.executable, "-m", "codefleet"]
FULL = [sys.executable, "-m", "codefleet.cli"]
TASKS = [
    {"id": "T1", "title": "first task", "description": "do one"},
    {"id": "T2", "title": "ünïcode ✓ title", "description": "do two", "depends_on": ["T1"]},
    {"id": "T3", "title": "third", "description": "do three"},
]


class Said(NamedTuple):
    code: int
    out: str
    err: str


def run(launcher: list[str], args: list[str], cwd: Path, **env: str) -> Said:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
    done = subprocess.run(
        [*launcher, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**clean, "COLUMNS": "200", **env},
        timeout=120,
    )
    return Said(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def server(make_server: Callable[..., ServerThread], workdir: Path) -> ServerThread:
    started = make_server()

    async def load() -> None:
        async with FleetClient(started.url) as client:
            await client.create_tasks(GraphTasks(TASKS))
            await client.cancel("T3")

    asyncio.run(load())
    return started


READS = [
    ["tasks"],
    ["tasks", "--json"],
    ["tasks", "--status", "cancelled"],
    ["tasks", "--status=pending", "--json"],
    ["tasks", "--status", "bogus"],
    ["tasks", "--patch"],
    ["tasks", "T1", "--json"],
    ["tasks", "T1", "--patch"],
    ["tasks", "NOPE", "--json"],
    ["questions"],
    ["questions", "--json"],
    ["answer", "T1", "yes"],
    ["answer", "T1", "yes", "--question", "q-1"],
    ["say", "NOPE", "hello"],
    ["release"],
    ["release", "--session", "nobody"],
    ["release", "--all-interactive"],
    ["release", "nothing-held"],
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_command_that_finds_nothing_to_change_says_the_same_on_both_paths(
    server: ServerThread, workdir: Path, args: list[str]
) -> None:
    given = [*args, "--server", server.url]

    assert run(FAST, given, workdir) == run(FULL, given, workdir)


def test_an_empty_server_s_tasks_says_how_to_start_on_both_paths(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    empty = make_server()
    given = ["tasks", "--server", empty.url]

    fast, full = run(FAST, given, workdir), run(FULL, given, workdir)
    filtered = run(FAST, [*given, "--status", "failed"], workdir)

    assert fast == full and fast.code == 0
    assert "no task on this server yet: `codefleet run` loads ./codefleet.yaml" in fast.err
    assert "no task on this server" not in filtered.err  # a filter that finds none: no hint


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (["hold", "db"], ["release", "db"]),  # held, given back; the same again
        (["hold", "db", "--json"], ["release", "db", "--json"]),
        (["say", "T1", "hello"], None),  # the message's number goes up by one
    ],
    ids=["hold-release", "hold-release-json", "say"],
)
def test_a_command_that_changes_something_says_the_same_on_both_paths(
    server: ServerThread, workdir: Path, first: list[str], then: list[str] | None
) -> None:
    at = ["--server", server.url]
    full_first = run(FULL, [*first, *at], workdir)
    full_then = run(FULL, [*then, *at], workdir) if then else None
    fast_first = run(FAST, [*first, *at], workdir)
    fast_then = run(FAST, [*then, *at], workdir) if then else None

    if then is None:  # say: message #N, then #N+1
        assert fast_first == full_first._replace(out=full_first.out.replace("#1 ", "#2 "))
        assert "T1: message #1 kept; attempt 1's prompt will carry it" in full_first.out
    else:
        assert (fast_first, fast_then) == (full_first, full_then)
        assert full_first.code == 0 and full_then is not None and full_then.code == 0


def test_no_server_and_a_refused_token_say_the_same_on_both_paths(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    guarded = make_server(token="s3cret-token")
    cases = [
        ["tasks", "--server", "http://127.0.0.1:9"],
        ["questions", "--server", guarded.url],
        ["tasks", "--server", guarded.url, "--token", "wrong"],
        ["tasks", "--server", guarded.url, "--token", "s3cret-token", "--json"],
    ]

    for args in cases:
        fast, full = run(FAST, args, workdir), run(FULL, args, workdir)
        assert fast == full, args
    assert "no CodeFleet server answers at http://127.0.0.1:9" in run(FAST, cases[0], workdir).err


def test_inside_the_tree_both_paths_find_its_server_and_say_which(
    server: ServerThread, workdir: Path
) -> None:
    inside = workdir / "pkg" / "sub"
    inside.mkdir(parents=True)

    fast, full = run(FAST, ["tasks"], inside), run(FULL, ["tasks"], inside)

    assert fast == full
    assert fast.err.startswith(f"server: {server.url} (the server of the tree ")
    assert "first task" in fast.out


@pytest.mark.parametrize(
    ("env", "dotenv"),
    [
        ({"codefleet_server_url": "URL"}, None),  # any case, as pydantic-settings reads it
        ({}, "CODEFLEET_SERVER_URL=URL\n"),
        ({}, "export CODEFLEET_SERVER_URL='URL'\n"),
        ({}, 'CODEFLEET_SERVER_URL="URL"  # a comment the fast path does not read\n'),
        ({"CODEFLEET_TOKEN": "  "}, None),  # refused by the settings: the full path says so
        ({"CODEFLEET_PORT": "eighty"}, None),
    ],
)
def test_the_environment_and_dotenv_are_read_as_the_settings_read_them(
    server: ServerThread, tmp_path: Path, env: dict[str, str], dotenv: str | None
) -> None:
    here = tmp_path / "elsewhere"
    here.mkdir()
    if dotenv is not None:
        (here / ".env").write_text(dotenv.replace("URL", server.url))
    given = {k: v.replace("URL", server.url) for k, v in env.items()}

    fast, full = run(FAST, ["tasks"], here, **given), run(FULL, ["tasks"], here, **given)

    assert fast == full
