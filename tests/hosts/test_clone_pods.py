"""Three runner pods, each in an empty directory on a host of its own, run the demo graph green.

The server host and three runner hosts are network namespaces made by the test
(`codefleet.testing.hosts.star_hosts`): each runner host is joined by its own
veth pair to a bridge holding the server's address, so a pod reaches the server
only over its port. On the server host, `codefleet serve` keeps the tree (a git
copy of examples/demo-repo), its database and its run dir, all in one
server-only directory, and a landing worker (`runner --landing-only`) runs the
landing checks in that tree. Each pod runs deploy/kubernetes/clones/runner.sh,
the command a Kubernetes runner pod runs, with the venv's bin on PATH, in a
private mount namespace where the server-only directory is an empty tmpfs: its
agents work in their own clone of the landed line, in a directory that was
empty, and its files reach the server over the wire (decision 0156). Every
process is the real `codefleet`; only the agents' brains are scripted
(examples/demo-script.yaml, whose collisions are ordered by the script, not by
timing: T4's veto on api.py while T3 holds it, T3's stale read of T1's
models.py, T1's failed verification, T2's landing break on T3's route).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hosts_support import CODEFLEET, Proc, Procs, alive, up
from tool_support import COMMAND_PYTHON, ROOT, require_tool

from codefleet.api.client import FleetClient
from codefleet.cli.start.demo_run import init_repository
from codefleet.testing.hosts import Host, HostStar, entered, with_hidden

PORT = 8099  # each run has its own namespaces, so the port is always free
TOKEN = "clone-pods-token"
PODS = 3
START_S = 60.0  # bound for the server to come up on a loaded machine
RUN_S = 120.0  # bound for the pods to start and the graph to land whole (~5 s when idle)
EXAMPLES = ROOT / "examples"
RUNNER_SH = ROOT / "deploy" / "kubernetes" / "clones" / "runner.sh"
LINE = "/git/landed.git"
# the demo's staged story: T1 fails its verification once, T2 its landing check, T4 is vetoed
ATTEMPTS = {"T1": 2, "T2": 2, "T3": 1, "T4": 2, "T5": 1}
SUITE = [sys.executable, "-B", "-m", "unittest", "discover", "-s", "tests", "-q"]

Wait = Callable[..., Awaitable[Any]]


def serve_argv(server: Host, server_dir: Path) -> list[str]:
    return server.command(
        [CODEFLEET, "serve", "--host", server.address, "--port", str(PORT), "--token", TOKEN,
         "--workdir", str(server_dir / "tree"), "--db", str(server_dir / "server.db"),
         "--run-dir", str(server_dir / "server-runs"), "--stale-after", "30",
         "--heartbeat-interval", "0.2", "--tick-interval", "0.05", "--poll-interval", "0.5",
         "--backoff-base", "0", "--verify-before-landing"]  # as `codefleet demo` runs the graph
    )  # fmt: skip


def load_argv(server: Host, url: str) -> list[str]:
    graph = str(EXAMPLES / "demo-tasks.yaml")
    return server.command([CODEFLEET, "load", graph, "--server", url, "--token", TOKEN])


def landing_argv(server: Host, url: str, tree: Path) -> list[str]:
    return server.command(
        [CODEFLEET, "runner", "--name", "landing", "--landing-only", "--server", url,
         "--token", TOKEN, "--workdir", str(tree)]
    )  # fmt: skip


def pod_argv(host: Host, server_dir: Path) -> list[str]:
    """runner.sh on `host`, where `server_dir` is an empty directory."""
    runner = [str(RUNNER_SH), "--dry-run", "--script", str(EXAMPLES / "demo-script.yaml")]
    return host.command(with_hidden(server_dir, runner))


def pod_env(name: str, url: str, clone: Path) -> dict[str, str]:
    """A pod's whole environment: its spec's variables, a PATH on which `codefleet` is, then
    a `python` for the demo's check (a check runs with CodeFleet's venv off PATH)."""
    path = [str(Path(CODEFLEET).parent), str(Path(COMMAND_PYTHON).parent), "/usr/bin", "/bin"]
    return {
        "PATH": os.pathsep.join(path),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "POD_NAME": name,
        "CODEFLEET_SERVER_URL": url,
        "CODEFLEET_TOKEN": TOKEN,
        "CODEFLEET_CLONE_DIR": str(clone),
    }


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def clone_line(server: Host, url: str, into: Path) -> None:
    """`git clone` of the landed line from the server host, the token in the environment."""
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {TOKEN}",
    }
    argv = ["git", "clone", "--quiet", "--branch", "landed", f"{url}{LINE}", str(into)]
    subprocess.run(server.command(argv), env=env, check=True, capture_output=True, timeout=60)


def files_of(root: Path, listed: str) -> dict[str, bytes]:
    paths = [p for p in listed.split("\0") if p and not p.startswith(".codefleet/")]
    return {p: (root / p).read_bytes() for p in paths}


async def landed_whole(operator: FleetClient, procs: list[Proc]) -> bool:
    """Every task succeeded, and the line has followed the events past the last success."""
    for proc in procs:
        alive(proc)
    if any(t["status"] != "succeeded" for t in await operator.tasks()):
        return False
    succeeded = await operator.events(type_="task_succeeded")
    return bool((await operator.landed())["cursor"] >= succeeded[-1]["id"])


def start_pods(procs: Procs, hosts: HostStar, server_dir: Path, url: str) -> dict[str, Proc]:
    """One pod per runner host, each in an empty directory of its own."""
    pods: dict[str, Proc] = {}
    for i, host in enumerate(hosts.runners):
        name, clone = f"pod-{i}", server_dir.parent / "pods" / f"pod-{i}"
        clone.mkdir(parents=True)  # an emptyDir
        pods[name] = procs.start(name, pod_argv(host, server_dir), env=pod_env(name, url, clone))
    return pods


async def check_pods(
    operator: FleetClient, pods: dict[str, Proc], server_dir: Path, url: str
) -> None:
    """Each pod is the runner the server knows, in a clone of the line, blind to the tree."""
    agents = {a["name"]: a for a in await operator.agents()}
    for name, pod in pods.items():
        assert agents[name]["pid"] == pod.pid  # the registered runner is the pod's process
        # in the pod's mount namespace the server's directory is empty
        seen = Path(f"/proc/{pod.pid}/root") / server_dir.relative_to("/")
        assert seen.is_dir() and list(seen.iterdir()) == []
        assert (server_dir / "tree" / "api.py").is_file()
        clone = server_dir.parent / "pods" / name
        assert (clone / ".git").is_dir()
        assert git(clone, "config", "--get", "remote.codefleet.url").strip() == url + LINE


async def check_story(operator: FleetClient, pods: dict[str, Proc]) -> list[str]:
    """The demo's staged story, across pods; the tasks in the order they landed."""
    tasks = {t["id"]: t for t in await operator.tasks()}
    assert {t: (x["status"], x["attempts"]) for t, x in tasks.items()} == {
        t: ("succeeded", n) for t, n in ATTEMPTS.items()
    }
    names = {a["id"]: a["name"] for a in await operator.agents()}
    started = await operator.events(type_="task_assigned")
    assert {e["payload"]["agent_name"] for e in started} <= set(pods)  # all work ran in pods
    denied = [
        (e["task_id"], e["payload"]["path"], e["payload"]["holder_task_id"])
        for e in await operator.events(type_="lease_denied")
    ]
    assert denied == [("T4", "api.py", "T3")]  # the one veto: whole files in clones
    (veto,) = await operator.events(type_="lease_denied")
    assert veto["payload"]["holder_agent_name"] in pods
    assert veto["payload"]["holder_agent_name"] != names[veto["agent_id"]]  # across pods
    (stale,) = await operator.events(type_="stale_read")  # T3's clone caught up with T1's line
    assert stale["task_id"] == "T3"
    assert [(p["path"], p["changed_by"]) for p in stale["payload"]["paths"]] == [
        ("models.py", ["T1"])
    ]
    # T2's landing check fails on T3's route (T4 may have landed before it too: timing)
    (broke,) = await operator.events(type_="integration_failed")
    assert broke["task_id"] == "T2" and "T3" in broke["payload"]["conflicts_with"]
    return [e["task_id"] for e in await operator.events(type_="landed")]


