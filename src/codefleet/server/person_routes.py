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

No epoch header: a person is never fenced (`coord.tables.persons`). Each route is
a row of `PERSON_ROUTES` (`transport.routetable.Route`) whose handler enters
`engine.person`; each write there is one engine `transition`.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI

from codefleet.api.answermodels import Noted, PersonLeaseDecision, Released, Unheld
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
from codefleet.transport.routetable import Answer, Args, Route, install_routes

__all__ = ["PERSON_ROUTES", "install_interactive", "interactive_lease_json"]


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


async def _acquire(engine: Engine, a: Args) -> Answer:
    b: InteractiveAcquireBody = a.body
    return 200, interactive_lease_json(engine.person.acquire(b.session_id, b.user, b.paths, b.tool))


async def _changes(engine: Engine, a: Args) -> Answer:
    b: InteractiveAcquireBody = a.body
    engine.person.record_change(b.session_id, b.user, b.paths, b.tool, b.sha256)
    return 202, Noted()


async def _hold(engine: Engine, a: Args) -> Answer:
    b: InteractiveHoldBody = a.body
    return 200, interactive_lease_json(engine.person.hold(b.session_id, b.user, b.names))


async def _unhold(engine: Engine, a: Args) -> Answer:
    return 200, Unheld.model_validate(engine.person.unhold(a.body.names))


async def _release(engine: Engine, a: Args) -> Answer:
    b: InteractiveReleaseBody = a.body
    if b.all == (b.session_id is not None):
        raise DomainError("give exactly one of session_id and all=true")
    released = engine.person.release(b.session_id, ReleaseReason(b.reason), every=b.all)
    return 200, Released.model_validate({"released": released})


# A person's calls (`engine.person`): each a row of the route table, its handler over the engine.
# A lease answer is built from the engine's frozen value (`interactive_lease_json`), as the runner's.
PERSON_ROUTES: Final = (
    Route(
        "interactive_acquire",
        "POST",
        "/interactive/acquire",
        _acquire,
        InteractiveAcquireBody,
        answer=PersonLeaseDecision,
    ),
    Route(
        "interactive_changes",
        "POST",
        "/interactive/changes",
        _changes,
        InteractiveAcquireBody,
        status=202,
        answer=Noted,
    ),
    Route(
        "interactive_hold",
        "POST",
        "/interactive/hold",
        _hold,
        InteractiveHoldBody,
        answer=PersonLeaseDecision,
    ),
    Route(
        "interactive_unhold",
        "POST",
        "/interactive/unhold",
        _unhold,
        InteractiveUnholdBody,
        answer=Unheld,
    ),
    Route(
        "interactive_release",
        "POST",
        "/interactive/release",
        _release,
        InteractiveReleaseBody,
        answer=Released,
    ),
)


def install_interactive(app: FastAPI, engine: Engine) -> None:
    """Declare a person's routes to FastAPI, each from its row in `PERSON_ROUTES`."""
    install_routes(app, engine, PERSON_ROUTES)
