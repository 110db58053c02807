"""The command layer on a 100,000-file tree: setup, collecting a change, `run_command("true")`.

`run_command` runs each command in an overlay layer over the shared tree
(`codefleet.fleet.views.layer`), then reads what it changed (`fleet.views.layerchanges`) and
applies it through the leases (`fleet.views.layerapply`). This measures, on a generated
tree of `--files` files (default 100,000, about 1 GB) in a git repository
(so `git check-ignore` runs), with 10 files held by another task (their
pre-images form the layer's middle):

- `build`: laying out the layer directory (pre-images written, nothing else);
- `mount+true`: the user + mount namespace, the overlay mount and `/bin/true`
  in it (unsandboxed), and the same under bubblewrap (`bwrap+true`);
- `collect10`: `collect` + `sort_changes` after a command modified 10 files;
- `e2e_true`: `CommandRunner.run("true")` end to end against a real server
  in this process (command_started, pre-images fetched, layer, run, collect,
  command_finished), sandboxed when bubblewrap is there;
- `e2e_apply10`: the same for a command changing 10 files, leases and all;
- `--copy`: one `fleet.views.copyview.copy_tree` of the same tree, for scale.

The tree is generated under the system temp dir and deleted at the end.

    uv run python -m bench.layer [--files N] [--repeat N] [--copy] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import percentiles
from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.tools.commandtool import CommandRunner, host_shell
from codefleet.fleet.views.copyview import copy_tree
from codefleet.fleet.views.layer import Sandbox, build_layer, layer_argv, shell_support
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.fleet.views.layerchanges import collect, sort_changes
from codefleet.paths import TreeRoot
from codefleet.rollback import PreImage
from codefleet.server.thread import ServerThread

FILES_PER_DIR = 100
HELD = 10
CHANGED = 10


def generate(root: Path, files: int) -> int:
    """`files` files of 2-18 KB in directories of 100, a .gitignore, `git init`; bytes."""
    total = 0
    for n in range(files):
        folder = root / f"d{n // FILES_PER_DIR:04d}"
        if n % FILES_PER_DIR == 0:
            folder.mkdir(parents=True)
        size = 2048 + (n * 7919) % 16384
        (folder / f"f{n:06d}.py").write_bytes(b"x" * (size - 1) + b"\n")
        total += size
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return total


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000.0)
    return out


def held_images(root: Path) -> list[PreImage]:
    paths = [f"d{n:04d}/f{n * FILES_PER_DIR:06d}.py" for n in range(HELD)]
    return [PreImage(p, True, b"HELD = 0\n", 0o644) for p in paths]


def layer_costs(root: Path, repeat: int) -> dict[str, list[float]]:
    """build, mount+true (and bwrap+true), collect10: the layer alone, no server."""
    support = shell_support()
    assert support.unshare is not None and support.problem is None, support.describe
    scratch = Path(tempfile.mkdtemp(prefix="codefleet-bench-layers-"))
    images, results = held_images(root), {"build": [], "mount+true": [], "bwrap+true": [],
                                           "collect10": []}  # fmt: skip
    change = " ".join(f"d{n:04d}/f{n * FILES_PER_DIR + 1:06d}.py" for n in range(CHANGED))
    tree = TreeRoot(root)
    try:
        for n in range(repeat):
            base = scratch / str(n)
            base.mkdir()
            started = time.perf_counter()
            layer = build_layer(root, base, images)
            results["build"].append((time.perf_counter() - started) * 1000.0)
            for name, sandbox in (
                ("mount+true", Sandbox(None)),
                ("bwrap+true", Sandbox(support.bwrap)),
            ):
                if sandbox.bwrap is None and name == "bwrap+true":
                    continue
                argv = layer_argv(layer, "true", sandbox, support.unshare)
                results[name] += timed(lambda a=argv: subprocess.run(a, check=True), 1)  # type: ignore[misc]
            argv = layer_argv(layer, f"for f in {change}; do echo changed >> $f; done",
                              Sandbox(None), support.unshare)  # fmt: skip
            subprocess.run(argv, check=True)
            results["collect10"] += timed(lambda lay=layer: sort_changes(collect(lay), tree), 1)  # type: ignore[misc]
            shutil.rmtree(base)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


async def end_to_end(root: Path, repeat: int) -> dict[str, list[float]]:
    """`CommandRunner.run` against a real server: "true", and a 10-file change applied."""
    state = Path(tempfile.mkdtemp(prefix="codefleet-bench-layer-db-"))
    settings = Settings(_env_file=None, host="127.0.0.1", port=0, db=state / "db.sqlite",  # type: ignore[call-arg]
                        workdir=root, run_dir=state / "runs", tick_interval=0.05)  # fmt: skip
    server = ServerThread(settings).start()
    config = host_shell(ShellLimits(), unsandboxed=True)
    assert config is not None
    results: dict[str, list[float]] = {"e2e_true": [], "e2e_apply10": []}
    try:
        async with FleetClient(server.url) as client:
            runner = await _started(client, root, "H")
            held = [i.path for i in held_images(root)]
            await client.acquire(runner["agent_id"], runner["epoch"], "H", held, "Write")
            mine = await _started(client, root, "T")
            gate = WriteGate(client, TreeRoot(root), mine["agent_id"], mine["epoch"], "T")
            commands = CommandRunner(gate, 1, config)
            for n in range(repeat):
                started = time.perf_counter()
                await commands.run("true")
                results["e2e_true"].append((time.perf_counter() - started) * 1000.0)
                paths = " ".join(
                    f"d{m:04d}/f{m * FILES_PER_DIR + 2:06d}.py" for m in range(CHANGED)
                )
                started = time.perf_counter()
                done = await commands.run(f"for f in {paths}; do echo run{n} >> $f; done")
                results["e2e_apply10"].append((time.perf_counter() - started) * 1000.0)
                assert len(done.applied.applied) == CHANGED, done.render()
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
    return results


async def _started(client: FleetClient, root: Path, task_id: str) -> dict[str, Any]:
    await client.create_tasks([{"id": task_id, "title": task_id, "description": "bench"}])
    agent = await client.register(f"bench-{task_id}", str(root), os.getpid())
    task = await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
    assert task is not None and task.id == task_id
    await client.start(task_id, agent["agent_id"], agent["epoch"])
    return agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--copy", action="store_true", help="also time one copy_tree")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="codefleet-bench-layer-"))
    root = scratch / "tree"
    try:
        started = time.perf_counter()
        size = generate(root, args.files)
        made_s = time.perf_counter() - started
        results = layer_costs(root, args.repeat)
        results.update(asyncio.run(end_to_end(root, args.repeat)))
        if args.copy:
            results["copy_tree"] = timed(lambda: copy_tree(root, scratch / "copy"), 1)
        report = {name: percentiles(values) for name, values in results.items() if values}
        report["tree"] = {"files": args.files, "bytes": size, "generated_s": round(made_s, 1)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"tree: {args.files} files, {size / 1e9:.2f} GB (generated in {made_s:.0f} s)")
    for name, p in report.items():
        if name != "tree":
            print(
                f"{name:>12}: p50 {p['p50']:8.1f} ms  p95 {p['p95']:8.1f} ms  max {p['max']:8.1f} ms  (n={p['n']:.0f})"
            )


if __name__ == "__main__":
    main()