def check_line(hosts: HostStar, url: str, tree: Path, landed: list[str]) -> None:
    """The line: the tree's first commit, then one commit per task in landing order; the
    tree's files exactly; and the tree passes the demo repo's suite."""
    line = tree.parent.parent / "line"
    clone_line(hosts.server, url, line)
    trailer = "%(trailers:key=CodeFleet-Task,valueonly,separator=%x2C)"
    log = git(line, "log", "--reverse", f"--format=%H {trailer}").splitlines()
    assert [entry.partition(" ")[2] for entry in log] == ["", *landed]
    assert log[0].partition(" ")[0] == git(tree, "rev-parse", "HEAD").strip()
    tree_files = files_of(tree, git(tree, "ls-files", "-z", "-co", "--exclude-standard"))
    assert files_of(line, git(line, "ls-files", "-z")) == tree_files
    suite = subprocess.run(SUITE, cwd=tree, capture_output=True, text=True, timeout=60)
    assert suite.returncode == 0, suite.stderr[-3000:]


async def test_three_pods_in_empty_directories_run_the_demo_graph_green_over_the_wire(
    star: Callable[[int], HostStar], procs: Procs, tmp_path: Path, wait_until: Wait
) -> None:
    require_tool("git", "the server keeps its landed line and each pod its clone with git")
    hosts = star(PODS)
    server_dir = tmp_path / "server"  # the server host's only: hidden in every pod
    tree = server_dir / "tree"
    shutil.copytree(EXAMPLES / "demo-repo", tree)
    init_repository(tree)
    url = f"http://{hosts.server.address}:{PORT}"
    server = procs.start("server", serve_argv(hosts.server, server_dir))
    with entered(hosts.server):
        async with FleetClient(url, token=TOKEN) as operator:
            await wait_until(lambda: up(operator, server), timeout=START_S)
            load = subprocess.run(load_argv(hosts.server, url), capture_output=True, text=True)
            assert load.returncode == 0, load.stdout + load.stderr
            landing = procs.start("landing", landing_argv(hosts.server, url, tree))
            pods = start_pods(procs, hosts, server_dir, url)
            every = [server, landing, *pods.values()]
            await wait_until(lambda: landed_whole(operator, every), timeout=RUN_S)
            await check_pods(operator, pods, server_dir, url)
            landed = await check_story(operator, pods)
    assert sorted(landed) == sorted(ATTEMPTS)
    check_line(hosts, url, tree, landed)
