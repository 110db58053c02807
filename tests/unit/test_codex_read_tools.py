"""The Codex runner's read tools (`session.codexread`): MCP over stdio, the tree only."""

from __future__ import annotations

import io
import json
from pathlib import Path

from codefleet.paths import TreeRoot
from codefleet.session.codexread import answer, call_tool, serve


def text_of(result: dict) -> str:
    return str(result["content"][0]["text"])


def test_a_file_of_the_tree_is_read(workdir: Path) -> None:
    result = call_tool(TreeRoot(workdir), "read_file", {"path": "pkg/b.py"})
    assert (result["isError"], text_of(result)) == (False, "B = 2\n")


def test_a_path_outside_the_tree_or_in_git_is_refused(workdir: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    for raw in ("../secret.txt", str(tmp_path / "secret.txt"), ".git/config"):
        result = call_tool(TreeRoot(workdir), "read_file", {"path": raw})
        assert result["isError"] and "cannot be read" in text_of(result), raw


def test_the_listing_names_the_trees_files_without_git(workdir: Path) -> None:
    assert text_of(call_tool(TreeRoot(workdir), "list_files", {})).splitlines() == [
        "a.py",
        "pkg/b.py",
    ]


def test_the_stdio_server_answers_initialize_list_and_call_and_ignores_notifications(
    workdir: Path,
) -> None:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18"},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "a.py"}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
    ]
    out = io.StringIO()
    serve(TreeRoot(workdir), io.StringIO("".join(json.dumps(m) + "\n" for m in lines)), out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"
    assert [t["name"] for t in replies[1]["result"]["tools"]] == ["read_file", "list_files"]
    assert text_of(replies[2]["result"]) == "A = 1\n"
    assert replies[3]["error"]["code"] == -32601
    assert answer(TreeRoot(workdir), {"method": "x"}) is None
