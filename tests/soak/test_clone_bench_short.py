"""The clone cost benchmark, tiny, in CI: `bench/clones.py` runs as by hand so it does not rot.

One fleet size (2 runners, 4 tasks, two of them sharing a hot file), both modes,
a real `codefleet serve` process each, real clones over git's smart HTTP
through the benchmark's counting relay. What must hold is what the figures
rest on, never a time: both drains land every task with the same leases, the
runners in the tree fetch nothing, and each attempt in a clone fetches at its
reset and before its reads are checked, and at a grant only when the clone
was behind (docs/history/performance-log.md, "Runners in clones: what they cost").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_BOUND_S = 240  # a bound on a hang, not a speed claim


def test_a_tiny_clone_cost_run_drains_both_modes_and_counts_the_clones_fetches(
    tmp_path: Path,
) -> None:
    out = tmp_path / "clones.json"
    args = ["--runners", "2", "--tasks-per-runner", "2", "--hot-every", "2", "--hot-share", "2"]
    args += ["--work-s", "0", "--json", str(out)]

    done = subprocess.run(
        [sys.executable, "-m", "bench.clones", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_S,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    tree, clones = json.loads(out.read_text())
    assert (tree["mode"], clones["mode"]) == ("tree", "clones")
    for figures in (tree, clones):
        assert figures["tasks"] == figures["landings"] == 4
        assert figures["leases"] == 6  # its own module each, and the hot file twice
        assert figures["server_cpu_s"] > 0
    assert tree["fetches"] == {} and tree["kb_per_task"] == 0
    fetches = clones["fetches"]
    assert fetches["open"] == 2  # each clone's first fetch; its first reset finds that tip
    # a reset or a catch-up fetches only when the line moved since the clone's last fetch
    assert fetches.get("reset", 0) <= clones["attempts"]
    assert fetches.get("catch_up", 0) <= clones["attempts"]
    assert fetches.get("level", 0) >= clones["behind"]
    assert fetches.get("level", 0) == 0 or clones["behind"] > 0  # no fetch when level
    assert clones["kb"]["open"] > 0 and clones["git_requests_per_task"] > 0
    assert "| 2 | clones | 4 |" in done.stdout
