"""A person's own Claude Code session in the lock, over HTTP against a real server.

The person's side is the real hook code (`codefleet.hook.command.run`, and the
`codefleet hook` process itself) talking to a `ServerThread` on loopback; the
fleet's side is the real `FleetClient`, as a runner uses it. The lifecycle:
a write takes a lease lazily, shown with its kind (`interactive`) in `/leases`
and `/agents`; fleet writes to it are vetoed and requeued, and the scheduler
keeps overlapping tasks away; SessionEnd, `release` or the idle timeout frees
it, with an event that says which; nothing is ever rolled back.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import events_of

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.errors import NotFound
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.hook.command import HookArgs, run
from codefleet.models import ErrorKind
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

ADA = "0aeef531-72cc-4552-9656-7482e7ecde15"
BOB = "1b2c3d4e-0000-4000-8000-000000000000"
WaitUntil = Callable[..., Awaitable[Any]]


def person(
    server: ServerThread, workdir: Path, event: str, session: str = ADA, **tool_input: Any
) -> str:
    """One call of the person's hook, as Claude Code makes it; returns what the hook printed."""
    body: dict[str, Any] = {"session_id": session, "cwd": str(workdir)}
    if event == "session-end":
        body.update(hook_event_name="SessionEnd", reason="other")
    else:
        body.update(tool_name=tool_input.pop("tool", "Write"), tool_input=tool_input)
    args = HookArgs(event, server.url, str(workdir))
    user = "ada" if session == ADA else "bob"
    return run(args, json.dumps(body), {"USER": user})


def writes(server: ServerThread, workdir: Path, path: str, session: str = ADA) -> str:
    return person(
        server, workdir, "pre-tool-use", session, file_path=str(workdir / path), content="x"
    )


def reason(printed: str) -> str:
    return str(json.loads(printed)["hookSpecificOutput"]["permissionDecisionReason"])


async def leases(client: FleetClient) -> dict[str, tuple[str, str, str]]:
    return {
        row["path"]: (row["holder_agent_name"], row["task_id"], row["kind"])
        for row in await client.leases()
    }


async def runner_on(client: FleetClient, workdir: Path, name: str, task: dict[str, Any]) -> Any:
    """A runner registered, handed `task` and started, exactly as a runner does it."""
    agent = await client.register(name, str(workdir), 4242)
    await client.create_tasks([task])
    assigned = await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
    assert assigned is not None and assigned.id == task["id"]
    await client.start(task["id"], agent["agent_id"], agent["epoch"])
    return agent


# -- taking a lease ------------------------------------------------------------------------


