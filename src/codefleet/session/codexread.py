"""CodeFleet's read tools for a Codex runner: a tiny MCP server on stdio, the tree only.

A Codex runner has no shell, and Codex CLI 0.163.0 offers no file-reading tool without
one, so the session's config starts this server (`python -m codefleet.session.codexread
TREE`) and the model gets `read_file(path)` and `list_files(path)`. Every path goes
through the pre-write gate's own function (`paths.TreeRoot.canonical`): anything outside
the tree, or protected (`.git`), is refused with a reason the model reads. Reads take no
lease: the lock is on writes. Standard library only, newline-delimited JSON-RPC 2.0 (the
MCP stdio transport); a request it does not know is a -32601 error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any, Final

from codefleet.paths import PathRejected, TreeRoot

__all__ = ["answer", "call_tool", "main"]

MAX_READ_CHARS: Final = 200_000
MAX_LIST: Final = 2_000
DEFAULT_PROTOCOL: Final = "2025-06-18"
TOOLS: Final = [
    {
        "name": "read_file",
        "description": "Read a text file of the shared working tree (a path relative to it).",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "list_files",
        "description": "List the files under a directory of the shared working tree (default: all).",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
]


def answer(tree: TreeRoot, message: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC response to one message (None for a notification)."""
    if "id" not in message:
        return None
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion") or DEFAULT_PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "codefleet", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = call_tool(tree, str(params.get("name")), params.get("arguments") or {})
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def call_tool(tree: TreeRoot, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call's MCP result: the text, or `isError` with the refusal."""
    raw = str(arguments.get("path") or ".")
    try:
        key = tree.canonical(raw) if raw not in (".", "") else ""
    except PathRejected as err:
        return _text(f"{raw} cannot be read: {err.message}.", error=True)
    target = tree.root / key if key else tree.root
    if name == "read_file":
        return _read(target, raw)
    if name == "list_files":
        return _list(tree, target, raw)
    return _text(f"unknown tool {name!r}", error=True)


def _read(target: Path, raw: str) -> dict[str, Any]:
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return _text(f"{raw} cannot be read: {err.strerror or err}.", error=True)
    return _text(text[:MAX_READ_CHARS])


def _list(tree: TreeRoot, target: Path, raw: str) -> dict[str, Any]:
    if not target.is_dir():
        return _text(f"{raw} is not a directory of the tree.", error=True)
    found: list[str] = []
    for path in sorted(target.rglob("*")):
        if len(found) >= MAX_LIST:
            break
        relative = path.relative_to(tree.root).as_posix()
        if path.is_file() and ".git" not in relative.split("/"):
            found.append(relative)
    return _text("\n".join(found) or "(no files)")


def _text(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def serve(tree: TreeRoot, stdin: IO[str], stdout: IO[str]) -> None:
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(tree, message) if isinstance(message, dict) else None
        if reply is not None:
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m codefleet.session.codexread TREE\n")
        return 2
    serve(TreeRoot(Path(args[0])), sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
