"""The web dashboard: a read-only page over the wire API, served at `/`.

The files under `codefleet/server/web/` are plain HTML, CSS and JavaScript modules:
no build step, no third-party code, shipped inside the package. `GET /` is the
page; `GET /web/<file>` serves its assets from an allow-list taken when the app
is built (the directory is flat, so no path ever reaches the file system), and
`/web/wording.json`, the table of how events read that the terminal shares.

The page holds no data of its own. It reads `/state`, `/conflicts` and the SSE
stream like any other client, sending the bearer token when the server has
one, so the static shell itself is public (`guards.PUBLIC_SHELL`). It is sent
with a strict Content-Security-Policy: code, styles and connections from this
origin only, nothing inline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.responses import FileResponse

from codefleet.errors import NotFound
from codefleet.wording import WORDING_FILE

__all__ = ["WEB_DIR", "install_web"]

WEB_DIR: Final = Path(__file__).with_name("web")
MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
HEADERS: Final = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
PAGE_HEADERS: Final = {
    **HEADERS,
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}


def _asset(path: Path, headers: dict[str, str]) -> FileResponse:
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=headers)


def install_web(app: FastAPI) -> None:
    """Serve the dashboard at `/` and its assets at `/web/<file>`."""
    assets = {p.name: p for p in WEB_DIR.iterdir() if p.is_file() and p.suffix in MEDIA_TYPES}
    assets[WORDING_FILE.name] = WORDING_FILE  # how events read: one table for both dashboards
    page = assets["index.html"]

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def dashboard() -> FileResponse:
        return _asset(page, PAGE_HEADERS)

    @app.api_route("/web/{name}", methods=["GET", "HEAD"], include_in_schema=False)
    async def web_asset(name: str) -> FileResponse:
        path = assets.get(name)
        if path is None:
            raise NotFound(f"no dashboard file {name}", {"name": name})
        return _asset(path, PAGE_HEADERS if path is page else HEADERS)
