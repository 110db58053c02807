"""The Host check: without a token, the server answers only to loopback names.

A DNS-rebinding page (`attacker-rebound.example`, re-pointed at 127.0.0.1)
makes the operator's browser talk to the server under the attacker's name,
and without a token nothing else would refuse it: it could read prompts and
patches and add tasks. So when the server has no token (which `serve` only
allows on loopback) every request's `Host` must name the server by a loopback
literal (`127.0.0.1`, `::1`, the address it binds) or by one of the configured
names (`CODEFLEET_ALLOWED_HOSTS`, default `localhost`), with or without a
port; anything else, an empty or missing `Host` included, is `403
host_not_allowed` before any route or body is read (`guards.Guards`). With a
token the token is the guard, and named hosts (a reverse proxy, a LAN name)
work as they are. Allowed raw `Host` values are remembered (a few, bounded),
so a runner's repeated `127.0.0.1:<port>` is one set lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["HostNames", "host_name"]

LOOPBACK_LITERALS: Final = frozenset({"127.0.0.1", "::1"})
REMEMBERED_HOSTS: Final = 64  # distinct allowed raw Host values kept (spellings, ports)


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


class HostNames:
    """The names a token-less server answers to; `refusal` says why any other is refused."""

    def __init__(self, names: Iterable[str], bind_host: str) -> None:
        self.allowed = LOOPBACK_LITERALS | {n.strip().lower() for n in names if n.strip()}
        self.allowed |= {bind_host.strip().lower()}
        self.listed = ", ".join(sorted(self.allowed))
        self.seen: set[bytes] = set()  # raw values already found allowed

    def refusal(self, raw: bytes) -> str | None:
        """None when the raw `Host` value names this server; else the refusal's message."""
        if raw in self.seen:
            return None
        text = raw.decode("latin-1")
        if host_name(text) in self.allowed:
            if len(self.seen) < REMEMBERED_HOSTS:
                self.seen.add(raw)
            return None
        return (
            f"Host {text[:100]!r} is not allowed: a server without a token answers only to "
            f"{self.listed} (CODEFLEET_ALLOWED_HOSTS), so a web page cannot reach it under "
            "another name"
        )
