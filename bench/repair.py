"""Repair or rework: what one integration break costs each way, through the real CLI offline.

The offline tier: the real bundled Claude Code CLI, the real runner, server and landing
worker, against the scripted fake model on 127.0.0.1 (no key, no network). One task
makes a change in W work turns (each reads or writes one of W files); the change
passes alone but breaks the landing check (`! grep -q BROKEN`). With repair turns on
(`--repair-turns 1`, the default) the landing resumes the session, which fixes the one
line in two more turns; with them off (0) the change is rolled back and a new session
does the W turns again, with the fix. The fake reports each reply's usage as a session's
context grows (input = 2,000 + 1,500 per earlier reply of the conversation, output 300),
so the tokens are simulated, priced by the CLI itself. Reported per mode: the task's
tokens and cost, model replies, landing checks and the drain's wall time.

Run: `uv run python -m bench.repair [--work W] [--rounds R] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, Usage
from codefleet.server.thread import ServerThread
from codefleet.session.offline import offline_executor

CHECK = "! grep -rq BROKEN src"


def usage(turn: int) -> Usage:
    """A reply's usage at this place in its conversation: the context grows each turn."""
    return Usage(input_tokens=2_000 + 1_500 * turn, output_tokens=300)


def work(tree: Path, files: int, broken: bool) -> list[Turn]:
    """W writes, one file each; the last one breaks the landing check unless fixed."""
    turns = []
    for n in range(files):
        text = f"VALUE_{n} = {n}\n" + ("# BROKEN\n" if broken and n == files - 1 else "")
        path = str(tree / "src" / f"m{n}.py")
        turns.append(Turn(content=(ToolUse("Write", {"file_path": path, "content": text}),)))
    return [*turns, Turn(content=(Text("Done."),))]


def scripts(fake: FakeModel, tree: Path, files: int) -> None:
    """T1-a1: the work, then the repair (2 more turns); T1-a2: the rework, done right."""
    last = str(tree / "src" / f"m{files - 1}.py")
    fix = Turn(
        content=(ToolUse("Write", {"file_path": last, "content": f"VALUE_{files - 1} = 0\n"}),)
    )
    first = [*work(tree, files, broken=True), fix, Turn(content=(Text("Repaired."),))]
    again = [*work(tree, files, broken=False)]
    for script_id, turns in (("T1-a1", first), ("T1-a2", again)):
        fake.add_script(script_id, [Turn(t.content, usage=usage(n)) for n, t in enumerate(turns)])


async def one_run(base: Path, files: int, repair_turns: int) -> dict[str, Any]:
    tree = base / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[core]\n")
    settings = Settings(
        _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
        run_dir=base / "runs", tick_interval=0.05, heartbeat_interval=0.2,
        repair_turns=repair_turns,
    )  # fmt: skip
    server = ServerThread(settings).start()
    try:
        with FakeModel() as fake:
            scripts(fake, tree, files)
            async with FleetClient(server.url) as client:
                await client.create_tasks(
                    [{"id": "T1", "title": "work", "description": "the work"}], {"land": CHECK}
                )
                await client.set_integration("land")
                executor = offline_executor(fake, ("T1-a1", "T1-a2"))
                runner = RunnerOptions(
                    "runner", tree, base / "runs", poll_wait=0.2, repair_turns=repair_turns
                )
                started = time.perf_counter()
                result = await run_fleet(server.url, lambda _: executor, FleetOptions(runner))
                wall = time.perf_counter() - started
                row = await client.task("T1")
                events = await client.all_events()
            replies = len(fake.requests())
    finally:
        server.stop()
    assert result.ok, result.tasks
    return {
        "tokens": int(row["input_tokens"]) + int(row["output_tokens"]),
        "cost_usd": float(row["cost_usd"]),
        "replies": replies,
        "attempts": int(row["attempts"]),
        "landing_checks": sum(e["type"] == "landing_check_finished" for e in events),
        "wall_s": wall,
    }


async def measure(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"repair": [], "rework": []}
    for _ in range(args.rounds):  # alternating, so a busy moment hits both
        for mode, turns in (("repair", 1), ("rework", 0)):
            with tempfile.TemporaryDirectory(prefix="bench-repair-") as tmp:
                runs[mode].append(await one_run(Path(tmp), args.work, turns))
    return runs


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| mode | tokens (simulated) | cost (priced) | model replies | attempts | landing checks "
        "| wall s (median, min-max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, found in runs.items():
        first = found[0]
        walls = [r["wall_s"] for r in found]
        lines.append(
            f"| {mode} | {first['tokens']:,} | ${first['cost_usd']:.4f} | {first['replies']} "
            f"| {first['attempts']} | {first['landing_checks']} "
            f"| {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=int, default=8, help="work turns of the change (files)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = asyncio.run(measure(args))
    print(json.dumps(runs, indent=2) if args.json else table(runs))


if __name__ == "__main__":
    main()
