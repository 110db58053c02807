"""The TypeScript example, run as a user runs it: `codefleet demo --example typescript --dry-run`.

Two tasks (T1, T2) each add their own handler and import to `src/router.ts` at once: the
graph names an integration check, so `lease_granularity: auto` leases by part, neither is
vetoed, both land, and the demo prints a SIDE BY SIDE line naming the parts each held.
The example's check (`tests/check_router.py`, Python and the TypeScript grammar, no Node)
is held to what it says it checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner, Result

from codefleet.cli.app import app
from codefleet.cli.start.demo_run import examples_dir
from codefleet.coord.storage.store import Store

SIDE_BY_SIDE = (
    'SIDE BY SIDE  src/router.ts: T1 held <import { countWords } from "./words";>, getWordCount '
    'while T2 held <import { VERSION } from "./version";>, getVersion'
)


def demo(*args: str) -> Result:
    """`codefleet demo ARGS` with no CODEFLEET_* or credentials from the outer environment."""
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_", "CLAUDE_"))}
    return CliRunner().invoke(app, ["demo", *args], env={**clean, "COLUMNS": "250"})  # type: ignore[dict-item]


def test_two_tasks_add_a_handler_each_to_router_ts_side_by_side_and_the_run_passes(
    tmp_path: Path,
) -> None:
    result = demo("--example", "typescript", "--dry-run", "--run-dir", str(tmp_path))

    assert result.exit_code == 0, result.stdout
    [workspace] = tmp_path.glob("demo-*")
    store = Store(workspace / "codefleet.db")
    try:
        events = store.events(0, 100_000)
    finally:
        store.close()
    router = (workspace / "tree" / "src" / "router.ts").read_text()
    keys = {
        (e["task_id"], str(e["payload"].get("path")))
        for e in events
        if e["type"] == "lease_acquired"
    }
    assert [e for e in events if e["type"] == "lease_denied"] == []
    assert ("T1", "src/router.ts::getWordCount") in keys and (
        "T2",
        "src/router.ts::getVersion",
    ) in keys
    assert not any(key == "src/router.ts" for _, key in keys), "router.ts was never leased whole"
    assert 'import { countWords } from "./words";\n' in router
    assert 'import { VERSION } from "./version";\n' in router
    assert "export function getWordCount(params: Params): Reply {" in router
    assert "export function getVersion(): Reply {" in router
    assert '["GET", "/notes/:id/words", getWordCount],' in router
    assert SIDE_BY_SIDE in result.stdout
    assert "PASS" in result.stdout and "3/3 tasks succeeded · 0 veto(es)" in result.stdout


def test_the_typescript_example_has_no_offline_model_and_says_so_before_starting(
    tmp_path: Path,
) -> None:
    result = demo("--example", "typescript", "--offline", "--run-dir", str(tmp_path))
    unknown = demo("--example", "cobol", "--dry-run", "--run-dir", str(tmp_path))

    assert result.exit_code == 1 and "has no scripted model for --offline" in result.stderr
    assert unknown.exit_code == 1 and "--example is one of python, typescript" in unknown.stderr
    assert list(tmp_path.iterdir()) == []


def check_router(tree: Path) -> subprocess.CompletedProcess[str]:
    """The example's check, as its graph runs it: `python tests/check_router.py` in the tree."""
    return subprocess.run(
        [sys.executable, "tests/check_router.py"], cwd=tree, capture_output=True, text=True
    )


def test_the_examples_check_passes_as_shipped_and_names_a_route_without_a_handler(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(examples_dir() / "ts-demo", tree)
    shipped = check_router(tree)
    router = tree / "src" / "router.ts"
    router.write_text(router.read_text().replace("getNote],", 'getNote],\n  ["GET", "/x", getX],'))
    (tree / "src" / "reply.ts").write_text("export function json(status: number {\n")

    broken = check_router(tree)

    assert shipped.returncode == 0 and "OK: 3 modules, 0 problems" in shipped.stdout
    assert broken.returncode == 1
    assert "FAIL src/router.ts: ROUTES names getX, which router.ts does not define" in broken.stdout
    assert "FAIL src/reply.ts does not parse" in broken.stdout
