"""The minimal HTTP/1.1 client both hand-written clients share: standard library only.

The pre-write lane (`api.lane`, asyncio streams, keep-alive) and the blocking
client (`api.blockingclient`, a plain socket, one exchange per process: the
person's hook and the fast commands) send the same requests to the same server:
a JSON body with a `Content-Length`. What HTTP they speak is here, once: where
an origin URL points (`Origin`), a request's bytes (`request_bytes`), an
answer's head (`parse_head`) and a chunked body (`dechunk`). Each client keeps
only its own I/O, so neither imports the other's. Nothing here imports more
than the interpreter starts with: the hook runs on every write of a person's
session (tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

__all__ = ["Head", "Origin", "dechunk", "header_lines", "parse_head", "request_bytes"]

MAX_HEAD_BYTES: Final = 64 * 1024  # an answer's head longer than this is not one of ours


class Origin(NamedTuple):
    """Where a server URL points: `scheme://netloc/prefix`, host and port resolved."""

    scheme: str  # "http" or "https"
    netloc: str  # as written: the Host header
    host: str  # brackets of an IPv6 literal removed
    port: int
    prefix: str  # "" or "/path", no trailing slash: prepended to every request path

    @classmethod
    def of(cls, url: str) -> Origin:
        """`url` split; `ValueError` for anything but an http:// or https:// URL with a host."""
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in ("http", "https"):
            raise ValueError(f"unsupported server URL {url!r}")
        netloc, _, path = rest.partition("/")
        host, port = _host_port(netloc, 443 if scheme == "https" else 80)
        if not host:
            raise ValueError(f"no host in the server URL {url!r}")
        path = path.strip("/")
        return cls(scheme, netloc, host, port, "/" + path if path else "")


def _host_port(netloc: str, default: int) -> tuple[str, int]:
    if netloc.startswith("["):  # [::1]:8099
        host, _, port = netloc[1:].partition("]")
        return host, int(port.lstrip(":") or default)
    host, _, port = netloc.partition(":")
    return host, int(port or default)


def header_lines(headers: Mapping[str, str]) -> str:
    """`Name: value\\r\\n` for each header, in order (a client may build its fixed ones once)."""
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items())


def request_bytes(method: str, target: str, headers: str, body: bytes) -> bytes:
    """One request: its line, the `header_lines` given, `Content-Length`, the body."""
    head = f"{method} {target} HTTP/1.1\r\n{headers}Content-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


class Head(NamedTuple):
    """What a client needs of an answer's head."""

    status: int
    length: int | None  # Content-Length, if given
    keep_alive: bool  # the connection may carry the next request
    transfer_encoding: str  # "" if none; "chunked": the body is in chunks (`dechunk`)


def parse_head(head: bytes) -> Head:
    """The head of an answer (its bytes up to the blank line); `ValueError` if unreadable."""
    if len(head) > MAX_HEAD_BYTES:
        raise ValueError("the answer's head is too long")
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    length, keep, encoding = None, version == "HTTP/1.1", ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            encoding = value
        elif name == "connection":
            keep = value == "keep-alive" or (keep and value != "close")
    return Head(int(rest.split(" ", 1)[0]), length, keep, encoding)


def dechunk(body: bytes) -> bytes:
    """A chunked body's data (trailers dropped)."""
    out: list[bytes] = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(body[:size])
        body = body[size + 2 :]
    return b"".join(out)
