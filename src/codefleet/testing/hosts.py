"""Two "hosts" on one machine: network namespaces joined by one veth pair.

Used by the two-host test (`tests/hosts`) and the latency benchmark
(`bench/hosts.py`). `two_hosts()` makes a server host and a runner host, each a
fresh network namespace with its own address on the pair and its own loopback,
and no route anywhere else: traffic flows only between the two addresses. The
names carry a random tag, so concurrent runs never meet; leaving the context
deletes both namespaces (which removes the pair) even when the body failed.

`host.command(argv)` runs a program in a host's namespace (`ip netns exec`);
`with_tree_at` wraps a command so it runs in a private mount namespace in which
the tree is bind-mounted at another path, as a network filesystem mounted
elsewhere would show it. `entered(host)` moves the calling thread's sockets into
a host (setns), for a client that must speak from that host. Everything needs
root and a kernel that allows namespaces; `NamespaceError` says in one line why
not.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["Host", "HostPair", "NamespaceError", "entered", "two_hosts", "with_tree_at"]

CLONE_NEWNET: Final = 0x40000000
ADDRESS: Final = "10.207.0.{}"  # on a /24: .1 the server host, .2 the runner host
NETNS_DIR: Final = Path("/var/run/netns")
# `sh -c` program: bind the tree ($1) at the mount point ($2), then become the command.
BIND_AND_EXEC: Final = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


class NamespaceError(RuntimeError):
    """This machine (kernel, permissions, tools) cannot make the namespaces; the one-line why."""


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: its name (for `ip netns`), its end of the pair and its address on it."""

    netns: str
    device: str
    address: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv`, run in this host's network namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]


@dataclass(frozen=True, slots=True)
class HostPair:
    server: Host
    runner: Host


def with_tree_at(tree: Path, mountpoint: Path, argv: Sequence[str]) -> list[str]:
    """`argv` in a private mount namespace where `tree` is also seen at `mountpoint`."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    unshare = ["unshare", "--mount", "--propagation", "private"]
    return [*unshare, "sh", "-c", BIND_AND_EXEC, "sh", str(tree), str(mountpoint), *argv]


def _ip(*args: str) -> None:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise NamespaceError("no `ip` command (iproute2)") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise NamespaceError(
            f"`ip {' '.join(args)}` failed: {said[-1] if said else done.returncode}"
        )


def _make(pair: HostPair) -> None:
    hosts = (pair.server, pair.runner)
    for host in hosts:
        _ip("netns", "add", host.netns)
    _ip("link", "add", pair.server.device, "type", "veth", "peer", "name", pair.runner.device)
    for host in hosts:
        _ip("link", "set", host.device, "netns", host.netns)
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.device)
        _ip("-n", host.netns, "link", "set", host.device, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")


def _remove(pair: HostPair) -> None:
    for host in (pair.server, pair.runner):  # deleting a namespace deletes its end of the pair
        if (NETNS_DIR / host.netns).exists():
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, timeout=10)


@contextlib.contextmanager
def two_hosts() -> Iterator[HostPair]:
    """A server host and a runner host joined by a veth pair; removed on exit, even on failure."""
    tag = secrets.token_hex(4)
    pair = HostPair(  # interface names: 15 characters at most
        server=Host(f"cf-{tag}-server", f"cf{tag}s", ADDRESS.format(1)),
        runner=Host(f"cf-{tag}-runner", f"cf{tag}r", ADDRESS.format(2)),
    )
    try:
        _make(pair)
        yield pair
    finally:
        _remove(pair)


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(f"setns: {os.strerror(errno)}")


@contextlib.contextmanager
def entered(host: Host) -> Iterator[None]:
    """The calling thread's new sockets open in `host`'s network namespace until exit.

    A socket keeps the namespace it was opened in: open and use a client's
    connections inside the block.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / host.netns, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
