"""The short chaos run, in CI: real processes, SIGKILLs, then the invariant checker.

`bench/chaos.py` runs as its own process exactly as by hand, smaller: a seeded
40-task graph, 3 `codefleet runner --dry-run` processes, one SIGKILL of the
`codefleet serve` process (restarted on the same database), two of runners and
one runner frozen (SIGSTOP) past a 4 s stale window, plus the final
kill-and-restart that must reload the state unchanged. Some tasks declare or take
named resources and take numbers of a sequence; some verify with the check they
ran last (a reuse, proved by `invariants_reuse`). It must drain with every
task succeeded and zero invariant violations, the content oracle included, with
parking off (every held file a veto) and on (`--lease-wait`: a held file's
write waits for it), and with leases by part on three shared modules, Python, TypeScript and Go, half
the tasks edit a function of (`--hub-modules 3 --lease-granularity part`), and
with every runner in its own clone of the landed line (`--clones`: a killed runner
loses its clone with its process; the line's tip must be the final tree, its
commits the landings in order). The
long run (500 tasks, 8 runners, about 25 faults) is run by hand; see
docs/reliability-chaos.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"
DRAIN_BOUND_S = 120
CLONES_DRAIN_BOUND_S = 240  # a git fetch per attempt: slower on a loaded machine
CHECK_BOUND_S = 30  # the final restart and the checker, after the drain


@pytest.mark.parametrize(
    ("lease_wait", "granularity", "clones"),
    [(0.0, "file", False), (5.0, "file", False), (0.0, "part", False), (0.0, "file", True)],
    ids=["vetoes", "parking", "parts", "clones"],
)
def test_a_short_chaos_run_with_a_server_kill_and_runner_kills_breaks_no_invariant(
    tmp_path: Path, lease_wait: float, granularity: str, clones: bool
) -> None:
    summary_file = tmp_path / "chaos.json"
    drain_bound = CLONES_DRAIN_BOUND_S if clones else DRAIN_BOUND_S
    parts = ["--hub-modules", "3", "--lease-granularity", "part"] if granularity == "part" else []
    args = [
        *parts,
        *(["--clones"] if clones else []),
        "--lease-wait",
        str(lease_wait),
        "--seed",
        "7",
        "--tasks",
        "40",
        "--runners",
        "3",
        "--server-kills",
        "1",
        "--runner-kills",
        "2",
        "--runner-pauses",
        "1",
        "--stale-after",
        "4",
        "--hot-files",
        "4",
        "--min-gap",
        "0.5",
        "--duration",
        str(drain_bound),
        "--json",
        str(summary_file),
    ]

    done = subprocess.run(
        [sys.executable, str(CHAOS), *args],
        capture_output=True,
        text=True,
        timeout=drain_bound + CHECK_BOUND_S,
    )

    assert summary_file.exists(), done.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["violations"] == [], summary
    assert summary["faults_injected"] == {"server": 1, "runner": 2, "pause": 1}, summary[
        "fault_log"
    ]
    assert summary["contents_checked"] > 0
    if not clones:  # a hot file waiting to land is taken over (clone runners never stack)
        assert summary["stacks"] > 0, summary
    assert summary["checks_reused"] > 0, summary  # a verify on what its run_check saw
    assert summary["unexpected_exits"] == []
    assert summary["drained"] and summary["statuses"] == {"succeeded": 40}
    assert summary["final_restart_identical"]
    assert summary["observed_events"] == summary["events"]
    met = summary["vetoes"] + sum(summary["waits"].values())
    # the faults met real contention; in clones a failed attempt's writes never reach the
    # server's tree (its undoing is the clone's reset, the kills below), so none is restored
    assert met > 0 and (clones or summary["restores"] > 0)
    assert bool(summary["waits"]) == (lease_wait > 0)
    assert summary["resource_grants"] > 0 and summary["numbers_allocated"] > 0
    assert summary["numbers_distinct"]  # and the checker found no number handed out twice
    if granularity == "part":  # several tasks wrote one module at once, and some were undone
        assert summary["part_grants"] > 0
        by_suffix = summary["part_grants_by_suffix"]  # Python, TypeScript and Go modules alike
        assert all(by_suffix.get(suffix, 0) > 0 for suffix in (".py", ".ts", ".go")), by_suffix
    if clones:  # each killed runner lost its clone; the line holds every landing, once
        assert summary["clone_runners"] == 3
        assert sum("and its clone" in f for f in summary["fault_log"]) == 2
        assert summary["line_commits"] == 40
    assert done.returncode == 0 and summary["ok"]
