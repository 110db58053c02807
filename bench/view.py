"""Isolated check view: how long building one takes, for the demo repo and a 5,000-file tree.

A check runs in a fresh copy of the shared tree (`codefleet.fleet.views.copyview`). This
times `copy_tree` (the copy, `.git` metadata with borrowed objects, skipped
caches) plus `overlay` (putting back the pre-images of files other tasks hold),
which is what a runner does per check besides two small HTTP reads, with the
views made in the system temp dir (the default) and, where it exists, in
/dev/shm (a tmpfs: `CODEFLEET_CHECK_DIR=/dev/shm`). For comparison it also
times `cp -a` of the same tree (which copies everything, skipped directories
and `.git/objects` included).

The generated tree: 5,000 source files in 250 directories (sizes 200 B-16 KB,
~40 MB in all, a git repository with them committed), plus 5,000 files under
`node_modules/` and 1,000 under `.venv/` that the view skips. Ten of the
source files get a foreign pre-image (half-done edits by "another task").

Run: `uv run python -m bench.view [--repeat N] [--files N] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codefleet.cli.start.demo_run import examples_dir
from codefleet.fleet.views.copyview import copy_tree, overlay
from codefleet.rollback import PreImage, capture


def generate(root: Path, files: int, seed: int = 7) -> list[str]:
    """A source-like tree of `files` files, plus skipped dirs; returns the source paths."""
    rng = random.Random(seed)
    paths = []
    for n in range(files):
        rel = f"src/pkg{n // 20:03d}/mod{n % 20:02d}.py"
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(rng.randbytes(rng.randint(100, 8000)).hex().encode()[:16_000])
        paths.append(rel)
    for n in range(files):
        dep = root / "node_modules" / f"dep{n // 50}" / f"f{n % 50}.js"
        dep.parent.mkdir(parents=True, exist_ok=True)
        dep.write_text("module.exports = 1;\n")
    for n in range(1000):
        lib = root / ".venv" / "lib" / f"m{n // 50}" / f"f{n % 50}.py"
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_text("X = 1\n")
    if shutil.which("git"):
        git = ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True)
        subprocess.run([*git, "add", "src"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", "bench"], cwd=root, check=True)
    return paths


def foreign_images(root: Path, paths: list[str], count: int) -> list[PreImage]:
    """Pre-images of `count` files, which then get a half-done edit in the tree."""
    images = []
    for rel in paths[:count]:
        images.append(capture(root, rel))
        (root / rel).write_text("half-done\n")
    return images


SHM = Path("/dev/shm")


def timed(action: Callable[[Path], Any], repeat: int, where: Path | None = None) -> list[float]:
    times = []
    for _ in range(repeat):
        base = Path(tempfile.mkdtemp(prefix="bench-view-", dir=where))
        try:
            started = time.perf_counter()
            action(base / "tree")
            times.append((time.perf_counter() - started) * 1000.0)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return times


def measure(root: Path, images: list[PreImage], repeat: int) -> dict[str, Any]:
    stats: dict[str, Any] = {}

    def view(dest: Path) -> None:
        found = copy_tree(root, dest)
        overlay(dest, images)
        stats.update(files=found.files, bytes=found.bytes, git=found.git)
        stats.update(reflinked=found.reflinked)

    results = {f"view in {tempfile.gettempdir()}": timed(view, repeat)}
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        results[f"view in {SHM}"] = timed(view, repeat, SHM)
    results["cp -a (all), for scale"] = timed(
        lambda d: subprocess.run(["cp", "-a", str(root), str(d)], check=True), repeat
    )
    return {"stats": stats, "ms": {k: _summary(v) for k, v in results.items()}}


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(ordered), 1), "p95": round(p95, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "tmp": tempfile.gettempdir(),
    }
    with tempfile.TemporaryDirectory(prefix="bench-view-src-") as scratch:
        demo = Path(scratch) / "demo"
        shutil.copytree(examples_dir() / "demo-repo", demo)
        demo_images = foreign_images(demo, ["api.py"], 1)
        report["demo repo"] = measure(demo, demo_images, args.repeat)
        big = Path(scratch) / "big"
        paths = generate(big, args.files)
        images = foreign_images(big, paths, 10)
        report[f"{args.files}-file tree"] = measure(big, images, args.repeat)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"python {report['python']}, {report['cpus']} cpus, views under {report['tmp']}")
    for name in ("demo repo", f"{args.files}-file tree"):
        found = report[name]
        print(f"\n{name}: {found['stats']}")
        for method, ms in found["ms"].items():
            print(f"  {method:<28} median {ms['median']:>8.1f} ms   p95 {ms['p95']:>8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
