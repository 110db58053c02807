"""`codefleet demo --offline --mixed`: Claude Code runners and a Codex runner, one lock.

The real thing for both agents: the bundled Claude Code CLI and the pinned Codex CLI,
each through its SDK, against one scripted model (examples/demo-model.yaml, played to
Codex as patches), leased by part. T4 is pinned to Codex and T3 to Claude Code, so the
staged veto crosses agents. A Codex patch leases its files whole, so T4 gets no part of
api.py beside T3: its first patch (of `create_app`) asks for all of api.py and is
refused on the parts T3 holds, T4 is retried on Codex after T3 succeeded, and the demo
repository's tests pass.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from codefleet.cli.start.demo_run import run_demo
from codefleet.coord.storage.store import Store
from codefleet.review.report.sidebyside import side_by_side


def test_the_mixed_offline_demo_vetoes_codex_whole_file_patch_on_parts_claude_holds_and_passes(
    tmp_path: Path,
) -> None:
    out = io.StringIO()

    ok = run_demo("offline", tmp_path, 3, Console(file=out, width=200), commit=False, mixed=True)

    text = out.getvalue()
    assert ok, text
    [workspace] = tmp_path.glob("demo-*")
    records = {p.stem: json.loads(p.read_text()) for p in (workspace / "sessions").glob("*.json")}
    first, retry = records["T4-attempt1"], records["T4-attempt2"]
    assert (first["agent"], first["runner"]) == ("codex", "codex-3")
    assert first["outcome"]["error_kind"] == "veto"
    assert first["outcome"]["blocked_on_path"] == "api.py::<from collections import Counter>"
    assert retry["outcome"]["ok"] is True
    assert records["T3-attempt1"]["runner"].startswith("runner-")  # a Claude Code session
    store = Store(workspace / "codefleet.db")
    events = store.events(0, 100_000)
    agents = {a["name"]: a["agent"] for a in store.agents()}
    store.close()
    t3_parts = {
        e["payload"]["path"]
        for e in events
        if e["type"] == "lease_acquired" and e["task_id"] == "T3" and "::" in e["payload"]["path"]
    }
    denied = [e for e in events if e["type"] == "lease_denied"]
    t4_keys = {
        e["payload"]["path"]
        for e in events
        if e["type"] == "lease_acquired" and e["task_id"] == "T4"
    }
    # Codex's patch of api.py asked for the whole file: refused on T3's parts, nothing
    # beside them; its retry leased api.py whole.
    assert denied and {(e["task_id"], e["payload"]["tool"]) for e in denied} == {
        ("T4", "apply_patch")
    }
    assert {e["payload"]["path"] for e in denied} <= t3_parts
    assert "api.py::<from collections import Counter>" in t3_parts
    assert "api.py" in t4_keys and not any(k.startswith("api.py::") for k in t4_keys)
    assert side_by_side(events) == []
    assert agents == {"runner-1": "claude", "runner-2": "claude", "codex-3": "codex"}
    assert "VETO  codex-3 (task T4) was refused api.py::<from collections import Counter>" in text
    assert "SIDE BY SIDE" not in text
