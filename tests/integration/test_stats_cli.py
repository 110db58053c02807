"""`codefleet stats` on the demo's staged veto, through the wire, and `--suggest`.

The demo graph runs with its scripted agents (examples/demo-script.yaml, leased by part:
T4 is refused api.py's module docstring while T3 holds it, and succeeds on its retry after
T3); then the real CLI reads
the run back over HTTP and writes the graph amended from it. A run with part leases
(two tasks in one function of a hub module) is read back gathered under its file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.cli.start.demo_run import examples_dir
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, load_script, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
HUB = '''"""The API."""


def handle(request):
    return 1


def route(path):
    return path
'''


def codefleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_stats_and_suggest_learn_t4s_veto_on_api_py_from_the_demo(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    examples = examples_dir()
    tree = tmp_path / "demo"
    shutil.copytree(examples / "demo-repo", tree)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(load_graph(examples / "demo-tasks.yaml"))
    executor = ScriptedExecutor(load_script(examples / "demo-script.yaml"))
    assert (
        await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", tree, tmp_path / "runs"), runners=3),
        )
    ).ok

    shown = codefleet("stats", "--server", server.url, "--json")
    assert shown.returncode == 0, shown.stderr
    figures = json.loads(shown.stdout)
    [api] = [f for f in figures["files"] if f["path"] == "api.py"]
    assert (api["vetoes"], api["tasks"]) == (1, ["T3", "T4"]) and api["veto_lost_s"] > 0
    t4 = next(t for t in figures["tasks"] if t["id"] == "T4")
    assert (t4["attempts"], t4["vetoed"]) == (2, 1)
    assert figures["fleet"]["runners"] == 3 and figures["fleet"]["critical_path"]
    assert figures["stale_reads"] == [
        {"path": "models.py", "reader": "T3", "changed_by": "T1", "count": 1}
    ]

    out = tmp_path / "tasks.next.yaml"
    made = codefleet(
        "stats",
        "--suggest",
        str(examples / "demo-tasks.yaml"),
        "-o",
        str(out),
        "--server",
        server.url,
    )

    assert made.returncode == 0, made.stderr
    assert "3 change(s)" in made.stdout
    text = out.read_text()
    assert '  - "api.py::<header>"  # codefleet stats: vetoed on api.py::<header> at +' in text
    assert (
        "  - T3  # codefleet stats: T4's retry only succeeded after T3 finished with "
        "api.py::<header>" in text
    )
    assert "  - T1  # codefleet stats: T3's read of models.py went stale: T1 changed it" in text
    assert text.startswith("# The CodeFleet demo graph")  # the original header is kept
    amended = {t["id"]: t for t in yaml.safe_load(text)["tasks"]}
    assert "api.py::<header>" in amended["T4"]["file_scope"]
    assert amended["T4"]["depends_on"] == ["T3"]
    assert amended["T3"]["depends_on"] == ["T1"]
    checked = codefleet("graph", "check", str(out), "--workdir", str(tree))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    table = codefleet("stats", "--server", server.url)
    assert "api.py" in table.stdout and "busy on average" in table.stdout


def test_suggest_refuses_a_broken_graph_and_output_without_suggest_before_asking_the_server(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks:\n  - id: T1\n    title: t\n")  # no description

    refused = codefleet(
        "stats",
        "--suggest",
        str(broken),
        "-o",
        str(tmp_path / "o.yaml"),
        "--server",
        "http://127.0.0.1:9",
    )
    alone = codefleet("stats", "-o", str(tmp_path / "o.yaml"), "--server", "http://127.0.0.1:9")

    assert refused.returncode == 1 and "description" in refused.stderr + refused.stdout
    assert alone.returncode == 1 and "goes with --suggest" in alone.stderr + alone.stdout
    assert not (tmp_path / "o.yaml").exists()


def _edit(old: str, new: str, **more: object) -> dict[str, object]:
    return {"edit": {"path": "api.py", "old": old, "new": new}, **more}


async def test_stats_counts_a_veto_on_a_part_under_its_file_with_the_part_beneath(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    tree = workdir
    (tree / "api.py").write_text(HUB)
    server = make_server(**FAST, lease_granularity="part")
    script = {  # T3 is refused api.py::handle while T1 holds it, and edits it on its retry
        "T1": [_edit("return 1", "return 'one'"), {"wait_denied": "api.py::handle"}],
        "T2": [_edit("return path", "return path.upper()")],
        "T3": [  # an edit of handle() whether or not T1's write is in yet: one part asked
            {"wait_leased": "api.py::handle", "attempt": 1},
            _edit("def handle(request):", "def handle(request, strict=False):"),
        ],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": t, "title": t, "description": "edit api.py"} for t in ("T1", "T2", "T3")]
        )
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    options = FleetOptions(RunnerOptions("runner", tree, tmp_path / "runs"), runners=3)
    assert (await run_fleet(server.url, lambda _: executor, options)).ok

    shown = codefleet("stats", "--server", server.url, "--json")
    table = codefleet("stats", "--server", server.url)

    assert shown.returncode == 0, shown.stderr
    [api] = json.loads(shown.stdout)["files"]
    assert (api["path"], api["vetoes"], api["tasks"]) == ("api.py", 1, ["T1", "T3"])
    [handle] = api["parts"]
    assert (handle["part"], handle["path"], handle["vetoes"]) == ("handle", "api.py::handle", 1)
    assert handle["veto_lost_s"] == api["veto_lost_s"] > 0
    files = table.stdout.split("Files: collisions and rollbacks")[1].split("Tasks")[0]
    rows = [line.split("│")[1].strip() for line in files.splitlines() if line.startswith("│")]
    assert rows == ["api.py", "::handle"]
