"""What mapping a file to parts and putting parts back cost, per language, at 10 KB / 100 KB / 1 MB.

In process, CPU ms, each mapper's size bound lifted (the point is to choose it): a
generated file of short functions per language and size, and the median over `--runs`
of a map (`mapper.index`) and of a put-back (`put_back_parts` of a failed holder's
function beside another holder's change: the current text and the result mapped, the
pre-image kept mapped after the first run, as on the server), each run on a new text
so no cache answers. With `tree-sitter-python` importable (not a dependency), its
parse of the Python file is measured beside `ast.parse` (the collector paused).

    uv run python -m bench.partcost [--sizes 10 100 1000] [--runs 5]

Figures: docs/performance.md "Parts in every language" and decision 0163.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from codefleet.parts import python as python_parts
from codefleet.parts.golang import GO
from codefleet.parts.java import JAVA
from codefleet.parts.model import PartMapper
from codefleet.parts.putback import put_back_parts
from codefleet.parts.python import PYTHON
from codefleet.parts.rust import RUST
from codefleet.parts.treesitter import TreeSitterParts
from codefleet.parts.typescript import JAVASCRIPT, TSX, TYPESCRIPT

UNBOUNDED = 1 << 40

# language -> (header, one function numbered n: its text, with `VALUE` where the number goes)
SOURCES: dict[str, tuple[str, Callable[[int], str]]] = {
    "python": (
        '"""Generated."""\n\nimport os\n',
        lambda n: f"\n\ndef func_{n}(x):\n    # step {n}\n    y = x + VALUE\n    return y * 2\n",
    ),
    "typescript": (
        '// Generated.\nimport { a } from "./a";\n',
        lambda n: (
            f"\nexport function func{n}(x: number): number {{\n"
            f"  // step {n}\n  const y = x + VALUE;\n  return y * 2;\n}}\n"
        ),
    ),
    "tsx": (
        '// Generated.\nimport { a } from "./a";\n',
        lambda n: (
            f"\nexport function Item{n}(p: {{ x: number }}) {{\n"
            f"  // step {n}\n  const y = p.x + VALUE;\n  return <li key={{y}}>{{y * 2}}</li>;\n}}\n"
        ),
    ),
    "javascript": (
        '// Generated.\nimport { a } from "./a.js";\n',
        lambda n: (
            f"\nexport function func{n}(x) {{\n  // step {n}\n"
            f"  const y = x + VALUE;\n  return y * 2;\n}}\n"
        ),
    ),
    "go": (
        '// Package gen is generated.\npackage gen\n\nimport "fmt"\n',
        lambda n: (
            f"\nfunc Func{n}(x int) int {{\n\t// step {n}\n\ty := x + VALUE\n\treturn y * 2\n}}\n"
        ),
    ),
    "rust": (
        "//! Generated.\nuse std::fmt;\n",
        lambda n: (
            f"\npub fn func_{n}(x: i64) -> i64 {{\n    // step {n}\n"
            f"    let y = x + VALUE;\n    y * 2\n}}\n"
        ),
    ),
    "java": (
        "package gen;\n\nimport java.util.List;\n",
        lambda n: (
            f"\nclass Func{n} {{\n    // step {n}\n    static int f(int x) {{\n"
            f"        int y = x + VALUE;\n        return y * 2;\n    }}\n}}\n"
        ),
    ),
}
MAPPERS: dict[str, PartMapper] = {
    "python": PYTHON,
    "typescript": TYPESCRIPT,
    "tsx": TSX,
    "javascript": JAVASCRIPT,
    "go": GO,
    "rust": RUST,
    "java": JAVA,
}


def unbounded(mapper: PartMapper) -> PartMapper:
    """The mapper with its size bound lifted (Python's bound is its module's constant)."""
    if isinstance(mapper, TreeSitterParts):
        return TreeSitterParts(replace(mapper.syntax, max_bytes=UNBOUNDED))
    python_parts.MAX_PART_BYTES = UNBOUNDED  # type: ignore[misc]  # a benchmark, in its process
    return mapper


def generated(language: str, kilobytes: int, value: int) -> tuple[str, int]:
    """A file of about `kilobytes` KB and its number of functions; function n adds n."""
    header, function = SOURCES[language]
    count = max(2, kilobytes * 1000 // len(function(0).encode()))
    body = "".join(function(n).replace("VALUE", str(n + value)) for n in range(count))
    return header + body, count


def median_ms(calls: list[Callable[[], object]]) -> float:
    timings = []
    for call in calls:
        started = time.process_time()
        call()
        timings.append(time.process_time() - started)
    return statistics.median(timings) * 1000


def measure(language: str, kilobytes: int, runs: int) -> dict[str, Any]:
    """Map and put-back CPU ms (medians of `runs`) of one language at one size."""
    mapper = unbounded(MAPPERS[language])
    texts = [generated(language, kilobytes, run)[0] for run in range(runs)]
    pre, count = generated(language, kilobytes, 0)
    index = mapper.index(pre)
    assert index is not None, f"{language} {kilobytes} KB has no parts"
    names = [p.name for p in index.parts]
    middle = count // 2
    held = names[-count + middle]  # function `middle`: the parts end with the functions
    put_backs = []
    for run in range(runs):  # the holder changed its function, another holder another one
        current = pre.replace(f"step {middle}\n", f"step {middle} mine\n").replace(
            f"step {count - 2}\n", f"step {count - 2} again {run}\n"
        )
        put_backs.append(lambda c=current: _restored(mapper, pre.encode(), c.encode(), held))
    return {
        "bytes": len(pre.encode()),
        "parts": len(names),
        "map": median_ms([lambda t=t: mapper.index(t) for t in texts]),
        "put_back": median_ms(put_backs),
    }


def _restored(mapper: PartMapper, pre: bytes, current: bytes, held: str) -> None:
    result = put_back_parts(current, [(pre, [held])], mapper)
    assert result is not None and b" mine\n" not in result, f"{held} was not put back"


def tree_sitter_python_parse(kilobytes: int, runs: int) -> tuple[float, float] | None:
    """(tree-sitter-python's parse, `ast.parse`) CPU ms; None when it is not installed."""
    try:
        import tree_sitter

        grammar: Any = importlib.import_module("tree_sitter_python")
    except ImportError:
        return None
    parser = tree_sitter.Parser(tree_sitter.Language(grammar.language()))
    texts = [generated("python", kilobytes, run)[0] for run in range(runs)]
    ts = median_ms([lambda t=t: parser.parse(t.encode()) for t in texts])
    gc.disable()  # as Python's mapper parses (decision 0154)
    try:
        return ts, median_ms([lambda t=t: ast.parse(t) for t in texts])
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--languages", nargs="+", default=list(SOURCES))
    args = parser.parse_args()
    print("| language | file | parts | map ms | put-back ms |")
    print("|---|---|---|---|---|")
    for language in args.languages:
        for size in args.sizes:
            got = measure(language, size, args.runs)
            print(
                f"| {language} | {got['bytes'] / 1000:,.0f} KB | {got['parts']:,} "
                f"| {got['map']:,.1f} | {got['put_back']:,.1f} |"
            )
    for size in args.sizes:
        both = tree_sitter_python_parse(size, args.runs)
        if both is not None:
            print(
                f"python {size} KB: tree-sitter-python parse {both[0]:.1f} ms, ast {both[1]:.1f} ms"
            )


if __name__ == "__main__":
    main()
