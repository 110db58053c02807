"""The blocking HTTP client: one request per call over a plain socket, within one deadline.

The person's hook (`hook.command`, on every write of a person's session) and the
commands a person types while a fleet runs (`cli.operate.quick`: `tasks`, `say`, ...)
each send one request per process and must start in milliseconds, so neither
imports httpx; both send it here, the one standard-library client they share:

- `exchange`: connect, send the request `api.http1` builds, read to the end
  (`Connection: close`) and parse the answer's head, all of it (TLS too) within one
  deadline. An address literal skips name resolution; https (a server behind a TLS
  proxy) imports `ssl` only then.
- `post_json`: the hook's JSON POST over `exchange`, its answer decoded, a failure
  sorted into the two kinds the hook's policy answers differently: `Refused` (the
  server's error envelope, a 4xx) and `Unreachable` (no connection, the deadline
  passed, a 5xx, an answer that is not JSON). The fast commands word their own
  failures (`cli.operate.quickio.call`) over `exchange`.

The HTTP/1.1 itself (origin URL, request bytes, answer head, chunks) stays in
`api.http1`, not here: the pre-write lane (`api.lane`, asyncio streams, keep-alive)
speaks the same codec with I/O of its own, and a codec with no I/O is what both can
import without the other's. Standard library only (tests/unit/test_boundaries.py,
HOOK_SIDE).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from typing import Any, Final

from codefleet.api.http1 import Origin, dechunk, header_lines, parse_head, request_bytes

__all__ = ["DEFAULT_MAX_BYTES", "Refused", "Unreachable", "exchange", "post_json"]

DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024  # the hook's answers are small


class Unreachable(Exception):
    """The server did not answer usefully: no connection, a timeout, a 5xx, garbage."""


class Refused(Exception):
    """The server answered with an error envelope (4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def post_json(
    server: str,
    path: str,
    body: dict[str, Any],
    token: str | None,
    timeout: float,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """POST `body` as JSON; the decoded answer, `Refused` on a 4xx, `Unreachable` otherwise."""
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        status, raw = exchange("POST", server, path, payload, headers, timeout, max_bytes=max_bytes)
    except TimeoutError:
        raise Unreachable(f"no complete answer within {timeout:g} s") from None
    except (OSError, ValueError) as err:
        raise Unreachable(f"{type(err).__name__}: {err}") from None
    try:
        answer = json.loads(raw) if raw else {}
    except ValueError:
        raise Unreachable(f"HTTP {status} with an answer that is not JSON") from None
    if status >= 500 or not isinstance(answer, dict):
        raise Unreachable(f"HTTP {status}")
    if status >= 400:
        error = answer.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        raise Refused(status, str(message or f"HTTP {status}"))
    return answer


def exchange(
    method: str,
    server: str,
    target: str,
    payload: bytes,
    headers: Mapping[str, str],
    timeout: float,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[int, bytes]:
    """The status and body of one request to `server` + `target` (the URL's path prefix
    prepended): connect, TLS, send and every read within `timeout` seconds, else
    `TimeoutError`; `OSError` / `ValueError` for a refused connection or an answer that is
    not HTTP. Reading stops after `max_bytes`."""
    deadline = time.monotonic() + timeout
    origin = Origin.of(server)
    lines = header_lines({"Host": origin.netloc, **headers, "Connection": "close"})
    sock = _connect(origin.host, origin.port, timeout)
    try:
        if origin.scheme == "https":  # a server behind a TLS proxy
            sock = _tls(sock, origin.host, deadline)
        sock.settimeout(_left(deadline))
        sock.sendall(request_bytes(method, origin.prefix + target, lines, payload))
        return _read_response(sock, deadline, max_bytes)
    finally:
        sock.close()


def _left(deadline: float) -> float:
    """Seconds left before `deadline`; `TimeoutError` once none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connected socket; an address literal skips name resolution (and its imports)."""
    if ":" in host or host.replace(".", "").isdigit():
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((host, port))
        except BaseException:
            sock.close()
            raise
        return sock
    return socket.create_connection((host, port), timeout=timeout)


def _tls(sock: socket.socket, host: str, deadline: float) -> socket.socket:
    """`sock` wrapped in TLS (the handshake within the deadline); the slow, general path."""
    import ssl

    sock.settimeout(_left(deadline))
    return ssl.create_default_context().wrap_socket(sock, server_hostname=host)


def _read_response(sock: socket.socket, deadline: float, max_bytes: int) -> tuple[int, bytes]:
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        sock.settimeout(_left(deadline))
        data = sock.recv(65536)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    head, sep, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("incomplete HTTP answer")
    parsed = parse_head(head)
    return parsed.status, dechunk(body) if "chunked" in parsed.transfer_encoding else body
