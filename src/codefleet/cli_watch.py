"""`codefleet watch`: the live terminal dashboard of a running server (read-only)."""

from __future__ import annotations

import asyncio
import contextlib

from codefleet.cli_common import RUN, ServerOpt, TokenOpt, app, console, settings_from

__all__ = ["watch"]


@app.command(rich_help_panel=RUN)
def watch(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Live dashboard of a running server (read-only; Ctrl-C to leave)."""
    from codefleet.dashboard import watch as run_dashboard

    settings = settings_from(server_url=server, token=token)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_dashboard(settings.url, settings.token, console))
