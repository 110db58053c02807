"""The bad-path corpus: what a write tool may name, through the pre-write gate and the server.

A real server whose database and run directory lie INSIDE the tree (the case
the protection exists for), one running task, and a real `WriteGate` as a
runner builds it. Every refused spelling is tried through both doors: the gate
(what the hook runs before any write) must refuse it with a reason the model
can read, and `POST /leases/acquire` called directly (a hook that skipped its
own check) must deny it too. Nothing may change: no lease, no event, no file.

Look-alikes are not refusals: a fullwidth solidus, a Cyrillic letter, a
decomposed accent or a backslash name a DIFFERENT file on this file system, so
the right answer is a lease on that file under its own key, never the lease of
the file it imitates (docs/security-agents.md, "Paths").
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from corpus_support import Witness, assert_envelope
from fleet_support import server_settings

from codefleet.api.client import FleetClient
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread


@dataclass
class Door:
    server: ServerThread
    tree: Path
    outside: Path
    witness: Witness
    agent_id: str
    epoch: int


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    root = tmp_path_factory.mktemp("paths")
    tree, outside = root / "tree", root / "outside"
    for directory in (tree / "pkg", tree / ".git", tree / "runs" / "sessions", outside):
        directory.mkdir(parents=True)
    (tree / ".git" / "config").write_text("[core]\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    (tree / "data.py").write_text("D = 1\n")
    (tree / "runs" / "sessions" / "T1-attempt1.json").write_text("{}\n")
    (outside / "secret.txt").write_text("secret\n")
    (tree / "vendor" / "lib" / ".git").mkdir(parents=True)
    (tree / "vendor" / "lib" / ".git" / "config").write_text("[core]\n")
    (tree / ".claude").mkdir()
    (tree / ".claude" / "settings.json").write_text("{}\n")
    (tree / ".mcp.json").write_text("{}\n")
    (tree / "linked.py").write_text("L = 1\n")
    os.link(tree / "linked.py", tree / "pkg" / "linked_twin.py")
    os.symlink(outside, tree / "link_out")
    os.symlink("/etc/passwd", tree / "passwd_link")
    os.symlink(tree / ".git", tree / "gitlink")
    os.symlink(".git/config", tree / "config_link")
    os.symlink("codefleet.db", tree / "db_link")
    settings = server_settings(tree, tree, db=tree / "codefleet.db")
    with ServerThread(settings) as server, httpx.Client(base_url=server.url) as http:
        http.post(
            "/tasks", json={"tasks": [{"id": "T1", "title": "t", "description": "do it"}]}
        ).raise_for_status()
        agent = http.post(
            "/agents/register", json={"name": "runner-1", "workdir": str(tree)}
        ).json()
        epoch = {"X-Agent-Epoch": str(agent["epoch"])}
        assert http.get(f"/agents/{agent['agent_id']}/assignment?wait=5", headers=epoch).json()
        http.post("/tasks/T1/start", json={"agent_id": agent["agent_id"]}, headers=epoch)
        witness = Witness(
            settings.db, tree, skip=("codefleet.db", "codefleet.db-wal", "codefleet.db-shm")
        )
        yield Door(server, tree, outside, witness, agent["agent_id"], agent["epoch"])


@pytest.fixture
async def gate(door: Door) -> AsyncIterator[WriteGate]:
    protected = (door.tree / "codefleet.db", door.tree / "runs")
    async with FleetClient(door.server.url) as client:
        yield WriteGate(client, TreeRoot(door.tree, protected), door.agent_id, door.epoch, "T1")


def refused(door: Door) -> dict[str, tuple[str, str, str]]:
    """raw spelling -> (what the gate says, the server's deny reason) for every refused path."""
    outside, tree = door.outside, door.tree
    return {
        "an absolute path outside": ("/etc/passwd", "outside the shared working tree", "outside_workdir"),
        "an absolute path beside the tree": (str(outside / "secret.txt"), "outside the shared working tree", "outside_workdir"),
        "a .. escape": ("../outside/secret.txt", "outside the shared working tree", "outside_workdir"),
        "a .. escape through a subdirectory": ("pkg/../../outside/x.py", "outside the shared working tree", "outside_workdir"),
        "a symlinked directory escaping the tree": ("link_out/secret.txt", "outside the shared working tree", "outside_workdir"),
        "a symlinked file escaping the tree": ("passwd_link", "outside the shared working tree", "outside_workdir"),
        "a path into .git": (".git/hooks/pre-commit", "is a protected path", "protected_path"),
        "a symlinked directory into .git": ("gitlink/config", "is a protected path", "protected_path"),
        "a symlinked file into .git": ("config_link", "is a protected path", "protected_path"),
        "a NUL byte": ("pkg/b.py\x00.txt", "unusable path", "invalid_path"),
        "a path over 4096 characters": ("d/" * 2100 + "x.py", "unusable path", "invalid_path"),
        "a name longer than the file system allows": ("x" * 300 + ".py", "File name too long", "invalid_path"),
        "an empty path": ("", "named no file path", "invalid_path"),
        "a directory": ("pkg", "is a directory", "invalid_path"),
        "the tree itself": (".", "names the tree itself", "invalid_path"),
        "the database file": ("codefleet.db", "is a protected path", "protected_path"),
        "the database by its absolute path": (str(tree / "codefleet.db"), "is a protected path", "protected_path"),
        "the database through a symlink": ("db_link", "is a protected path", "protected_path"),
        "the database's write-ahead log": ("codefleet.db-wal", "is a protected path", "protected_path"),
        "the database's shared memory": ("codefleet.db-shm", "is a protected path", "protected_path"),
        "the run directory": ("runs", "is a protected path", "protected_path"),
        "a file in the run directory": ("runs/sessions/T1-attempt1.json", "is a protected path", "protected_path"),
        "a nested repository's .git": ("vendor/lib/.git/config", "is a protected path", "protected_path"),
        ".git in another letter case": (".GIT/config", "is a protected path", "protected_path"),
        "the tree's Claude Code settings": (".claude/settings.json", "is a protected path", "protected_path"),
        "new Claude Code settings in a subdirectory": ("pkg/.claude/settings.local.json", "is a protected path", "protected_path"),
        "the tree's MCP configuration": (".mcp.json", "is a protected path", "protected_path"),
        "a file with a second hard link": ("linked.py", "2 hard links", "hard_link"),
        "the second name of that file": ("pkg/linked_twin.py", "2 hard links", "hard_link"),
        "the home directory by tilde": ("~/.bashrc", "outside the shared working tree", "outside_workdir"),
    }  # fmt: skip


REFUSED_IDS = list(refused(Door(None, Path("/t"), Path("/o"), None, "", 0)))  # type: ignore[arg-type]


@pytest.mark.parametrize("item", REFUSED_IDS)
async def test_a_refused_path_is_denied_by_the_gate_with_a_reason_and_changes_nothing(
    door: Door, gate: WriteGate, item: str
) -> None:
    raw, says, _ = refused(door)[item]
    before = door.witness.picture()

    verdict = await gate.check("Write", {"file_path": raw, "content": "x"})

    assert not verdict.allowed
    assert says in verdict.reason, verdict.reason
    assert "Do not retry" in verdict.reason or "refused" in verdict.reason
    assert door.witness.picture() == before


# The wire refuses a path longer than `wire.MAX_PATH` before the engine sees it (test below).
WIRE_REFUSED = ("a path over 4096 characters",)


@pytest.mark.parametrize("item", [i for i in REFUSED_IDS if i not in WIRE_REFUSED])
async def test_the_server_denies_the_same_path_when_asked_directly(door: Door, item: str) -> None:
    raw, _, reason = refused(door)[item]
    before = door.witness.picture()

    async with FleetClient(door.server.url) as client:
        answer = await client.acquire(door.agent_id, door.epoch, "T1", [raw], "Write")

    assert answer["decision"] == "deny", answer
    assert [d["reason"] for d in answer["denied"]] == [reason]
    assert door.witness.picture() == before


async def test_a_path_the_wire_cannot_carry_is_a_422_envelope(door: Door) -> None:
    raw, _, _ = refused(door)[WIRE_REFUSED[0]]
    body = {"agent_id": door.agent_id, "task_id": "T1", "paths": [raw], "tool": "Write"}
    before = door.witness.picture()

    async with httpx.AsyncClient(base_url=door.server.url) as http:
        response = await http.post(
            "/leases/acquire", json=body, headers={"X-Agent-Epoch": str(door.epoch)}
        )

    assert_envelope(response, 422, "invalid_request")
    assert door.witness.picture() == before


async def test_one_bad_path_in_a_multi_path_tool_refuses_the_whole_call(
    door: Door, gate: WriteGate
) -> None:
    before = door.witness.picture()
    edits = [
        {"file_path": "pkg/b.py", "old_string": "B", "new_string": "C"},
        {"file_path": "../outside/secret.txt", "old_string": "s", "new_string": "t"},
    ]

    verdict = await gate.check("MultiEdit", {"file_path": "pkg/b.py", "edits": edits})

    assert not verdict.allowed
    assert door.witness.picture() == before


LOOK_ALIKES: dict[str, tuple[str, str]] = {
    # name: (the look-alike spelling, the file it imitates)
    "a fullwidth solidus": ("pkg\uff0fb.py", "pkg/b.py"),
    "a division slash": ("pkg\u2215b.py", "pkg/b.py"),
    "a Cyrillic a": ("d\u0430ta.py", "data.py"),
    "a decomposed accent": ("cafe\u0301.py", "caf\u00e9.py"),
    "a backslash": ("pkg\\b.py", "pkg/b.py"),
    "another letter case": ("Data.py", "data.py"),
}


@pytest.mark.parametrize("item", LOOK_ALIKES, ids=list(LOOK_ALIKES))
async def test_a_look_alike_is_another_file_with_its_own_key_not_the_lease_of_the_original(
    door: Door, gate: WriteGate, item: str
) -> None:
    fake, real = LOOK_ALIKES[item]

    async with FleetClient(door.server.url) as client:
        original = await gate.check("Write", {"file_path": real, "content": "x"})
        verdict = await gate.check("Write", {"file_path": fake, "content": "x"})
        leases = {row["path"] for row in await client.leases()}

    assert original.allowed and verdict.allowed
    assert verdict.paths == (fake,) != original.paths == (real,)
    assert {fake, real} <= leases
    assert os.path.realpath(door.tree / fake) != os.path.realpath(door.tree / real)
