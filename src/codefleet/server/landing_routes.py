"""The landing routes: a landing worker's steps, and the operator's view and resume.

A worker (`fleet.landingworker`) claims the step to run (`POST /landing/claim`, a
short long-poll parked on the queue's `claimable` event, set whenever the queue, a round
or the halt changes), reads what its view puts back (`GET
/landing/steps/{id}/preimages`), says when each check starts, says it is alive
while the step runs (`POST /landing/steps/{id}/beat`: a claim whose worker is not
heard from for `stale_after` lapses) and posts the verdicts (`POST
/landing/steps/{id}/result`); a step that is no longer current answers `409
not_owner`. `GET /landing` is the queue as `codefleet landing`
shows it; `POST /landing/resume` lifts a halt; `POST /landing/integration`
sets the check every landing must pass (`run --integration`). Never on the
hook's path: nothing here is a fast-path route. Each route is a row of
`LANDING_ROUTES` (`transport.routetable.Route`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

from fastapi import FastAPI

from codefleet.api.answermodels import (
    Acknowledged,
    Claimed,
    LandingResumed,
    LandingState,
    ResultApplied,
    StepAlive,
    StepPreimages,
)
from codefleet.api.landingrecords import CheckRun
from codefleet.api.wire import (
    IntegrationBody,
    LandingClaimBody,
    LandingResultBody,
    LandingStartedBody,
)
from codefleet.coord.engine import Engine
from codefleet.transport.routetable import Answer, Args, Route, install_routes

__all__ = ["LANDING_ROUTES", "install_landing_routes"]


async def _claim(engine: Engine, a: Args) -> Answer:
    b: LandingClaimBody = a.body
    deadline = time.monotonic() + b.wait
    while True:
        changed = engine.landing_queue.claimable  # taken first: a change after it is not missed
        step = engine.landing_queue.claim(b.worker, b.timeout_s)
        left = deadline - time.monotonic()
        if step is not None or left <= 0 or engine.landing_queue.closing:
            return 200, Claimed(step=step)
        with contextlib.suppress(TimeoutError):  # a lapsed claim: the worker's next asks
            await asyncio.wait_for(changed.wait(), left)


async def _preimages(engine: Engine, a: Args) -> Answer:
    return 200, StepPreimages.model_validate(engine.landing_queue.preimages(a.param))


async def _started(engine: Engine, a: Args) -> Answer:
    engine.landing_queue.started(a.param, a.body.check)
    return 200, Acknowledged(ok=True)


async def _beat(engine: Engine, a: Args) -> Answer:
    return 200, StepAlive.model_validate(engine.landing_queue.beat(a.param))


async def _result(engine: Engine, a: Args) -> Answer:
    b: LandingResultBody = a.body
    results = [CheckRun.from_wire(r.model_dump()) for r in b.results]
    return 200, ResultApplied.model_validate(engine.landing_queue.result(a.param, results))


async def _state(engine: Engine, _: Args) -> Answer:
    return 200, _with_leases(engine, engine.landing_queue.state())


async def _resume(engine: Engine, _: Args) -> Answer:
    return 200, LandingResumed.model_validate(engine.landing_queue.resume())


async def _integration(engine: Engine, a: Args) -> Answer:
    engine.landing_queue.set_integration(a.body.check)
    return 200, _with_leases(engine, engine.landing_queue.state())


def _with_leases(engine: Engine, state: dict[str, Any]) -> LandingState:
    """The landing state and what a write leases by default under it (`auto` resolved)."""
    chosen = engine.runner.default_granularity
    leases = {"setting": chosen.value, "resolved": engine.runner.lease_granularity().value}
    return LandingState.model_validate({**state, "lease_granularity": leases})


STEP = "/landing/steps/{step_id}"
# The landing queue's calls (`engine.landing_queue`): a worker's, then the operator's.
LANDING_ROUTES: Final = (
    Route("claim", "POST", "/landing/claim", _claim, LandingClaimBody, answer=Claimed),
    Route(
        "preimages", "GET", f"{STEP}/preimages", _preimages, param_type=int, answer=StepPreimages
    ),
    Route(
        "started",
        "POST",
        f"{STEP}/started",
        _started,
        LandingStartedBody,
        param_type=int,
        answer=Acknowledged,
    ),
    Route("beat", "POST", f"{STEP}/beat", _beat, param_type=int, answer=StepAlive),
    Route(
        "result",
        "POST",
        f"{STEP}/result",
        _result,
        LandingResultBody,
        param_type=int,
        answer=ResultApplied,
    ),
    Route("state", "GET", "/landing", _state, answer=LandingState),
    Route("resume", "POST", "/landing/resume", _resume, answer=LandingResumed),
    Route(
        "integration",
        "POST",
        "/landing/integration",
        _integration,
        IntegrationBody,
        answer=LandingState,
    ),
)


def install_landing_routes(app: FastAPI, engine: Engine) -> None:
    """Declare the landing queue's routes to FastAPI, each from its row in `LANDING_ROUTES`."""
    install_routes(app, engine, LANDING_ROUTES)
