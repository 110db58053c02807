"""The dashboard's static shell over plain HTTP: what is served, with which headers, to whom.

The shell (HTML, CSS, JS) is public even on a server with a token, because it
holds no data; every read the page makes needs the token. Nothing here needs a
browser.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from web_support import TOKEN

from codefleet.server.pages import WEB_DIR
from codefleet.server.thread import ServerThread


@pytest.fixture
async def anonymous(make_server: Callable[..., ServerThread]) -> AsyncIterator[httpx.AsyncClient]:
    """A client WITHOUT the token, on a server that has one."""
    server = make_server(token=TOKEN)
    async with httpx.AsyncClient(base_url=server.url) as client:
        yield client


async def test_the_page_is_served_at_the_root_with_a_strict_content_policy(
    anonymous: httpx.AsyncClient,
) -> None:
    page = await anonymous.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "'unsafe-inline'" not in policy
    assert '<script type="module" src="/web/app.js">' in page.text
    assert (await anonymous.head("/")).status_code == 200


async def test_every_shipped_file_is_served_with_its_type_and_nothing_else_is(
    anonymous: httpx.AsyncClient,
) -> None:
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for path in sorted(WEB_DIR.iterdir()):
        answer = await anonymous.get(f"/web/{path.name}")
        assert answer.status_code == 200, path.name
        assert answer.content == path.read_bytes()
        if path.suffix in types:
            assert answer.headers["content-type"].startswith(types[path.suffix])
    missing = await anonymous.get("/web/nothing.js")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


async def test_data_and_anything_but_a_read_of_the_shell_still_need_the_token(
    anonymous: httpx.AsyncClient,
) -> None:
    for path in ("/state", "/events", "/events/stream", "/conflicts", "/web/sub/app.js"):
        assert (await anonymous.get(path)).status_code == 401, path
    assert (await anonymous.post("/", json={})).status_code == 401
    assert (await anonymous.get("/health")).status_code == 200
    authorized = await anonymous.get("/state", headers={"Authorization": f"Bearer {TOKEN}"})
    assert authorized.status_code == 200


def test_every_module_and_asset_the_page_names_is_shipped() -> None:
    names = {p.name for p in WEB_DIR.iterdir()}
    page = (WEB_DIR / "index.html").read_text()
    named = set(re.findall(r'"/web/([^"]+)"', page))
    for module in WEB_DIR.glob("*.js"):
        named |= set(re.findall(r'from "\./([^"]+)"', module.read_text()))
    assert named and named <= names
    assert {"index.html", "app.js", "style.css"} <= names
