"""Check views at 1k / 10k / 50k files: the copy against the overlay layer, in one run.

A check runs through `fleet.views.runinview.run_in_view`. For each tree size this times,
with 10 files held by "another task" (their pre-images masked) and the
command `true`, both views the same way a check builds them:

- `copy`: fetch the mask, `copy_tree`, fetch again, `overlay`, run, delete;
- `layer`: fetch the mask, lay out the pre-images, mount the overlay in a user
  + mount namespace, run unprivileged in the nested one, fetch again, delete.

Per kind: `build` is `ViewRun.ms` (the copy and overlay; for the layer the
layout only, its mount is inside the command's time) and `run` the whole
`run_in_view("true")` wall time, build to teardown: the cost a check pays
before and after its own command. The mask comes from memory (no server), so
both kinds pay the same nothing for it. The generated tree: files of 1-4 KB,
100 per directory, committed in a git repository; it is made under the
system temp dir (views too, unless `--view-dir`) and deleted at the end.

    uv run python -m bench.views [--sizes 1000,10000,50000] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import percentiles
from codefleet.fleet.views.runinview import Mask, ViewKind, host_view, run_in_view
from codefleet.rollback import PreImage, capture

FILES_PER_DIR = 100
HELD = 10
GIT = ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench"]


def generate(root: Path, files: int) -> list[str]:
    """`files` files of 1-4 KB, 100 per directory, committed; returns their paths."""
    paths = []
    for n in range(files):
        rel = f"d{n // FILES_PER_DIR:04d}/f{n:06d}.py"
        if n % FILES_PER_DIR == 0:
            (root / rel).parent.mkdir(parents=True)
        (root / rel).write_bytes(b"x" * (1024 + (n * 7919) % 3072) + b"\n")
        paths.append(rel)
    if shutil.which("git"):
        subprocess.run([*GIT, "init", "-q", str(root)], check=True)
        subprocess.run([*GIT, "add", "."], cwd=root, check=True)
        subprocess.run([*GIT, "commit", "-qm", "bench"], cwd=root, check=True)
    return paths


def held(root: Path, paths: list[str]) -> dict[str, PreImage]:
    """Pre-images of `HELD` files spread over the tree, which then get a half-done edit."""
    step = max(1, len(paths) // HELD)
    images = {}
    for rel in paths[::step][:HELD]:
        images[rel] = capture(root, rel)
        (root / rel).write_text("half-done\n")
    return images


async def timed(
    root: Path, mask: Mask, kind: ViewKind, repeat: int, view_dir: Path | None
) -> dict[str, list[float]]:
    async def fetch() -> Mask:
        return mask

    found: dict[str, list[float]] = {"build": [], "run": []}
    for _ in range(repeat):
        started = time.perf_counter()
        run = await run_in_view(root, fetch, "true", timeout=60, cap=1000,
                                view_dir=view_dir, view=kind)  # fmt: skip
        found["run"].append((time.perf_counter() - started) * 1000.0)
        found["build"].append(run.ms)
        assert run.ran.exit_code == 0 and run.view is kind, run
    return found


def measure(size: int, repeat: int, view_dir: Path | None) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="codefleet-bench-views-"))
    root = scratch / "tree"
    try:
        started = time.perf_counter()
        mask = Mask(held(root, generate(root, size)))
        made = time.perf_counter() - started
        report: dict[str, Any] = {"files": size, "generated_s": round(made, 1)}
        for kind in (ViewKind.COPY, ViewKind.LAYER):
            found = asyncio.run(timed(root, mask, kind, repeat, view_dir))
            report[kind.value] = {name: percentiles(v) for name, v in found.items()}
        report["ratio_run_p50"] = round(
            report["copy"]["run"]["p50"] / report["layer"]["run"]["p50"], 1
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--view-dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    probe = Path(tempfile.mkdtemp(prefix="codefleet-bench-probe-"))
    try:
        if host_view(probe, args.view_dir) is not ViewKind.LAYER:
            print("no overlay layer can be mounted here: nothing to compare", file=sys.stderr)
            return 1
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    load = os.getloadavg()[0]
    results = [measure(int(s), args.repeat, args.view_dir) for s in args.sizes.split(",")]
    if args.json:
        print(json.dumps({"load_before": load, "sizes": results}, indent=2))
        return 0
    print(f"{os.cpu_count()} cpus, load {load:.1f} before, views under {tempfile.gettempdir()}")
    print(f"{'files':>7} {'view':>6} {'build p50':>10} {'run p50':>9} {'run p95':>9} {'max':>9}")
    for found in results:
        for kind in ("copy", "layer"):
            build, run = found[kind]["build"], found[kind]["run"]
            print(f"{found['files']:>7} {kind:>6} {build['p50']:>10.1f} {run['p50']:>9.1f} "
                  f"{run['p95']:>9.1f} {run['max']:>9.1f}")  # fmt: skip
        print(f"{'':>7} copy/layer run p50: {found['ratio_run_p50']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
