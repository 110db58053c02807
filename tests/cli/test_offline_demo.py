"""`codefleet demo --offline`: the whole demo through real Claude Code sessions.

The full run is the real thing: the demo graph, three runners, the bundled CLI per
attempt, the real hook and lease server, the fake model playing
examples/demo-model.yaml, leased by part. It must show T3 and T4 in api.py side by side
through the real hook (T4's Edits of `create_app` and of its own import granted while
T3 holds its own parts), the staged veto on a part both want (T4's Edit of the module
docstring refused while T3 holds `api.py::<header>`), retry T4 to success, apply T1's command that generates
TAG_RULES.txt, show the verify loop (T1 calls the check tool, its verification fails,
the retry passes), and end with the demo repository's tests passing.
The other tests keep the model file equivalent to the dry-run script and check the
live mode refuses to start without credentials.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from codefleet.api.graphfile import load_graph
from codefleet.cli.app import app
from codefleet.cli.start.demo_run import DEMO_VERIFY, examples_dir, run_demo
from codefleet.coord.storage.store import Store
from codefleet.fleet.scripted import Step, load_script
from codefleet.offlinemodels.anthropicapi import ToolUse
from codefleet.review.report.sidebyside import SideBySide, side_by_side
from codefleet.session.credentials import CREDENTIAL_VARS
from codefleet.session.offline import load_model_scripts, shared_model
from codefleet.session.sdk import CHECK_TOOL_NAME

STORE_TAIL = "    def __len__(self) -> int:\n        return len(self._items)\n"
# the staged veto: T4's first attempt makes three edits, create_app and its import
# (granted) and the module docstring (refused)
VETOED_AFTER = {"T4-a1": 3}
T3_PARTS = (
    "<from collections import Counter>",
    "<header>",
    "ROUTES",
    "delete_bookmark",
    "list_tags",
    "update_bookmark",
)
T4_PARTS = ("<from middleware import RequestIdMiddleware>", "create_app")


def test_the_offline_demo_runs_t3_and_t4_side_by_side_in_api_py_vetoes_t4_on_a_part_and_passes(
    tmp_path: Path,
) -> None:
    out = io.StringIO()

    ok = run_demo("offline", tmp_path, runners=3, console=Console(file=out, width=200))

    text = out.getvalue()
    assert ok, text
    [workspace] = tmp_path.glob("demo-*")
    records = {p.stem: json.loads(p.read_text()) for p in (workspace / "sessions").glob("*.json")}
    first, retry = records["T4-attempt1"]["outcome"], records["T4-attempt2"]["outcome"]
    assert (first["error_kind"], first["blocked_on_path"]) == ("veto", "api.py::<header>")
    assert retry["ok"] is True
    assert all(r["init"]["permissionMode"] == "dontAsk" for r in records.values())
    assert sorted(records) == [
        "T1-attempt1",
        "T1-attempt2",
        "T2-attempt1",
        "T2-attempt2",
        "T3-attempt1",
        "T4-attempt1",
        "T4-attempt2",
        "T5-attempt1",
    ]
    # its own run_check passes; its verify fails; its repair turn changes nothing (the model
    # has no repair for it: the rework, T1-a2, fixes it), so the failure stands, not run
    # again, unless another task landed meanwhile (T3 may: a new view, so the verify runs)
    store = Store(workspace / "codefleet.db")
    [ended] = [e for e in store.events(0, 10_000, "repair_finished") if e["task_id"] == "T1"]
    assert ended["payload"]["outcome"] == "failed"
    again = [] if ended["payload"].get("kept_event") else [("test", False)]
    assert [(c["name"], c["passed"]) for c in records["T1-attempt1"]["checks"]] == [
        ("test", True),
        ("test", False),
        *again,
    ]
    checks = [e["payload"] for e in store.events(0, 10_000, "check_finished")]
    # The staged integration break, through the real CLI and hook: T2 landed second, on
    # top of T3's DELETE route, its session was resumed and repaired it, and it landed.
    repairs = store.events(0, 10_000, "repair_started")
    [broke] = [e for e in repairs if e["payload"]["cause"] == "integration"]
    assert store.events(0, 10_000, "integration_failed") == []
    landed = [e["task_id"] for e in store.events(0, 10_000, "landed")]
    commands = {e["task_id"]: e["payload"] for e in store.events(0, 10_000, "command_finished")}
    [denied] = store.events(0, 10_000, "lease_denied")
    pairs = side_by_side(store.events(0, 100_000))
    store.close()
    # Side by side through the real hook: T4's Edits of create_app and of its own import
    # were granted while T3 held its parts; its Edit of the module docstring was refused.
    assert pairs == [SideBySide("api.py", ("T3", "T4"), (T3_PARTS, T4_PARTS))]
    assert (denied["task_id"], denied["payload"]["path"]) == ("T4", "api.py::<header>")
    assert (denied["payload"]["tool"], denied["payload"]["holder_task_id"]) == ("Edit", "T3")
    assert broke["task_id"] == "T2" and "T3" in broke["payload"]["conflicts_with"]
    assert landed.index("T3") < landed.index("T2") and sorted(landed) == [
        f"T{n}" for n in range(1, 6)
    ]
    assert sorted(commands) == ["T1"]
    generated = commands["T1"]
    assert (generated["attempt"], generated["applied"], generated.get("denied_on")) == (
        2,
        ["TAG_RULES.txt"],
        None,
    )
    assert "MAX_TAGS = 10" in (workspace / "tree" / "TAG_RULES.txt").read_text()
    assert [(c["attempt"], c["purpose"], c["passed"]) for c in checks] == [
        (1, "tool", True),
        (1, "verify", False),
        *[(1, "verify", False) for _ in again],  # after the repair turn, on a new view
        (2, "verify", True),
    ]
    assert "invalid tag 'DOCS'" in checks[1]["output_tail"]
    assert "refused api.py::<header>: held by" in text and "PASS" in text
    assert (
        "SIDE BY SIDE  api.py: T3 held <from collections import Counter>, <header>, ROUTES" in text
    )
    assert "simulated, nothing spent" in text  # the fake model's tokens, priced, not paid
    fake, _ = shared_model((examples_dir() / "demo-model.yaml").resolve())
    assert fake.wait_timeouts() == [], "the veto was staged by the scripts, not by a give-up"


def _as_tool_calls(steps: list[Step]) -> list[tuple[str, dict[str, Any]]]:
    """The dry-run steps as the Claude Code tool calls that make the same change (or check)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for step in steps:
        arg = step.arg
        match step.kind:
            case "write":
                calls.append(("Write", {"file_path": arg["path"], "content": arg["content"]}))
            case "edit":
                calls.append(
                    (
                        "Edit",
                        {
                            "file_path": arg["path"],
                            "old_string": arg["old"],
                            "new_string": arg["new"],
                        },
                    )
                )
            case "append":
                new = STORE_TAIL + arg["text"]
                calls.append(
                    (
                        "Edit",
                        {"file_path": arg["path"], "old_string": STORE_TAIL, "new_string": new},
                    )
                )
            case "check":
                calls.append((CHECK_TOOL_NAME, {"name": arg}))
    return calls


