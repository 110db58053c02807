"""Browser-test fixtures: a real server on the demo tree, and headless Chromium.

`workdir` is overridden here with a copy of `examples/demo-repo`, so the root
`make_server` fixture serves the demo tree; `demo_server` is that server with
a token and fast ticks. `browser` is Debian's Chromium driven by Playwright
with a fresh profile in `tmp_path` (see `web_support`). Every test here is
marked `browser`. A test that needs Chromium asks for the `chromium` fixture
(`browser` does): without one it goes through the one rule of
`tool_support.unavailable` — skipped with the reason, or failed when `CI` is
set — before any of its other fixtures start a server.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from web_support import EXAMPLES, FAST, TOKEN, Browser, launch, require_chromium

from codefleet.server.thread import ServerThread

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives the web dashboard in headless Chromium")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that needs Chromium meets the rule before its fixtures run (no server for nothing)."""
    if "chromium" in getattr(item, "fixturenames", ()):
        require_chromium()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(EXAMPLES / "demo-repo", tree)
    return tree


@pytest.fixture
def demo_server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(token=TOKEN, verify_before_landing=True, **FAST)  # as `codefleet demo`


@pytest.fixture
def chromium() -> Path:
    """The Chromium to drive (see `pytest_runtest_setup` for when there is none)."""
    return require_chromium()


@pytest.fixture
async def browser(chromium: Path, tmp_path: Path) -> AsyncIterator[Browser]:
    async with launch(chromium, tmp_path / "chromium-profile") as driven:
        yield driven
