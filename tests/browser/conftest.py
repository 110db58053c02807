"""Browser-test fixtures: a real server on the demo tree, and headless Chromium.

`workdir` is overridden here with a copy of `examples/demo-repo`, so the root
`make_server` fixture serves the demo tree; `demo_server` is that server with
a token and fast ticks. `browser` is Debian's Chromium driven by Playwright
with a fresh profile in `tmp_path` (see `web_support`). Every test here is
marked `browser`; those that drive the browser are skipped with the reason
when no Chromium is found, unless `CI` is set (then `require_chromium` fails
each one instead).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from web_support import EXAMPLES, FAST, TOKEN, Browser, launch, missing_chromium

from codefleet.server.thread import ServerThread

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives the web dashboard in headless Chromium")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = None if os.environ.get("CI") else missing_chromium()
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)
            if missing and "browser" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.skip(reason=missing))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(EXAMPLES / "demo-repo", tree)
    return tree


@pytest.fixture
def demo_server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(token=TOKEN, **FAST)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    async with launch(tmp_path / "chromium-profile") as chromium:
        yield chromium
