"""The hosts tier: runners on another "host", made of network and mount namespaces.

A test here asks for `hosts` (a server host and a runner host joined by one
veth pair, removed after the test even when it failed) and `procs` (real
`codefleet` processes, each with its log, SIGKILLed after the test). Where the
machine cannot make namespaces (no `ip`, no `unshare`, not root, a kernel
without them) the test goes through `tool_support.unavailable`: skipped with
the one-line reason, or failed when `CI` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hosts_support import Procs
from tool_support import require_tool, unavailable

from codefleet.testing.hosts import HostPair, NamespaceError, two_hosts

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hosts: runners on another host, made of namespaces")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.hosts)


@pytest.fixture
def hosts() -> Iterator[HostPair]:
    require_tool("ip", "the hosts tier makes network namespaces", "iproute2")
    require_tool("unshare", "the hosts tier makes mount namespaces", "util-linux")
    with contextlib.ExitStack() as stack:
        try:
            pair = stack.enter_context(two_hosts())
        except NamespaceError as err:
            unavailable(f"cannot make network namespaces here: {err}")
        yield pair


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    (tmp_path / "logs").mkdir()
    started = Procs(tmp_path / "logs")
    yield started
    for proc in started.started:
        proc.popen.kill()
        proc.popen.wait(timeout=30)
