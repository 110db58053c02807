"""Live tier (`pytest -m live`, deselected by default): the demo with a real model and key.

Spends real money (five small tasks, a few dollars at most). A real model decides its own
order of work, so the collision is staged by the task prompts, not guaranteed; the test
asserts what the issue promises when it does happen: the cascade, a veto, the vetoed task
succeeding on retry, and the demo repository's own tests passing.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from codefleet.cli.start.demo_run import run_demo

pytestmark = pytest.mark.live


def _events(workspace: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(workspace / "codefleet.db") as db:
        return list(db.execute("SELECT type, task_id FROM events ORDER BY id"))


def test_the_live_demo_cascades_vetoes_retries_and_passes(tmp_path: Path) -> None:
    assert os.environ.get("ANTHROPIC_API_KEY"), "the live tier needs ANTHROPIC_API_KEY"
    out = io.StringIO()

    ok = run_demo("live", tmp_path, runners=3, console=Console(file=out, width=200))

    assert ok, out.getvalue()
    [workspace] = tmp_path.glob("demo-*")
    events = _events(workspace)
    assert events.index(("task_succeeded", "T1")) < events.index(("task_assigned", "T2"))
    records = [json.loads(p.read_text()) for p in (workspace / "sessions").glob("*.json")]
    vetoed = [
        r for r in records if r["outcome"] != "cancelled" and r["outcome"]["error_kind"] == "veto"
    ]
    assert vetoed, "no veto this run: the model avoided the staged collision"
    for record in vetoed:
        later = [
            r
            for r in records
            if r["task_id"] == record["task_id"] and r["attempt"] > record["attempt"]
        ]
        assert any(r["outcome"] != "cancelled" and r["outcome"]["ok"] for r in later)
