"""Scale: 10,000 tasks drained by 32 zero-work agents (the dispatch benchmark, bigger).

Same graph shape, agent loop and checks as `bench.dispatch`; the figures to
read are the time to POST the 10,000-task graph, the wall time to drain it,
and the per-decile throughput and server CPU per task, which must stay flat
as finished tasks pile up. Run: `uv run python -m bench.scale --client raw`.
"""

from __future__ import annotations

import sys

from bench.dispatch import main

if __name__ == "__main__":
    sys.exit(main(tasks=10_000, agents=32))
