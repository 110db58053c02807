"""A Codex runner's CodeFleet tools: the tree-confined read tools (`session.tools`) and
the MCP stdio proxy that forwards to them (`session.codexread`)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from codefleet.fleet.gate.readset import ReadLog
from codefleet.paths import TreeRoot
from codefleet.session.codexread import answer, forward_to, serve
from codefleet.session.tools import mcp_result, read_tools


def call(workdir: Path, name: str, reads: ReadLog | None = None, **arguments: Any) -> dict:
    tools = read_tools(TreeRoot(workdir), reads or ReadLog())
    params = {"name": name, "arguments": arguments}
    return asyncio.run(mcp_result(tools, "tools/call", params))


def text_of(result: dict) -> str:
    return str(result["content"][0]["text"])


def test_a_file_of_the_tree_is_read_and_kept_in_the_read_set_as_shown(workdir: Path) -> None:
    reads = ReadLog()
    result = call(workdir, "read_file", reads, path="pkg/b.py")
    assert (result["isError"], text_of(result)) == (False, "B = 2\n")
    kept = reads.latest["pkg/b.py"]
    assert (kept.tool, kept.sha256) == ("read_file", hashlib.sha256(b"B = 2\n").hexdigest())


def test_a_path_outside_the_tree_or_in_git_is_refused_and_not_recorded(
    workdir: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("s")
    reads = ReadLog()
    for raw in ("../secret.txt", str(tmp_path / "secret.txt"), ".git/config"):
        result = call(workdir, "read_file", reads, path=raw)
        assert result["isError"] and "cannot be read" in text_of(result), raw
    assert reads.latest == {}


def test_the_listing_names_the_trees_files_without_git(workdir: Path) -> None:
    assert text_of(call(workdir, "list_files")).splitlines() == ["a.py", "pkg/b.py"]


def test_an_unknown_tool_is_an_error_the_model_reads(workdir: Path) -> None:
    result = call(workdir, "rm_rf")
    assert result["isError"] and "no tool 'rm_rf'" in text_of(result)


def test_the_proxy_answers_initialize_itself_and_forwards_list_and_call(workdir: Path) -> None:
    forwarded: list[tuple[str, Any]] = []

    def forward(method: str, params: Any) -> dict[str, Any]:
        forwarded.append((method, params))
        return {"tools": []} if method == "tools/list" else {"content": [], "isError": False}

    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "read_file", "arguments": {"path": "a.py"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
    ]  # fmt: skip
    out = io.StringIO()
    serve(forward, io.StringIO("".join(json.dumps(m) + "\n" for m in lines)), out)
    replies = {r["id"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert sorted(replies) == [1, 2, 3, 4]
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    assert replies[4]["error"]["code"] == -32601
    assert sorted(m for m, _ in forwarded) == ["tools/call", "tools/list"]
    assert answer(forward, {"method": "x"}) is None


def test_without_the_runners_socket_a_call_is_a_tool_error(tmp_path: Path) -> None:
    forward = forward_to(str(tmp_path / "gone.sock"))
    result = forward("tools/call", {"name": "read_file", "arguments": {"path": "a.py"}})
    assert result["isError"] and "could not be reached" in text_of(result)
    assert forward("tools/list", {}) == {"tools": []}
