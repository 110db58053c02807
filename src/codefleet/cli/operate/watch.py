"""`codefleet watch`: the live terminal dashboard of a running server (read-only)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from codefleet.api.client import (
    ServerUnavailable,
)
from codefleet.cli.common import RUN, ServerOpt, TokenOpt, app, make_client, settings_from
from codefleet.cli.output import console
from codefleet.errors import DomainError
from codefleet.ui.dashboard import watch as run_dashboard

if TYPE_CHECKING:
    from codefleet.config import Settings

__all__ = ["watch"]


@app.command(rich_help_panel=RUN)
def watch(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Live dashboard of a running server (read-only; Ctrl-C to leave)."""
    settings = settings_from(server_url=server, token=token)

    async def go() -> None:
        console.print(f"watch: {await _tree(settings)} · server {settings.url}", markup=False)
        await run_dashboard(settings.url, settings.token, console)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())


async def _tree(settings: Settings) -> str:
    """The tree the server serves, for the first line (the dashboard keeps retrying)."""
    try:
        async with make_client(settings) as client:
            return f"tree {(await client.health())['workdir']}"
    except ServerUnavailable:
        return "no server answers yet (retrying)"
    except DomainError as err:  # e.g. a missing token: the dashboard shows it too
        return f"tree unknown ({err.message})"
