"""The fleet's budget over HTTP: `run --max-cost` stops the fleet, `budget` raises it live.

The agents are scripted (their `cost` step reports what a session would have spent);
the server, the runners, the CLI processes and the wire are the real ones. Nothing
sleeps: the runs end on the server's own `fleet_idle`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
TASKS = [{"id": f"T{n}", "title": f"t{n}", "description": "do it"} for n in range(1, 5)]


def codefleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_run_with_max_cost_stops_at_the_cap_says_why_and_budget_raises_it(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({t["id"]: [{"cost": 0.3}] for t in TASKS}))
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS)
    run = [
        "run",
        "--dry-run",
        "--script",
        str(script),
        "--runners",
        "1",
        "--server",
        server.url,
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
    ]

    stopped = codefleet(*run, "--max-cost", "0.5")

    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert (
        "fleet stopped: fleet budget exhausted: $0.6000 simulated, nothing spent of $0.5000; "
        "2 task(s) not done" in " ".join(stopped.stdout.split())
    )
    async with FleetClient(server.url) as client:
        statuses = sorted(t["status"] for t in await client.tasks())
        kinds = [e["type"] for e in await client.all_events()]
        health = await client.health()
    assert statuses == ["pending", "pending", "succeeded", "succeeded"]
    assert kinds.count("fleet_budget_set") == kinds.count("fleet_budget_exhausted") == 1
    assert kinds.index("fleet_budget_exhausted") < kinds.index("fleet_idle")
    assert health["budget"] == {
        "max_cost_usd": 0.5,
        "hard": False,
        "spent_usd": 0.6,
        "exhausted": True,
        "simulated": True,
    }

    again = codefleet(*run)  # still spent: it ends at once, saying why, with nothing assigned
    assert again.returncode == 1 and "fleet budget exhausted" in again.stdout

    raised = codefleet("budget", "2", "--server", server.url)
    assert raised.returncode == 0, raised.stderr
    assert (
        "fleet budget $2.0000 (running tasks finish) · $0.6000 simulated, nothing spent · "
        "assigning" in raised.stdout
    )

    finished = codefleet(*run)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    shown = codefleet("budget", "--server", server.url, "--json")
    assert yaml.safe_load(shown.stdout)["spent_usd"] == 1.2


async def test_a_hard_cap_stops_the_running_attempt_rolls_it_back_and_does_not_charge_it(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, max_cost=0.5, max_cost_hard=True, max_attempts=1)
    script = {
        "spender": [{"wait_leased": "slow.py"}, {"cost": 0.6}],
        "slow": [{"write": {"path": "slow.py", "content": "half\n"}}, {"wait_denied": "never.py"}],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": t, "title": t, "description": "do it"} for t in ("spender", "slow")]
        )
        executor = ScriptedExecutor(parse_script(script), wait_timeout=30)
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2),
        )
        slow = await client.task("slow")
        events = await client.all_events()
    assert result.stopped is not None and "1 task(s) not done" in result.stopped
    assert (slow["status"], slow["attempts"], slow["uncharged_attempts"]) == ("pending", 1, 1)
    assert not (workdir / "slow.py").exists()  # its edit was rolled back
    spent = next(e for e in events if e["type"] == "fleet_budget_exhausted")
    assert spent["payload"]["hard"] is True and spent["payload"]["running"] == ["slow"]
    requeued = [e for e in events if e["type"] == "task_requeued"]
    assert [(e["task_id"], e["payload"]["error_kind"]) for e in requeued] == [("slow", "budget")]
