"""`POST /tasks` of a big graph in process: the server's own cost, without uvicorn or a client.

The app is built from a checkout's `create_app` with its lifespan entered and
the heap settled (`heap.settle`, as `codefleet serve` runs it), then one `POST /tasks` of `bench.harness.build_graph`
goes straight into its ASGI callable. Reported per run (a fresh database and
app each, one process per run so no run inherits another's heap): wall and
process CPU ms of the request, and the collector's passes during it (count
and ms per generation). Run from the checkout to measure:
`uv run python -m bench.postload --tasks 10000 --runs 3`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import build_graph


def _collector_log() -> tuple[Counter[int], Counter[int]]:
    """Passes and seconds per generation, counted from now on."""
    passes: Counter[int] = Counter()
    spent: Counter[int] = Counter()
    began = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            passes[info["generation"]] += 1
            spent[info["generation"]] += time.perf_counter() - began[0]  # type: ignore[assignment]

    gc.callbacks.append(callback)
    return passes, spent


async def _post(app: Any, body: bytes) -> int:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/tasks", "raw_path": b"/tasks", "root_path": "",
        "query_string": b"", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8099),
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # no disconnect while the request runs
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


async def one_run(tasks: int) -> dict[str, Any]:
    from codefleet.config import Settings
    from codefleet.gcpolicy import settle
    from codefleet.server.httpapp import create_app

    root = Path(tempfile.mkdtemp())
    (root / "tree").mkdir()
    settings = Settings(workdir=root / "tree", db=root / "db.sqlite", run_dir=root / "runs")
    app = create_app(settings)
    body = json.dumps({"tasks": build_graph(tasks)}).encode()
    async with app.router.lifespan_context(app):
        settle()  # as `codefleet serve` does before it answers
        passes, spent = _collector_log()
        wall, cpu = time.perf_counter(), time.process_time()
        status = await _post(app, body)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if status != 201:
        raise SystemExit(f"POST /tasks -> {status}")
    return {
        "wall_ms": 1000 * wall, "cpu_ms": 1000 * cpu,
        "collections": {g: [passes[g], round(1000 * spent[g], 1)] for g in sorted(passes)},
    }  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child's single run
    args = p.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(one_run(args.tasks))))
        return 0
    for _ in range(args.runs):
        child = [sys.executable, "-m", "bench.postload", "--one", "--tasks", str(args.tasks)]
        run = json.loads(subprocess.run(child, check=True, capture_output=True).stdout)
        print(f"POST of {args.tasks:,} tasks: wall {run['wall_ms']:.0f} ms, CPU "
              f"{run['cpu_ms']:.0f} ms; collections (generation: passes, ms) "
              f"{run['collections']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
