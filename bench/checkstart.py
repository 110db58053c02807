"""What a check costs besides its command, phase by phase, on a real library's tree.

The tree is `bench.libsuite`'s (a real library, locked and synced with uv, in git).
With 10 of its files held by "another task" (their pre-images masked, from
memory: no server), each phase is timed `--repeat` times, interleaved:

- `identity`: `fleet.views.identity.view_identity` once (a check takes it twice);
- `process`: `fleet.views.shell.run_command("true")` (shell, watcher, group kill);
- `layer build`: laying out the layer (`build_layer`, the 10 pre-images);
- `namespace`: the user + mount namespaces, the overlay mount and `true` in it;
- `layer view` / `copy view`: `run_in_view("true")` whole, build to teardown;
- in the layer view, the commands that start a check's Python: the venv's python
  bare, `uv run` as named (it checks the lock against pyproject.toml, then the
  environment against the lock), `--frozen` (no lock check, still the sync) and
  `--no-sync` (neither); in the copy view (`.venv` is not copied) `uv run` as
  named and `--frozen`, each building the environment afresh; `uv run, lock kept`
  is `uv run` as named with `fleet.views.uvlock`'s kept lock (its first run, the
  warm-up, resolves and keeps it: the rest run frozen on it);
- `--suite`: the library's suite itself in the layer, `uv run` against the venv's
  `python -m pytest`.

`--no-lock`: the tree as the sdist ships it, without `uv.lock` (synced all the
same): every `uv run` in a view resolves, asking the package index.

    uv run python -m bench.checkstart [--repeat N] [--suite N] [--no-lock] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import percentiles
from bench.libsuite import SUITE, prepare
from codefleet.fleet.views.identity import view_identity
from codefleet.fleet.views.layer import build_layer, layer_argv, shell_line, shell_support
from codefleet.fleet.views.runinview import CHECK_SANDBOX, Mask, ViewKind, run_in_view
from codefleet.fleet.views.shell import check_env, run_command
from codefleet.fleet.views.uvlock import LockCache
from codefleet.rollback import PreImage, capture

HELD = 10
PY = "python -c pass"
STARTS = {
    "python bare": f".venv/bin/{PY}",
    "uv run": f"uv run --project . {PY}",
    "uv run --frozen": f"uv run --frozen --project . {PY}",
    "uv run --no-sync": f"uv run --no-sync --project . {PY}",
}
COPY_STARTS = ("uv run", "uv run --frozen")


def held_images(tree: Path) -> dict[str, PreImage]:
    paths = sorted(p.relative_to(tree).as_posix() for p in (tree / "boltons").glob("*.py"))
    return {p: capture(tree, p) for p in paths[:HELD]}


def phases(tree: Path, locks: LockCache) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Each phase as a coroutine factory over `tree`; `locks` for the kept-lock phases."""
    images = held_images(tree)

    async def mask() -> Mask:
        return Mask(images)

    async def in_view(command: str, kind: ViewKind, kept: LockCache | None = None) -> None:
        run = await run_in_view(tree, mask, command, timeout=600, cap=2000, view=kind, locks=kept)
        if run.ran.exit_code != 0:
            raise SystemExit(f"{command} failed in the {kind} view:\n{run.ran.output}")

    async def layer_build() -> None:
        with tempfile.TemporaryDirectory() as base:
            build_layer(tree, Path(base), images.values())

    async def namespace() -> None:
        with tempfile.TemporaryDirectory() as base:
            layer = build_layer(tree, Path(base), images.values())
            argv = layer_argv(layer, "true", CHECK_SANDBOX, shell_support().unshare or "unshare")
            await run_command(
                shell_line(argv), Path(base), timeout=60, cap=100, env=check_env(tree)
            )

    async def identity() -> None:
        await asyncio.to_thread(view_identity, tree, images)

    found: dict[str, Callable[[], Awaitable[Any]]] = {
        "identity": identity,
        "process": lambda: run_command("true", tree, timeout=60, cap=100, env=check_env(tree)),
        "layer build": layer_build,
        "namespace": namespace,
        "layer view": lambda: in_view("true", ViewKind.LAYER),
        "copy view": lambda: in_view("true", ViewKind.COPY),
    }
    locked = (tree / "uv.lock").exists()  # without it, `--frozen` cannot start
    for label, command in STARTS.items():
        if not locked and "--frozen" in label:
            continue
        found[f"layer: {label}"] = lambda c=command: in_view(c, ViewKind.LAYER)  # type: ignore[misc]
    found["layer: uv run, lock kept"] = lambda: in_view(STARTS["uv run"], ViewKind.LAYER, locks)
    for label in COPY_STARTS[: 2 if locked else 1]:
        found[f"copy: {label}"] = lambda c=STARTS[label]: in_view(c, ViewKind.COPY)  # type: ignore[misc]
    found["copy: uv run, lock kept"] = lambda: in_view(STARTS["uv run"], ViewKind.COPY, locks)
    return found


def suite_phases(tree: Path, locks: LockCache) -> dict[str, Callable[[], Awaitable[Any]]]:
    async def mask() -> Mask:
        return Mask({})

    async def in_layer(command: str, kept: LockCache | None = None) -> None:
        await run_in_view(
            tree, mask, command, timeout=600, cap=2000, view=ViewKind.LAYER, locks=kept
        )

    bare = SUITE.replace("uv run --project . pytest", ".venv/bin/python -m pytest")
    frozen = SUITE.replace("uv run", "uv run --frozen")
    found = {
        "suite: uv run": lambda: in_layer(SUITE),
        "suite: uv run --frozen": lambda: in_layer(frozen),
        "suite: uv run, lock kept": lambda: in_layer(SUITE, locks),
        "suite: python -m pytest": lambda: in_layer(bare),
    }
    if not (tree / "uv.lock").exists():
        del found["suite: uv run --frozen"]
    return found


async def measure(steps: dict[str, Callable[[], Awaitable[Any]]], repeat: int) -> dict[str, Any]:
    """Each step `repeat` times, interleaved round by round; ms percentiles per step."""
    times: dict[str, list[float]] = {label: [] for label in steps}
    for step in steps.values():  # one warm-up each
        await step()
    for _ in range(repeat):
        for label, step in steps.items():
            started = time.perf_counter()
            await step()
            times[label].append((time.perf_counter() - started) * 1000.0)
    return {label: percentiles(values, (50, 90)) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--suite", type=int, default=3, help="runs of the whole suite (0: none)")
    parser.add_argument("--no-lock", action="store_true", help="no uv.lock in the tree")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cf-checkstart-") as scratch:
        tree = prepare(Path(scratch), lock=not args.no_lock)
        (tree / ".codefleet").mkdir(exist_ok=True)  # where the locks are kept
        locks = LockCache(tree)
        found = asyncio.run(measure(phases(tree, locks), args.repeat))
        if args.suite:
            found |= asyncio.run(measure(suite_phases(tree, locks), args.suite))
    if args.json:
        print(json.dumps(found))
        return
    print(f"{'phase':<28} {'p50 ms':>9} {'p90 ms':>9} {'max ms':>9}")
    for label, stats in found.items():
        print(f"{label:<28} {stats['p50']:>9.1f} {stats['p90']:>9.1f} {stats['max']:>9.1f}")


if __name__ == "__main__":
    main()
