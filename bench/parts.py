"""Cost of mapping a write to parts: `parts.changes.changed_parts` on a 2,000-line module.

In process: a generated module of 2,000+ lines, one function's body edited (the
whole new text, as a `Write` gives it); the median of N runs of
`changed_parts(old, new)` (two parses plus the line diff) beside the median of
one plain `ast.parse` of the same text, and their ratio.

    uv run python -m bench.parts [--runs 200] [--functions 340]

Measured 2026-12-02 on the shared 2-core box (other jobs running, so absolute
figures are noisy; the ratio is the figure to keep), 2,043 lines:

    changed_parts  62.45 ms / 75.42 ms   (two runs)
    ast.parse      29.82 ms / 23.33 ms
    ratio          2.09x / 3.23x one parse: the two parses, plus the tiling and the diff
"""

from __future__ import annotations

import argparse
import ast
import statistics
import time
from collections.abc import Callable

from codefleet.parts.changes import changed_parts


def module(functions: int) -> str:
    body = "".join(
        f"\n\ndef func_{n}(x):\n    # step {n}\n    y = x + {n}\n    return y * 2\n"
        for n in range(functions)
    )
    return '"""Generated."""\n\nimport os\n' + body


def median_ms(call: Callable[[], object], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--functions", type=int, default=340)
    args = parser.parse_args()
    old = module(args.functions)
    middle = args.functions // 2
    new = old.replace(f"y = x + {middle}\n", f"y = x + {middle} + 1\n")
    found = changed_parts(old, new)
    assert found is not None and found.names == {f"func_{middle}"}, found
    parts = median_ms(lambda: changed_parts(old, new), args.runs)
    parse = median_ms(lambda: ast.parse(old), args.runs)
    print(f"{old.count(chr(10))} lines, one function edited, median of {args.runs} runs")
    print(f"changed_parts  {parts:.2f} ms")
    print(f"ast.parse      {parse:.2f} ms")
    print(f"ratio          {parts / parse:.2f}x one parse")


if __name__ == "__main__":
    main()
