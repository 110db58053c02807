"""CodeFleet's tools for a Codex runner session: a thin MCP stdio proxy to the runner.

A Codex session's tools are MCP servers it starts itself, so its config starts this
one (`python -m codefleet.session.codexread SOCKET`). It answers `initialize` and
`ping` itself and forwards each `tools/list` and `tools/call` as one request over the
attempt-owned Unix socket (`fleet.gate.codexbridge.exchange`, the channel its patch hook
uses too), where the runner's `CodexExecutor` answers from the attempt's own tool table
(`session.tools`, the same code a Claude Code session's in-process tools run): reads
land in the attempt's read set, resources, checks, questions and commands on its gate.

Calls are answered in threads, so a long one (a check, a question waiting for the
operator) does not hold up the others. No socket, or no answer: the call is a tool
error the model reads. Standard library only (with the bridge), newline-delimited
JSON-RPC 2.0 (the MCP stdio transport); a request it does not know is a -32601 error.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from codefleet.fleet.gate.codexbridge import exchange

__all__ = ["answer", "main", "serve"]

DEFAULT_PROTOCOL: Final = "2025-06-18"
FORWARDED: Final = frozenset({"tools/list", "tools/call"})
UNREACHABLE: Final = "CodeFleet's tools could not be reached ({why}); stop and report it."

Forward = Callable[[str, Any], dict[str, Any]]


def forward_to(socket_path: str) -> Forward:
    """Send one tools request to the runner; its MCP result, or a tool error saying why not."""

    def forward(method: str, params: Any) -> dict[str, Any]:
        payload = json.dumps({"method": method, "params": params}).encode()
        try:
            result = exchange(socket_path, payload, None)
        except (OSError, ValueError) as err:
            result = None
            why = type(err).__name__
        else:
            why = "a malformed answer"
        if isinstance(result, dict):
            return result
        if method == "tools/list":
            return {"tools": []}
        text = UNREACHABLE.format(why=why)
        return {"content": [{"type": "text", "text": text}], "isError": True}

    return forward


def answer(forward: Forward, message: dict[str, Any]) -> dict[str, Any] | None:
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
    elif method in FORWARDED:
        result = forward(str(method), params)
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def serve(forward: Forward, stdin: IO[str], stdout: IO[str]) -> None:
    """Answer every line of `stdin` on `stdout`, each in its own thread; wait for all."""
    lock = threading.Lock()
    workers: list[threading.Thread] = []

    def reply(message: dict[str, Any]) -> None:
        found = answer(forward, message)
        if found is not None:
            with lock:
                stdout.write(json.dumps(found) + "\n")
                stdout.flush()

    for line in stdin:
        try:
            message = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(message, dict):
            worker = threading.Thread(target=reply, args=(message,), daemon=True)
            worker.start()
            workers.append(worker)
    for worker in workers:
        worker.join()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m codefleet.session.codexread SOCKET\n")
        return 2
    serve(forward_to(args[0]), sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