async def test_a_persons_write_takes_an_interactive_lease_shown_with_its_kind(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py") == ""

    assert await leases(client) == {"a.py": ("ada@0aeef531", "i-0aeef531", "interactive")}
    agents = {a["name"]: a for a in await client.agents()}
    ada = agents["ada@0aeef531"]
    assert (ada["kind"], ada["status"], ada["session_id"], ada["leases"]) == (
        "interactive",
        "busy",
        ADA,
        1,
    )
    assert ada["current_task_id"] == "i-0aeef531"
    registered = await events_of(client, "agent_registered")
    assert registered[-1]["payload"]["kind"] == "interactive"


async def test_a_session_id_that_is_the_prefix_of_another_gets_a_holder_of_its_own(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py", session="abcdef01-2345") == ""
    assert writes(server, workdir, "b.py", session="abcdef01") == ""

    held = await leases(client)
    assert held["a.py"][1] == "i-abcdef01"
    assert held["b.py"][1] not in ("i-abcdef01", "")


async def test_paths_are_canonicalized_exactly_like_the_runners(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    edits = [{"file_path": str(workdir / "pkg//b.py")}, {"file_path": "./a.py"}]
    printed = person(
        server, workdir, "pre-tool-use", file_path="pkg/../a.py", edits=edits, tool="MultiEdit"
    )
    assert printed == ""
    assert set(await leases(client)) == {"a.py", "pkg/b.py"}


async def test_the_persons_write_to_a_fleet_held_file_is_denied_naming_holder_task_and_title(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    task = {"id": "T3", "title": "Add rate limiting", "description": "Limit.", "file_scope": []}
    runner = await runner_on(client, workdir, "runner-2", task)
    granted = await client.acquire(runner["agent_id"], runner["epoch"], "T3", ["a.py"], "Edit")
    assert granted["decision"] == "allow"

    printed = writes(server, workdir, "a.py")

    assert reason(printed) == (
        "a.py is being edited by runner-2 for task T3 (Add rate limiting); "
        "wait for it (codefleet watch) or work on another file."
    )
    assert await leases(client) == {"a.py": ("runner-2", "T3", "task")}
    denied = (await events_of(client, "lease_denied"))[-1]["payload"]
    assert (denied["requester_name"], denied["holder_agent_name"]) == ("ada@0aeef531", "runner-2")


async def test_two_people_exclude_each_other(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py", ADA) == ""
    assert writes(server, workdir, "a.py", ADA) == ""  # your own lease again is allow
    assert reason(writes(server, workdir, "a.py", BOB)).startswith(
        "a.py is being edited by ada@0aeef531 in another session;"
    )
    assert writes(server, workdir, "pkg/b.py", BOB) == ""


async def test_a_short_session_id_equal_to_anothers_prefix_gets_a_name_of_its_own(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py", "abcdef01-2345") == ""
    assert writes(server, workdir, "b.py", "abcdef01") == ""  # 500 UNIQUE task_id, before

    held = await leases(client)
    assert held["a.py"][1] != held["b.py"][1]


# -- the fleet meets a person's file -----------------------------------------------------------


async def test_a_fleet_write_to_the_persons_file_is_vetoed_and_requeued_with_the_path(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py") == ""
    task = {"id": "T1", "title": "edit a", "description": "Edit a.", "file_scope": ["pkg/b.py"]}
    runner = await runner_on(client, workdir, "runner-1", task)

    answer = await client.acquire(runner["agent_id"], runner["epoch"], "T1", ["a.py"], "Write")

    assert answer["decision"] == "deny"
    held = answer["denied"][0]
    assert (held["holder_agent_name"], held["holder_task_id"], held["holder_kind"]) == (
        "ada@0aeef531",
        "i-0aeef531",
        "interactive",
    )
    gate = WriteGate(client, TreeRoot(workdir), runner["agent_id"], runner["epoch"], "T1")
    verdict = await gate.check("Edit", {"file_path": str(workdir / "a.py")})
    assert not verdict.allowed and gate.blocked_on == "a.py"
    assert verdict.reason.startswith(
        "a.py is being edited by ada@0aeef531, a person working in this tree."
    )
    report = AttemptReport(attempt=1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path="a.py")
    await client.complete("T1", runner["agent_id"], runner["epoch"], report)
    row = await client.task("T1")
    assert row["status"] == "pending" and "a.py" in row["file_scope"]


async def test_the_scheduler_keeps_tasks_off_the_persons_paths_until_released(
    client: FleetClient, server: ServerThread, workdir: Path, wait_until: WaitUntil
) -> None:
    assert writes(server, workdir, "a.py") == ""
    for name in ("runner-1", "runner-2"):
        await client.register(name, str(workdir), 4242)
    await client.create_tasks(
        [
            {
                "id": "over",
                "title": "o",
                "description": "O.",
                "priority": 5,
                "file_scope": ["a.py"],
            },
            {
                "id": "free",
                "title": "f",
                "description": "F.",
                "priority": 1,
                "file_scope": ["pkg/b.py"],
            },
        ]
    )

    async def status(task_id: str) -> str:
        return str((await client.task(task_id))["status"])

    await wait_until(lambda: _is(status("free"), "assigned"))
    # The tick that assigned `free` had two idle runners and skipped the better `over`.
    assert await status("over") == "pending"

    assert person(server, workdir, "session-end") == ""
    await wait_until(lambda: _is(status("over"), "assigned"))


async def _is(value: Awaitable[str], expected: str) -> bool:
    return await value == expected


# -- letting go ---------------------------------------------------------------------------------


async def test_session_end_releases_every_lease_and_nothing_is_rolled_back(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py") == ""
    (workdir / "a.py").write_text("A = 'the person wrote this'\n")  # the write the hook allowed
    assert writes(server, workdir, "new.py") == ""
    (workdir / "new.py").write_text("NEW = 1\n")

    assert person(server, workdir, "session-end") == ""

    assert await leases(client) == {}
    offline = (await events_of(client, "agent_offline"))[-1]["payload"]
    assert (offline["name"], offline["reason"], offline["paths"]) == (
        "ada@0aeef531",
        "session_end",
        ["a.py", "new.py"],
    )
    assert await events_of(client, "file_restored") == []
    assert (workdir / "a.py").read_text() == "A = 'the person wrote this'\n"
    assert (workdir / "new.py").read_text() == "NEW = 1\n"
    ada = {a["name"]: a for a in await client.agents()}["ada@0aeef531"]
    assert (ada["status"], ada["leases"], ada["end_reason"]) == ("offline", 0, "session_end")


async def test_a_session_that_writes_again_after_its_end_comes_back(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py") == ""
    assert person(server, workdir, "session-end") == ""
    assert writes(server, workdir, "a.py") == ""
    assert await leases(client) == {"a.py": ("ada@0aeef531", "i-0aeef531", "interactive")}
    assert (await events_of(client, "agent_online"))[-1]["payload"]["name"] == "ada@0aeef531"


async def test_the_operator_releases_one_session_or_all_of_them(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py", ADA) == ""
    assert writes(server, workdir, "pkg/b.py", BOB) == ""

    one = await client.release_person(BOB, every=False)
    assert [(r["name"], r["paths"], r["reason"]) for r in one["released"]] == [
        ("bob@1b2c3d4e", ["pkg/b.py"], "operator")
    ]
    assert set(await leases(client)) == {"a.py"}

    rest = await client.release_person(None, every=True)
    assert [r["name"] for r in rest["released"]] == ["ada@0aeef531"]
    assert await leases(client) == {}
    with pytest.raises(NotFound):
        await client.release_person("no-such-session", every=False)


async def test_an_idle_session_is_released_with_an_event_that_says_so(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: WaitUntil
) -> None:
    server = make_server(interactive_idle=0.2)
    async with FleetClient(server.url) as client:
        assert writes(server, workdir, "a.py") == ""
        offline = await wait_until(lambda: events_of(client, "agent_offline"))
        assert (offline[0]["payload"]["reason"], offline[0]["payload"]["paths"]) == (
            "interactive_idle",
            ["a.py"],
        )
        assert await leases(client) == {}


async def test_post_tool_use_records_the_ledger_row_and_never_vetoes(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py") == ""
    printed = person(server, workdir, "post-tool-use", file_path=str(workdir / "a.py"), content="x")
    assert printed == ""
    changed = (await events_of(client, "file_changed"))[-1]
    assert (changed["task_id"], changed["payload"]["path"], changed["payload"]["kind"]) == (
        "i-0aeef531",
        "a.py",
        "interactive",
    )


async def test_a_persons_read_is_a_read_row_with_the_content_hash_and_no_event(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    (workdir / "a.py").write_text("A = 1\n")
    before = len(await client.all_events())
    printed = person(server, workdir, "post-tool-use", tool="Read", file_path=str(workdir / "a.py"))
    assert printed == ""
    with sqlite3.connect(f"file:{server.settings.db}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT task_id, path, tool, sha256 FROM file_changes WHERE kind = 'read'"
        )
        assert list(rows) == [
            ("i-0aeef531", "a.py", "Read", hashlib.sha256(b"A = 1\n").hexdigest())
        ]
    assert len(await client.all_events()) == before  # a read is a record, not news
    assert await client.agents() == [] or all(
        a.get("kind") != "interactive" for a in await client.agents()
    )


# -- the wire ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("/interactive/acquire", {"session_id": "", "paths": ["a.py"]}, 422),
        ("/interactive/acquire", {"session_id": "../x", "paths": ["a.py"]}, 422),
        ("/interactive/acquire", {"session_id": ADA, "paths": []}, 422),
        ("/interactive/release", {}, 400),
        ("/interactive/release", {"session_id": ADA, "all": True}, 400),
    ],
)
async def test_bad_interactive_requests_get_the_error_envelope(
    http: httpx.AsyncClient, route: str, body: dict[str, Any], status: int
) -> None:
    answer = await http.post(route, json=body)
    assert answer.status_code == status
    assert set(answer.json()["error"]) == {"code", "message", "detail"}


async def test_a_path_the_fleet_cannot_lease_is_skipped_not_denied(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    body = {"session_id": ADA, "paths": [str(tmp_path / "elsewhere.txt"), ".git/config"]}
    answer = (await http.post("/interactive/acquire", json=body)).json()
    assert (answer["decision"], answer["granted"], len(answer["skipped"])) == ("allow", [], 2)
    assert (await http.get("/agents")).json()["agents"] == [], "no holder for nothing held"


# -- the hook process against the server ----------------------------------------------------------


def hook_process(
    server: ServerThread, workdir: Path, stdin: dict[str, Any], **env: str
) -> subprocess.CompletedProcess[str]:
    argv = ["hook", "pre-tool-use", "--server", server.url, "--tree", str(workdir)]
    return subprocess.run(
        [sys.executable, "-m", "codefleet", *argv],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin", **env},
    )


def write_call(workdir: Path, path: str, session: str = ADA) -> dict[str, Any]:
    return {
        "session_id": session,
        "cwd": str(workdir),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(workdir / path), "content": "x"},
    }


async def test_the_hook_process_prints_nothing_to_allow_and_the_exact_denial_to_refuse(
    server: ServerThread, workdir: Path
) -> None:
    allowed = hook_process(server, workdir, write_call(workdir, "a.py", ADA), USER="ada")
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")
    denied = hook_process(server, workdir, write_call(workdir, "a.py", BOB), USER="bob")
    assert denied.returncode == 0
    assert json.loads(denied.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "a.py is being edited by ada@0aeef531 in another "
            "session; wait for it (codefleet watch) or work on another file.",
        }
    }


async def test_the_hook_sends_the_token_from_the_sessions_environment(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(token="s3cret")
    refused = hook_process(server, workdir, write_call(workdir, "a.py"))
    assert "refused the lease request" in reason(refused.stdout)
    allowed = hook_process(server, workdir, write_call(workdir, "a.py"), CODEFLEET_TOKEN="s3cret")
    assert (allowed.returncode, allowed.stdout) == (0, "")


# -- the operator's commands ---------------------------------------------------------------------

CODEFLEET = Path(sys.executable).parent / "codefleet"


def codefleet(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CODEFLEET), *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


async def test_codefleet_release_frees_a_session_named_by_prefix_or_all_of_them(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    assert writes(server, workdir, "a.py", ADA) == ""
    assert writes(server, workdir, "pkg/b.py", BOB) == ""

    one = codefleet("release", "--session", "1b2c", "--server", server.url)
    assert one.returncode == 0, one.stderr
    assert f"released bob@1b2c3d4e ({BOB}): pkg/b.py" in one.stdout
    assert set(await leases(client)) == {"a.py"}

    every = codefleet("release", "--all-interactive", "--server", server.url, "--json")
    assert [r["name"] for r in json.loads(every.stdout)["released"]] == ["ada@0aeef531"]
    assert await leases(client) == {}

    neither = codefleet("release", "--server", server.url)
    assert neither.returncode == 2 and "`codefleet release NAME...`" in neither.stderr
    assert "`codefleet release --session ID` (or --all-interactive)" in neither.stderr
    unknown = codefleet("release", "--session", "zzz", "--server", server.url)
    assert unknown.returncode == 1 and "no interactive session matches 'zzz'" in unknown.stderr


async def test_join_refuses_a_server_that_coordinates_another_tree(
    server: ServerThread, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = codefleet("join", "--server", server.url, cwd=elsewhere)
    assert done.returncode == 1
    assert "coordinates" in done.stderr and "Nothing was written" in done.stderr
    assert not (elsewhere / ".claude").exists()


async def test_a_restart_keeps_a_persons_leases_and_session(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "restart.sqlite"
    first = make_server(db=db)
    assert writes(first, workdir, "a.py") == ""
    first.stop()
    second = make_server(db=db, port=first.settings.port)
    async with FleetClient(second.url) as client:
        assert await leases(client) == {"a.py": ("ada@0aeef531", "i-0aeef531", "interactive")}
        assert reason(writes(second, workdir, "a.py", BOB)).startswith(
            "a.py is being edited by ada@0aeef531"
        )
        assert person(second, workdir, "session-end") == ""
        assert await leases(client) == {}


async def test_the_servers_protected_names_and_hard_links_are_not_the_persons_problem(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    (workdir / ".claude").mkdir()
    (workdir / "linked.py").write_text("L = 1\n")
    os.link(workdir / "linked.py", workdir / "other-name.py")
    assert writes(server, workdir, ".claude/settings.json") == ""
    assert writes(server, workdir, "linked.py") == ""
    assert await leases(client) == {}


async def test_a_name_the_server_does_not_protect_is_leased_like_any_file(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """The hook leaves the configurable names to the server (here: none but `.git`)."""
    server = make_server(protected_paths="")
    async with FleetClient(server.url) as client:
        assert writes(server, workdir, ".claude/settings.json") == ""
        assert set(await leases(client)) == {".claude/settings.json"}


async def test_a_copilot_write_without_a_session_id_is_leased_to_the_tree_s_copilot_holder(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    body = {"cwd": str(workdir), "toolName": "create", "toolArgs": {"path": "c.py"}}
    args = HookArgs("pre-tool-use", server.url, str(workdir), False, "copilot")
    assert run(args, json.dumps(body), {"USER": "ada"}) == ""

    holder = (await leases(client))["c.py"]
    assert holder[0] == "ada@copilot-tree" and holder[2] == "interactive"  # whole, not cut
