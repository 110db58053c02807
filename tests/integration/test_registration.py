"""Registration over the wire: one name, one live holder; one tree; one bump.

A registration must say which tree the runner works in (422 without it) and
that tree must be the server's (409 naming both): by the tree's identity when
the runner sends it, wherever the tree is mounted, else by the server's path. A name whose holder is live
(heartbeat within the stale window) cannot be taken by another process unless
the body says `"replace": true`. Two `codefleet run` processes side by side
name their runners apart and both drain.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from codefleet.api.client import FleetClient
from codefleet.errors import NameInUse, StaleEpoch, WrongTree
from codefleet.server.thread import ServerThread, free_port
from codefleet.statedir import ensure_tree_id, read_tree_id

CLI = [sys.executable, "-m", "codefleet.cli"]


def body(
    workdir: Path | str | None, name: str = "runner-1", pid: int = 1, **extra: Any
) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "pid": pid, **extra}
    if workdir is not None:
        found["workdir"] = str(workdir)
    return found


async def test_a_register_without_a_workdir_is_a_422_in_the_envelope(http: httpx.AsyncClient):
    answer = await http.post("/agents/register", json=body(None))

    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_request"
    assert "workdir" in answer.json()["error"]["message"]
    assert (await http.get("/agents")).json()["agents"] == []


async def test_a_runner_in_another_tree_is_refused_with_409_naming_both_paths(
    http: httpx.AsyncClient, workdir: Path, tmp_path: Path
):
    other = tmp_path / "other-tree"
    other.mkdir()

    answer = await http.post("/agents/register", json=body(other))

    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "wrong_tree"
    assert str(other) in error["message"] and str(workdir) in error["message"]
    assert error["detail"] == {
        "runner_workdir": str(other),
        "server_workdir": str(workdir),
        "runner_tree_id": None,
        "server_tree_id": read_tree_id(workdir),
    }
    assert (await http.get("/agents")).json()["agents"] == []


async def test_a_runner_with_the_trees_identity_is_accepted_from_another_path(
    http: httpx.AsyncClient, workdir: Path, tmp_path: Path
):
    elsewhere = tmp_path / "mnt" / "repo"  # another host's mount point of the same tree
    elsewhere.mkdir(parents=True)

    answer = await http.post(
        "/agents/register", json=body(elsewhere, tree_id=read_tree_id(workdir))
    )

    assert answer.status_code == 200, answer.text
    [agent] = (await http.get("/agents")).json()["agents"]
    assert agent["workdir"] == str(elsewhere)  # the runner's own path, as it said it


async def test_a_runner_with_another_trees_identity_is_refused_even_at_the_servers_path(
    http: httpx.AsyncClient, workdir: Path, tmp_path: Path
):
    copy = tmp_path / "copy"
    copy.mkdir()
    other_id = ensure_tree_id(copy)

    answer = await http.post("/agents/register", json=body(workdir, tree_id=other_id))

    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "wrong_tree"
    assert other_id in error["message"] and read_tree_id(workdir) in error["message"]
    assert error["detail"]["runner_tree_id"] == other_id
    assert error["detail"]["server_tree_id"] == read_tree_id(workdir)
    assert (await http.get("/agents")).json()["agents"] == []


async def test_health_names_the_trees_identity(http: httpx.AsyncClient, workdir: Path):
    assert (await http.get("/health")).json()["tree_id"] == read_tree_id(workdir)


async def test_another_spelling_of_the_servers_tree_is_the_same_tree(
    http: httpx.AsyncClient, workdir: Path, tmp_path: Path
):
    link = tmp_path / "link-to-tree"
    link.symlink_to(workdir)

    answer = await http.post("/agents/register", json=body(f"{link}/pkg/.."))

    assert answer.status_code == 200, answer.text


async def test_a_live_name_from_another_pid_is_refused_409_name_in_use_naming_the_holder(
    client: FleetClient, workdir: Path
):
    holder = await client.register("runner-1", str(workdir), 1111, host="alpha")

    with pytest.raises(NameInUse) as refused:
        await client.register("runner-1", str(workdir), 2222, host="alpha")
    with pytest.raises(NameInUse):
        await client.register("runner-1", str(workdir), 1111, host="beta")

    assert "runner-1" in refused.value.message and "1111" in refused.value.message
    assert refused.value.detail["holder_agent_id"] == holder["agent_id"]
    assert (refused.value.detail["holder_pid"], refused.value.detail["holder_host"]) == (
        1111,
        "alpha",
    )
    [agent] = await client.agents()
    assert (agent["epoch"], agent["pid"]) == (1, 1111)  # the holder was not fenced
    assert (await client.heartbeat(holder["agent_id"], 1))["epoch"] == 1


async def test_replace_true_takes_a_live_name_over_and_fences_the_old_holder(
    client: FleetClient, workdir: Path
):
    old = await client.register("runner-1", str(workdir), 1111, host="alpha")

    new = await client.register("runner-1", str(workdir), 2222, host="alpha", replace=True)

    assert new["agent_id"] == old["agent_id"] and new["epoch"] == old["epoch"] + 1
    with pytest.raises(StaleEpoch):
        await client.heartbeat(old["agent_id"], old["epoch"])
    [agent] = await client.agents()
    assert agent["pid"] == 2222


async def test_the_same_process_may_register_its_name_again(client: FleetClient, workdir: Path):
    first = await client.register("runner-1", str(workdir), 1111, host="alpha")

    again = await client.register("runner-1", str(workdir), 1111, host="alpha")

    assert again["epoch"] == first["epoch"] + 1


async def test_a_name_whose_holder_went_stale_may_be_taken_by_another_process(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Any
):
    server = make_server(stale_after=0.3, heartbeat_interval=0.1)
    async with FleetClient(server.url) as client:
        await client.register("runner-1", str(workdir), 1111, host="alpha")
        await wait_until(lambda: _offline(client, "runner-1"))

        taken = await client.register("runner-1", str(workdir), 2222, host="beta")

    assert taken["status"] == "idle"


async def test_re_registering_a_runner_that_holds_a_task_bumps_the_epoch_exactly_once(
    client: FleetClient, workdir: Path
):
    first = await client.register("runner-1", str(workdir), 1111)
    await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
    assert await client.assignment(first["agent_id"], first["epoch"], wait=5)
    await client.start("T", first["agent_id"], first["epoch"])

    again = await client.register("runner-1", str(workdir), 1111)

    assert again["epoch"] == first["epoch"] + 1
    [agent] = await client.agents()
    assert agent["epoch"] == first["epoch"] + 1
    [requeued] = await client.events(type_="task_requeued")
    assert requeued["payload"]["reason"] == "agent_reregistered"


async def _offline(client: FleetClient, name: str) -> bool:
    return any(a["name"] == name and a["status"] == "offline" for a in await client.agents())


# -- the runner process and `run` ------------------------------------------------------


def _runner(server: ServerThread, workdir: Path, tmp_path: Path, *extra: str) -> list[str]:
    return _runner_at(server.url, workdir, tmp_path, *extra)


def _runner_at(url: str, workdir: Path, tmp_path: Path, *extra: str) -> list[str]:
    script = tmp_path / "no-steps.yaml"
    script.write_text("{}\n")  # scripted agents that play no step
    return [
        *CLI,
        "runner",
        "--dry-run",
        "--script",
        str(script),
        "--server",
        url,
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
        *extra,
    ]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}


async def test_a_runner_process_refused_its_name_exits_at_once_naming_the_holder_and_replace(
    server: ServerThread, workdir: Path, tmp_path: Path
):
    async with FleetClient(server.url) as client:
        await client.register("taken", str(workdir), 1111, host="elsewhere")

    done = subprocess.run(
        _runner(server, workdir, tmp_path, "--name", "taken"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "taken" in said and "1111" in said and "--replace" in said


async def test_a_runner_process_with_replace_takes_the_name_and_serves(
    server: ServerThread, workdir: Path, tmp_path: Path
):
    async with FleetClient(server.url) as client:
        await client.register("taken", str(workdir), 1111, host="elsewhere")
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])

    done = subprocess.run(
        _runner(server, workdir, tmp_path, "--name", "taken", "--replace", "--exit-when-drained"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )

    assert done.returncode == 0, done.stderr
    async with FleetClient(server.url) as client:
        assert (await client.task("T"))["status"] == "succeeded"


async def test_a_runner_process_in_another_tree_exits_at_once_naming_both_trees(
    server: ServerThread, workdir: Path, tmp_path: Path
):
    other = tmp_path / "other-tree"
    other.mkdir()
    other_id = ensure_tree_id(other)  # a tree another server once served

    done = subprocess.run(
        _runner(server, other, tmp_path, "--name", "lost"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert str(other) in said and str(workdir) in said
    assert other_id in said and read_tree_id(workdir) in said


async def test_a_runner_process_in_a_copy_of_the_tree_is_refused_though_the_copy_has_its_identity(
    server: ServerThread, workdir: Path, tmp_path: Path
):
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy)  # `cp -r tree copy` while the server runs: every file alike
    assert read_tree_id(copy) == read_tree_id(workdir)

    done = subprocess.run(
        _runner(server, copy, tmp_path, "--name", "copied", "--exit-when-drained"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "registration refused" in said and "a copy" in said
    assert str(copy) in said and str(workdir) in said
    assert list((copy / ".codefleet").glob("probe-*")) == []  # the runner's probe is gone
    async with FleetClient(server.url) as client:
        assert await client.agents() == []  # it never registered


async def test_a_runner_process_whose_tree_has_no_identity_exits_at_once_naming_the_file(
    server: ServerThread, tmp_path: Path
):
    bare = tmp_path / "bare"
    bare.mkdir()

    done = subprocess.run(
        _runner(server, bare, tmp_path, "--name", "lost"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{bare}/.codefleet/tree-id is missing" in said
    async with FleetClient(server.url) as client:
        assert await client.agents() == []  # it never registered


async def test_a_runner_started_before_the_server_of_a_new_tree_registers_once_it_starts(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
):
    port = free_port()  # nothing answers there yet, and the tree has no identity yet
    argv = _runner_at(
        f"http://127.0.0.1:{port}", workdir, tmp_path, "--name", "early", "--exit-when-drained"
    )
    proc = await asyncio.create_subprocess_exec(
        *argv, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env=_env()
    )
    assert proc.stderr is not None
    while b"retrying in" not in await asyncio.wait_for(proc.stderr.readline(), 30):
        pass  # until it waits for the server

    server = make_server(port=port)  # writes the tree's identity as it starts
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        code = await asyncio.wait_for(proc.wait(), 60)
        task = await client.task("T")

    assert code == 0
    assert task["status"] == "succeeded"


def test_two_runs_side_by_side_on_one_server_both_drain_and_succeed(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
):
    server = make_server(heartbeat_interval=0.2, stale_after=5.0)
    tasks = [
        {"id": f"T{n}", "title": f"t{n}", "description": "do it", "file_scope": [f"f{n}.txt"]}
        for n in range(12)
    ]
    asyncio.run(_create(server.url, tasks))
    script = tmp_path / "script.yaml"
    script.write_text(
        "\n".join(
            f"T{n}:\n  - sleep: 0.05\n  - write: {{path: f{n}.txt, content: ok}}" for n in range(12)
        )
    )
    run = [
        *CLI,
        "run",
        "--dry-run",
        "--script",
        str(script),
        "--runners",
        "3",
        "--json",
        "--server",
        server.url,
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
    ]

    both = [
        subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in both]

    assert [p.returncode for p in both] == [0, 0], [err for _, err in outs]
    names = {a["name"] for a in asyncio.run(_agents(server.url))}
    assert len(names) == 6
    rows = asyncio.run(_tasks(server.url))
    assert {r["status"] for r in rows} == {"succeeded"}
    assert all(r["attempts"] == 1 for r in rows)


def test_run_names_its_runners_apart_per_invocation_by_host_and_pid(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
):
    server = make_server()
    asyncio.run(_create(server.url, [{"id": "T", "title": "t", "description": "do it"}]))

    script = tmp_path / "script.yaml"
    script.write_text("T: []\n")  # scripted to change nothing
    done = subprocess.run(
        [
            *CLI,
            "run",
            "--dry-run",
            "--script",
            str(script),
            "--runners",
            "2",
            "--json",
            "--server",
            server.url,
            "--workdir",
            str(workdir),
            "--run-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )

    assert done.returncode == 0, done.stderr
    agents = asyncio.run(_agents(server.url))
    assert len(agents) == 2
    host_part = os.uname().nodename.split(".")[0]
    assert all(a["name"].startswith("runner-") and host_part in a["name"] for a in agents)
    assert len({a["pid"] for a in agents}) == 1 and agents[0]["pid"] != os.getpid()
    assert all(str(agents[0]["pid"]) in a["name"] for a in agents)


async def _create(url: str, tasks: list[dict[str, Any]]) -> None:
    async with FleetClient(url) as client:
        await client.create_tasks(tasks)


async def _agents(url: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return await client.agents()


async def _tasks(url: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return await client.tasks()


# -- the wire errors map to their own classes --------------------------------------------


def test_name_in_use_and_wrong_tree_are_409s_with_their_own_codes() -> None:
    assert (NameInUse.status, NameInUse.code) == (409, "name_in_use")
    assert (WrongTree.status, WrongTree.code) == (409, "wrong_tree")


async def test_a_workdir_with_a_nul_byte_is_a_422_not_a_500(http: httpx.AsyncClient):
    answer = await http.post("/agents/register", json=body("/tmp/tr\x00ee"))

    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_request"
