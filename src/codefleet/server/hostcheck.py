"""The Host check: without a token, the server answers only to loopback names.

A DNS-rebinding page (`attacker-rebound.example`, re-pointed at 127.0.0.1)
makes the operator's browser talk to the server under the attacker's name,
and without a token nothing else would refuse it: it could read prompts and
patches and add tasks. So when the server has no token (which `serve` only
allows on loopback) every request's `Host` must name the server by a loopback
literal (`127.0.0.1`, `::1`, the address it binds) or by one of the configured
names (`CODEFLEET_ALLOWED_HOSTS`, default `localhost`), with or without a
port; anything else, an empty or missing `Host` included, is `403
host_not_allowed` before any route or body is read. With a token the token is
the guard, and named hosts (a reverse proxy, a LAN name) work as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from codefleet.server.guards import envelope, send_json

__all__ = ["HostCheck", "host_name"]

LOOPBACK_LITERALS: Final = frozenset({"127.0.0.1", "::1"})


def host_name(value: str) -> str:
    """The name part of a `Host` header, lower-cased: `[::1]:8099` -> `::1`."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        return name if bracket and (not rest or _port(rest)) else value
    name, colon, port = value.rpartition(":")
    return name if colon and port.isdigit() else value


def _port(rest: str) -> bool:
    return rest.startswith(":") and rest[1:].isdigit()


class HostCheck:
    def __init__(self, app: ASGIApp, names: Iterable[str], bind_host: str) -> None:
        self.app = app
        self.allowed = LOOPBACK_LITERALS | {n.strip().lower() for n in names if n.strip()}
        self.allowed |= {bind_host.strip().lower()}
        self.listed = ", ".join(sorted(self.allowed))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if host_name(raw) in self.allowed:
            await self.app(scope, receive, send)
            return
        message = (
            f"Host {raw[:100]!r} is not allowed: a server without a token answers only to "
            f"{self.listed} (CODEFLEET_ALLOWED_HOSTS), so a web page cannot reach it under "
            "another name"
        )
        await send_json(send, 403, envelope("host_not_allowed", message))
