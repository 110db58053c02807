"""`codefleet demo --offline --mixed`: Claude Code runners and a Codex runner, one lock.

The real thing for both agents: the bundled Claude Code CLI and the pinned Codex CLI,
each through its SDK, against one scripted model (examples/demo-model.yaml, played to
Codex as patches). T4 is pinned to Codex and T3 to Claude Code, so the staged veto
crosses agents: Codex's patch of api.py is refused while a Claude Code session holds it,
T4 is retried on Codex after T3 succeeded, and the demo repository's tests pass.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from codefleet.cli.start.demo_run import run_demo
from codefleet.coord.storage.store import Store


def test_the_mixed_offline_demo_vetoes_codex_on_a_file_claude_holds_and_passes(
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
    assert (first["outcome"]["error_kind"], first["outcome"]["blocked_on_path"]) == (
        "veto",
        "api.py",
    )
    assert retry["outcome"]["ok"] is True
    assert records["T3-attempt1"]["runner"].startswith("runner-")  # a Claude Code session
    store = Store(workspace / "codefleet.db")
    [denied] = [e for e in store.events(0, 10_000, "lease_denied")]
    agents = {a["name"]: a["agent"] for a in store.agents()}
    store.close()
    assert denied["task_id"] == "T4" and denied["payload"]["path"] == "api.py"
    assert agents == {"runner-1": "claude", "runner-2": "claude", "codex-3": "codex"}
    assert "VETO  codex-3 (task T4) was refused api.py" in text
