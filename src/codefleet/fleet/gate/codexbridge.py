"""The command a Codex runner session's `PreToolUse` hook runs: a pipe to the runner's gate.

Codex hooks are commands, not callbacks, so the runner's `CodexExecutor` serves its
attempt's `WriteGate` on a Unix socket and writes this command into the session's
Codex config: `python -m codefleet.fleet.gate.codexbridge SOCKET`. It copies the hook JSON
Codex writes on stdin to the socket, and the runner's answer (`{}` or THE denial,
`toolcalls.writepaths.deny_output`) to stdout. Codex honours that denial for `apply_patch`
(measured with CLI 0.163.0: the patch is not applied and the model reads the reason).

Fail closed: no socket, a timeout, an empty or non-JSON answer all print a denial and
exit 0, so Codex reads a refusal rather than a hook failure. Standard library only, and
nothing but `toolcalls.writepaths` imported: it starts on every patch the agent makes.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Final

from codefleet.toolcalls.writepaths import deny_output

__all__ = ["ask_gate", "exchange", "main"]

TIMEOUT_S: Final = 20.0  # below the hook timeout the runner writes into the Codex config
MAX_BYTES: Final = 16 * 1024 * 1024
UNCHECKED: Final = (
    "The patch could not be checked against the other agents' leases ({why}), so it was "
    "refused. Do not retry it. Stop now and report that the write was refused."
)


def ask_gate(socket_path: str, payload: bytes, timeout: float = TIMEOUT_S) -> dict[str, object]:
    """Send one hook payload to the runner's gate; its JSON answer, or a denial saying why not."""
    try:
        decoded = exchange(socket_path, payload, timeout)
    except (OSError, ValueError) as err:
        return deny_output(UNCHECKED.format(why=type(err).__name__))
    if not isinstance(decoded, dict):
        return deny_output(UNCHECKED.format(why="a malformed answer"))
    return decoded


def exchange(socket_path: str, payload: bytes, timeout: float | None) -> object:
    """One request on an attempt's Unix socket: send `payload`, read the whole JSON answer
    (OSError or ValueError when there is none; `timeout` None waits as long as it takes)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(socket_path)
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        answer = _read_all(conn)
    decoded: object = json.loads(answer)
    return decoded


def _read_all(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := conn.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BYTES:
            raise ValueError("answer too large")
    return b"".join(chunks)


def main(argv: list[str] | None = None) -> int:
    """`codexbridge SOCKET`: stdin to the gate, its answer to stdout; always exit 0."""
    args = sys.argv[1:] if argv is None else argv
    payload = sys.stdin.buffer.read(MAX_BYTES + 1)
    if len(args) != 1:
        answer = deny_output(UNCHECKED.format(why="no gate socket was configured"))
    elif len(payload) > MAX_BYTES:
        answer = deny_output(UNCHECKED.format(why="the hook input is too large"))
    else:
        answer = ask_gate(args[0], payload)
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
