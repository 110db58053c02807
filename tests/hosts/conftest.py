"""The hosts tier: runners on another "host", made of network and mount namespaces.

A test here asks for `hosts` (a server host and a runner host joined by one
veth pair, removed after the test even when it failed), or for `star` (which
makes a server host and N runner hosts on a bridge in it, removed likewise),
and `procs` (real `codefleet` processes, each with its log, SIGKILLed after the
test). Where the
machine cannot make namespaces (no `ip`, no `unshare`, not root, a kernel
without them) the test goes through `tool_support.unavailable`: skipped with
the one-line reason, or failed when `CI` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

import pytest
from hosts_support import Procs
from tool_support import require_tool, unavailable

from codefleet.testing.hosts import HostPair, HostStar, NamespaceError, star_hosts, two_hosts

HERE = Path(__file__).parent
Made = TypeVar("Made")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hosts: runners on another host, made of namespaces")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.hosts)


def _made(stack: contextlib.ExitStack, namespaces: AbstractContextManager[Made]) -> Made:
    require_tool("ip", "the hosts tier makes network namespaces", "iproute2")
    require_tool("unshare", "the hosts tier makes mount namespaces", "util-linux")
    try:
        return stack.enter_context(namespaces)
    except NamespaceError as err:
        unavailable(f"cannot make network namespaces here: {err}")


@pytest.fixture
def hosts() -> Iterator[HostPair]:
    with contextlib.ExitStack() as stack:
        yield _made(stack, two_hosts())


@pytest.fixture
def star() -> Iterator[Callable[[int], HostStar]]:
    """`star(n)`: a server host and n runner hosts, removed after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda runners: _made(stack, star_hosts(runners))


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    (tmp_path / "logs").mkdir()
    started = Procs(tmp_path / "logs")
    yield started
    for proc in reversed(started.started):  # the clients first: the server goes last
        proc.popen.kill()
        proc.popen.wait(timeout=30)