def test_the_model_scripts_make_the_same_changes_as_the_dry_run_script() -> None:
    examples = examples_dir()
    dry = load_script(examples / "demo-script.yaml")
    model = load_model_scripts(examples / "demo-model.yaml")

    for script_id, turns in model.items():
        task, _, attempt = script_id.partition("-a")
        # a session's turns in order: a repair turn (`turn: 2`) is the same script's next
        steps = sorted(
            (s for s in dry[task] if s.attempt in (None, int(attempt or 1))), key=lambda s: s.turn
        )
        expected = _as_tool_calls(steps)[: VETOED_AFTER.get(script_id)]
        made = [
            (item.name, dict(item.input))
            for turn in turns
            for item in turn.content
            if isinstance(item, ToolUse) and item.name in ("Write", "Edit", CHECK_TOOL_NAME)
        ]
        assert made == expected, script_id
    assert set(dry) == {sid.partition("-a")[0] for sid in model}


def test_the_demo_graphs_test_check_is_the_suite_the_demo_runs_at_the_end() -> None:
    graph = load_graph(examples_dir() / "demo-tasks.yaml")

    assert graph.checks == {"test": f"python {DEMO_VERIFY}"}
    assert [t["id"] for t in graph if t.get("verify") == "test"] == ["T1"]


def test_the_store_tail_the_append_edits_is_unique_in_the_demo_repo() -> None:
    assert (examples_dir() / "demo-repo" / "store.py").read_text().count(STORE_TAIL) == 1


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize("args", [["demo"], ["run", "--server", "http://127.0.0.1:9"]])
def test_live_mode_without_a_key_fails_with_a_hint_at_offline_and_dry_run(
    args: list[str], tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "runs")])

    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert "ANTHROPIC_API_KEY" in message and "--offline" in message and "--dry-run" in message
