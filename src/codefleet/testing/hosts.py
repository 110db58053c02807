"""Several "hosts" on one machine: network namespaces joined by veth pairs.

Used by the hosts tier (`tests/hosts`) and the latency benchmark
(`bench/hosts.py`). `two_hosts()` makes a server host and a runner host, each a
fresh network namespace with its own address on the pair and its own loopback,
and no route anywhere else: traffic flows only between the two addresses.
`star_hosts(n)` makes a server host and n runner hosts, each runner joined by its
own pair to a bridge in the server host (the bridge holds the server's address),
as pods on one cluster network. The names carry a random tag, so concurrent runs
never meet; leaving the context deletes every namespace (which removes the
pairs and the bridge) even when the body failed.

`host.command(argv)` runs a program in a host's namespace (`ip netns exec`);
`with_tree_at` wraps a command so it runs in a private mount namespace in which
the tree is bind-mounted at another path, as a network filesystem mounted
elsewhere would show it; `with_hidden` in one where a directory is an empty,
read-only tmpfs, as a host that does not share it sees (nothing there).
`entered(host)` moves the calling thread's sockets into
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

__all__ = [
    "Host",
    "HostPair",
    "HostStar",
    "NamespaceError",
    "entered",
    "star_hosts",
    "two_hosts",
    "with_hidden",
    "with_tree_at",
]

CLONE_NEWNET: Final = 0x40000000
ADDRESS: Final = "10.207.0.{}"  # on a /24: .1 the server host, .2 (and up) the runner hosts
MAX_RUNNER_HOSTS: Final = 250  # an address each on the /24 after .1; two hex digits in a name
NETNS_DIR: Final = Path("/var/run/netns")
# `sh -c` program: bind the tree ($1) at the mount point ($2), then become the command.
BIND_AND_EXEC: Final = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
# `sh -c` program: an empty read-only tmpfs over the directory ($1), then become the command.
HIDE_AND_EXEC: Final = 'mount -t tmpfs -o ro,size=4k hidden "$1" && shift && exec "$@"'


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


@dataclass(frozen=True, slots=True)
class HostStar:
    """A server host (its device: the bridge) and runner hosts, each on its own pair to it."""

    server: Host
    runners: tuple[Host, ...]


def with_tree_at(tree: Path, mountpoint: Path, argv: Sequence[str]) -> list[str]:
    """`argv` in a private mount namespace where `tree` is also seen at `mountpoint`."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    unshare = ["unshare", "--mount", "--propagation", "private"]
    return [*unshare, "sh", "-c", BIND_AND_EXEC, "sh", str(tree), str(mountpoint), *argv]


def with_hidden(directory: Path, argv: Sequence[str]) -> list[str]:
    """`argv` in a private mount namespace where `directory` is empty and cannot be written."""
    unshare = ["unshare", "--mount", "--propagation", "private"]
    return [*unshare, "sh", "-c", HIDE_AND_EXEC, "sh", str(directory), *argv]


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


def _make_star(star: HostStar) -> None:
    bridge = star.server
    _ip("netns", "add", bridge.netns)
    _ip("-n", bridge.netns, "link", "add", bridge.device, "type", "bridge")
    _ip("-n", bridge.netns, "addr", "add", f"{bridge.address}/24", "dev", bridge.device)
    for device in (bridge.device, "lo"):
        _ip("-n", bridge.netns, "link", "set", device, "up")
    for host in star.runners:
        port = host.device[:-1] + "s"  # the pair's end in the server host, a port of the bridge
        _ip("netns", "add", host.netns)
        _ip("-n", bridge.netns, "link", "add", port, "type", "veth", "peer", "name", host.device)
        _ip("-n", bridge.netns, "link", "set", host.device, "netns", host.netns)
        _ip("-n", bridge.netns, "link", "set", port, "master", bridge.device, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.device)
        _ip("-n", host.netns, "link", "set", host.device, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")


def _remove(*hosts: Host) -> None:
    for host in hosts:  # deleting a namespace deletes its end of each pair (and its bridge)
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
        _remove(pair.server, pair.runner)


@contextlib.contextmanager
def star_hosts(runners: int) -> Iterator[HostStar]:
    """A server host and `runners` runner hosts, each on its own pair to the server host's
    bridge; removed on exit, even on failure."""
    if not 1 <= runners <= MAX_RUNNER_HOSTS:
        raise ValueError(f"runner hosts: 1 to {MAX_RUNNER_HOSTS}, not {runners}")
    tag = secrets.token_hex(4)
    star = HostStar(  # interface names: 15 characters at most
        server=Host(f"cf-{tag}-server", f"cf{tag}b", ADDRESS.format(1)),
        runners=tuple(
            Host(f"cf-{tag}-runner{i}", f"cf{tag}{i:02x}r", ADDRESS.format(2 + i))
            for i in range(runners)
        ),
    )
    try:
        _make_star(star)
        yield star
    finally:
        _remove(star.server, *star.runners)


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
