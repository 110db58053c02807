"""Two hosts on one machine: a runner elsewhere, with the tree mounted at another path, joins the lock.

The server host and the runner host are network namespaces made by the test
(`codefleet.testing.hosts`), joined by one veth pair: traffic flows only
between their two addresses. `codefleet serve` binds the server host's address
with a token; a local runner runs beside it in the tree; the remote runner runs
on the runner host in a private mount namespace where the same tree is
bind-mounted at another path (what a network filesystem mounted elsewhere
looks like), a path that is an empty directory on the server host. Every
process is the real `codefleet`; only the agents' brains are scripted. The
operator's client speaks from the server host.

The scenario, ordered by the script, not by timing: the local runner takes
`hold` and keeps `shared.txt`; the remote runner registers by the tree's
identity, takes `contend` and is vetoed on `shared.txt` across hosts; it then
takes `killed`, writes `k.txt`, and is SIGKILLed mid-task: the server takes the
task back and restores `k.txt`'s pre-image on its own mount, with no runner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml
from hosts_support import CODEFLEET, Proc, Procs, alive, up

from codefleet.api.client import FleetClient
from codefleet.statedir import read_tree_id
from codefleet.testing.hosts import HostPair, entered, with_tree_at

PORT = 8099  # each run has its own namespaces, so the port is always free
TOKEN = "two-hosts-token"
START_S = 30.0  # bound for a process to come up on a loaded machine
STEP_S = 15.0  # bound for each step of the scenario

SCRIPT = {
    # local: holds shared.txt until the remote runner's `killed` has written k.txt
    "hold": [{"write": {"path": "shared.txt", "content": "local\n"}}, {"wait_leased": "k.txt"}],
    # remote, attempt 1: vetoed on shared.txt; attempt 2 (wherever it runs) writes it
    "contend": [{"write": {"path": "shared.txt", "content": "contend\n"}}],
    # remote, attempt 1: writes k.txt and is killed while it works; attempt 2 writes nothing
    "killed": [
        {"write": {"path": "k.txt", "content": "half-done\n"}, "attempt": 1},
        {"sleep": 120, "attempt": 1},
    ],
}
HOLD = {"id": "hold", "title": "hold", "description": "keep shared.txt", "priority": 5}
CONTEND = {"id": "contend", "title": "contend", "description": "write shared.txt", "priority": 5}
KILLED = {"id": "killed", "title": "killed", "description": "write k.txt", "priority": 3}

Wait = Callable[..., Awaitable[Any]]


def serve_argv(hosts: HostPair, workdir: Path, tmp_path: Path) -> list[str]:
    return hosts.server.command(
        [CODEFLEET, "serve", "--host", hosts.server.address, "--port", str(PORT),
         "--token", TOKEN, "--workdir", str(workdir), "--db", str(tmp_path / "server.db"),
         "--run-dir", str(tmp_path / "server-runs"), "--stale-after", "2",
         "--heartbeat-interval", "0.2", "--tick-interval", "0.05", "--poll-interval", "0.5",
         "--backoff-base", "0"]
    )  # fmt: skip


def runner_argv(name: str, url: str, tree: Path, run_dir: Path, script: Path) -> list[str]:
    return [CODEFLEET, "runner", "--name", name, "--server", url, "--token", TOKEN,
            "--workdir", str(tree), "--run-dir", str(run_dir), "--dry-run", "--script", str(script)]  # fmt: skip


async def agent_named(operator: FleetClient, name: str, proc: Proc) -> dict[str, Any] | None:
    alive(proc)
    return next((a for a in await operator.agents() if a["name"] == name), None)


async def holder_of(operator: FleetClient, path: str) -> dict[str, Any] | None:
    return next((x for x in await operator.leases() if x["path"] == path), None)


async def events_of(operator: FleetClient, type_: str) -> list[dict[str, Any]]:
    return await operator.events(type_=type_)


async def test_a_runner_on_another_host_with_the_tree_mounted_elsewhere_joins_the_lock(
    hosts: HostPair, procs: Procs, workdir: Path, tmp_path: Path, wait_until: Wait
) -> None:
    (workdir / "k.txt").write_text("K = 0\n")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    mount = tmp_path / "runner-host" / "mnt" / "tree"  # the tree's path on the runner host
    url = f"http://{hosts.server.address}:{PORT}"
    server = procs.start("server", serve_argv(hosts, workdir, tmp_path))
    with entered(hosts.server):
        async with FleetClient(url, token=TOKEN) as operator:
            await wait_until(lambda: up(operator, server), timeout=START_S)
            await operator.create_tasks([HOLD])
            local_argv = runner_argv("local-1", url, workdir, tmp_path / "local-runs", script)
            local = procs.start("local", hosts.server.command(local_argv))
            await wait_until(lambda: holder_of(operator, "shared.txt"), timeout=START_S)

            remote_argv = runner_argv("remote-1", url, mount, tmp_path / "remote-runs", script)
            remote = procs.start(
                "remote", hosts.runner.command(with_tree_at(workdir, mount, remote_argv))
            )
            agent = await wait_until(
                lambda: agent_named(operator, "remote-1", remote), timeout=START_S
            )
            # registered by the tree's identity, from a path that holds no tree on the server host
            assert agent["workdir"] == str(mount) and agent["pid"] == remote.pid
            assert not (mount / "a.py").exists()
            health = await operator.health()
            assert health["workdir"] == str(workdir) != agent["workdir"]
            assert health["tree_id"] == read_tree_id(workdir)

            await operator.create_tasks([CONTEND, KILLED])
            denied = await wait_until(lambda: events_of(operator, "lease_denied"), timeout=STEP_S)
            assert denied[0]["task_id"] == "contend"
            assert denied[0]["agent_id"] == agent["id"]
            assert denied[0]["payload"]["path"] == "shared.txt"
            assert denied[0]["payload"]["holder_agent_name"] == "local-1"
            # the veto's report (after the denial) requeues `contend` with the path in its scope
            await wait_until(lambda: _scope_has(operator, "contend", "shared.txt"), timeout=STEP_S)

            held = await wait_until(lambda: holder_of(operator, "k.txt"), timeout=STEP_S)
            assert held["agent_id"] == agent["id"] and held["task_id"] == "killed"
            await wait_until(lambda: (workdir / "k.txt").read_text() == "half-done\n")
            alive(remote)
            remote.popen.kill()  # SIGKILL mid-task: no report, no leave, no restore by the runner

            restored = await wait_until(
                lambda: events_of(operator, "file_restored"), timeout=STEP_S
            )
            assert [(e["task_id"], e["payload"]["path"]) for e in restored] == [("killed", "k.txt")]
            assert (workdir / "k.txt").read_text() == "K = 0\n"  # the pre-image, put back
            for task_id in ("hold", "contend", "killed"):
                await wait_until(lambda t=task_id: _is(operator, t, "succeeded"), timeout=STEP_S)
            alive(local)
    assert (workdir / "shared.txt").read_text() == "contend\n"
    assert (workdir / "k.txt").read_text() == "K = 0\n"


async def _is(operator: FleetClient, task_id: str, wanted: str) -> bool:
    return bool((await operator.task(task_id))["status"] == wanted)


async def _scope_has(operator: FleetClient, task_id: str, path: str) -> bool:
    return path in (await operator.task(task_id))["file_scope"]
