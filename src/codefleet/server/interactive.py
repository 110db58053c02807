"""Routes for a person's own Claude Code session: the `codefleet hook` and `release` calls.

- `POST /interactive/acquire`: the leases for one write of the session, all
  or nothing; the answer has the shape of `POST /leases/acquire`, and each
  denial also names the holder's task title and kind (`task`/`interactive`).
- `POST /interactive/changes` (`202`): ledger rows from the session's
  PostToolUse; never vetoes.
- `POST /interactive/release`: `{session_id}` (its SessionEnd, or the
  operator) or `{all: true}`; answers the sessions released and their paths.

No epoch header: an interactive holder is never fenced (see
`engine_interactive`). The token guard covers these routes like every other.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from codefleet.api.wire import InteractiveAcquireBody, InteractiveReleaseBody
from codefleet.coord.engine import Engine
from codefleet.errors import DomainError
from codefleet.models import ReleaseReason

__all__ = ["install_interactive"]


def install_interactive(app: FastAPI, engine: Engine) -> None:
    holders = engine.interactive

    @app.post("/interactive/acquire")
    async def interactive_acquire(body: InteractiveAcquireBody) -> JSONResponse:
        return JSONResponse(holders.acquire(body.session_id, body.user, body.paths, body.tool))

    @app.post("/interactive/changes", status_code=202)
    async def interactive_changes(body: InteractiveAcquireBody) -> JSONResponse:
        holders.record_change(body.session_id, body.user, body.paths, body.tool)
        return JSONResponse({}, 202)

    @app.post("/interactive/release")
    async def interactive_release(body: InteractiveReleaseBody) -> JSONResponse:
        if body.all == (body.session_id is not None):
            raise DomainError("give exactly one of session_id and all=true")
        reason = ReleaseReason(body.reason)
        released = holders.release(body.session_id, reason, every=body.all)
        return JSONResponse({"released": released})
