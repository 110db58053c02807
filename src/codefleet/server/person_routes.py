"""Routes for a person's own Claude Code session: the `codefleet hook` and `release` calls.

- `POST /interactive/acquire`: the leases for one write of the session, all
  or nothing; the answer has the shape of `POST /leases/acquire`, and each
  denial also names the holder's task title and kind (`task`/`interactive`).
- `POST /interactive/changes` (`202`): ledger rows from the session's
  PostToolUse; never vetoes.
- `POST /interactive/release`: `{session_id}` (its SessionEnd, or the
  operator) or `{all: true}`; answers the sessions released and their paths.
- `POST /interactive/hold` and `/interactive/unhold`: a person takes named
  resources (`codefleet hold db`, the answer of `acquire`), and releases them
  (`codefleet release db`; a resource a fleet task holds is refused).

No epoch header: an interactive holder is never fenced (see
`coord.tables.persons`). Each call enters `engine.person`, and each write there is
one engine `transition`, like every other route's. The token guard covers these routes like every other.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from codefleet.api.wire import (
    InteractiveAcquireBody,
    InteractiveHoldBody,
    InteractiveReleaseBody,
    InteractiveUnholdBody,
)
from codefleet.coord.engine import Engine
from codefleet.coord.policy.answers import LeaseAnswer
from codefleet.errors import DomainError
from codefleet.models import ReleaseReason
from codefleet.transport.answerjson import denial_json

__all__ = ["install_interactive", "interactive_lease_json"]


def interactive_lease_json(answer: LeaseAnswer) -> dict[str, Any]:
    """A person's write: allow with the skipped paths and the holder, or the denied rows."""
    if not answer.allowed:
        denied = [denial_json(d, titled=True) for d in answer.denied]
        return {"decision": "deny", "denied": denied, "message": answer.message}
    holder = answer.holder
    return {
        "decision": "allow",
        "granted": list(answer.granted),
        "skipped": list(answer.skipped),
        "holder": None
        if holder is None
        else {"agent_id": holder.agent_id, "name": holder.name, "task_id": holder.task_id},
    }


def install_interactive(app: FastAPI, engine: Engine) -> None:
    @app.post("/interactive/acquire")
    async def interactive_acquire(body: InteractiveAcquireBody) -> JSONResponse:
        answer = engine.person.acquire(body.session_id, body.user, body.paths, body.tool)
        return JSONResponse(interactive_lease_json(answer))

    @app.post("/interactive/changes", status_code=202)
    async def interactive_changes(body: InteractiveAcquireBody) -> JSONResponse:
        engine.person.record_change(body.session_id, body.user, body.paths, body.tool, body.sha256)
        return JSONResponse({}, 202)

    @app.post("/interactive/hold")
    async def interactive_hold(body: InteractiveHoldBody) -> JSONResponse:
        answer = engine.person.hold(body.session_id, body.user, body.names)
        return JSONResponse(interactive_lease_json(answer))

    @app.post("/interactive/unhold")
    async def interactive_unhold(body: InteractiveUnholdBody) -> JSONResponse:
        return JSONResponse(engine.person.unhold(body.names))

    @app.post("/interactive/release")
    async def interactive_release(body: InteractiveReleaseBody) -> JSONResponse:
        if body.all == (body.session_id is not None):
            raise DomainError("give exactly one of session_id and all=true")
        reason = ReleaseReason(body.reason)
        released = engine.person.release(body.session_id, reason, every=body.all)
        return JSONResponse({"released": released})
