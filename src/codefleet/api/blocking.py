"""One blocking HTTP/1.1 exchange over a plain socket, all of it within one deadline.

The person's hook (`hook.command`, on every write of a person's session) and the
commands a person types while a fleet runs (`cli.operate.quick`: `tasks`, `say`, ...)
each send one request per process and must start in milliseconds, so neither
imports httpx: they connect, send the request `api.http1` builds, read to
the end (`Connection: close`) and parse the answer's head. An address literal
skips name resolution; https (a server behind a TLS proxy) imports `ssl` only
then. Standard library only (tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Final

from codefleet.api.http1 import Origin, dechunk, header_lines, parse_head, request_bytes

__all__ = ["DEFAULT_MAX_BYTES", "exchange"]

DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024  # the hook's answers are small


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
