"""Summarize a server profile: top functions by inclusive ("cumulative") and self time.

Reads py-spy's `--format raw` collapsed stacks (`*.collapsed`, written by
`--profile py-spy`) or a cProfile dump (`*.prof`, from `--profile cprofile`).
py-spy only samples the server while it is on CPU, so the percentages are
shares of the server's busy time. Run:
`uv run python -m bench.profile_summary /tmp/leases32.collapsed --top 25`.
"""

from __future__ import annotations

import argparse
import pstats
import re
import sys
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def _function(frame: str) -> str:
    """`name (path/file.py:123)` -> `name (path/file.py)`: one row per function."""
    return _LINE.sub(")", frame.strip())


def collapsed(path: Path) -> tuple[Counter[str], Counter[str], int]:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        frames = [_function(f) for f in stack.split(";") if f]
        total += samples
        for frame in set(frames):
            inclusive[frame] += samples
        if frames:
            own[frames[-1]] += samples
    return inclusive, own, total


ENGINE = re.compile(
    r"codefleet/(engine\w*|store|paths|index|scheduler|models|rollback|invariants)\.py"
)
FRAMEWORK = re.compile(r"(fastapi|starlette|pydantic|codefleet/server\w*|codefleet/guards)")


def bucket(frames: list[str]) -> str:
    """Where one sample's time belongs: the engine, the socket write, the framework, or below."""
    engine = [f for f in frames if ENGINE.search(f)]
    if engine:
        leaf = next((f for f in reversed(frames) if "codefleet/" in f), engine[-1])
        module = re.search(r"codefleet/(\w+)\.py", leaf)
        return f"engine: {module.group(1) if module else '?'} (leaf-most codefleet module)"
    if any("RequestResponseCycle.send" in f for f in frames):
        return "uvicorn: response write (socket send; includes being preempted by the woken client)"
    if any(FRAMEWORK.search(f) for f in frames):
        return "framework: FastAPI/Starlette routing, validation, responses"
    if any("uvicorn/" in f for f in frames):
        return "uvicorn: request parsing, connection handling"
    return "event loop and other"


def buckets(path: Path) -> tuple[Counter[str], int]:
    found: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            found[bucket(stack.split(";"))] += int(count)
            total += int(count)
    return found, total


def print_collapsed(path: Path, top: int, match: str | None) -> None:
    found, all_samples = buckets(path)
    print(f"-- where the server's time goes ({all_samples} samples) --")
    for name, samples in found.most_common():
        print(f"{100 * samples / all_samples:6.1f}%  {name}")
    inclusive, own, total = collapsed(path)
    print(f"\n{path}: {total} samples (server on CPU)")
    for title, table in (("inclusive", inclusive), ("self", own)):
        print(f"\n-- top {top} by {title} time --")
        shown = 0
        for frame, samples in table.most_common():
            if match and not re.search(match, frame):
                continue
            print(f"{100 * samples / total:6.1f}%  {frame}")
            shown += 1
            if shown >= top:
                break


def print_cprofile(path: Path, top: int, match: str | None) -> None:
    stats = pstats.Stats(str(path))
    stats.sort_stats("cumulative")
    stats.print_stats(*([match] if match else []), top)
    stats.sort_stats("tottime")
    stats.print_stats(*([match] if match else []), top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default=None, help="only frames matching this regex")
    args = parser.parse_args(argv)
    if args.profile.suffix == ".prof":
        print_cprofile(args.profile, args.top, args.match)
    else:
        print_collapsed(args.profile, args.top, args.match)
    return 0


if __name__ == "__main__":
    sys.exit(main())
