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
hook's path: nothing here is a fast-path route.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from codefleet.api.landingrecords import CheckRun
from codefleet.api.wire import (
    IntegrationBody,
    LandingClaimBody,
    LandingResultBody,
    LandingStartedBody,
)
from codefleet.coord.engine import Engine

__all__ = ["install_landing_routes"]


def install_landing_routes(app: FastAPI, engine: Engine) -> None:
    @app.post("/landing/claim")
    async def claim(body: LandingClaimBody) -> JSONResponse:
        deadline = time.monotonic() + body.wait
        while True:
            changed = engine.landing_queue.claimable  # taken first: a change after it is not missed
            step = engine.landing_queue.claim(body.worker, body.timeout_s)
            left = deadline - time.monotonic()
            if step is not None or left <= 0 or engine.landing_queue.closing:
                return JSONResponse({"step": None if step is None else step.to_wire()})
            with contextlib.suppress(TimeoutError):  # a lapsed claim: the worker's next asks
                await asyncio.wait_for(changed.wait(), left)

    @app.get("/landing/steps/{step_id}/preimages")
    async def preimages(step_id: int) -> JSONResponse:
        return JSONResponse(engine.landing_queue.preimages(step_id))

    @app.post("/landing/steps/{step_id}/started")
    async def started(step_id: int, body: LandingStartedBody) -> JSONResponse:
        engine.landing_queue.started(step_id, body.check)
        return JSONResponse({"ok": True})

    @app.post("/landing/steps/{step_id}/beat")
    async def beat(step_id: int) -> JSONResponse:
        return JSONResponse(engine.landing_queue.beat(step_id))

    @app.post("/landing/steps/{step_id}/result")
    async def result(step_id: int, body: LandingResultBody) -> JSONResponse:
        results = [CheckRun.from_wire(r.model_dump()) for r in body.results]
        return JSONResponse(engine.landing_queue.result(step_id, results))

    @app.get("/landing")
    async def state() -> JSONResponse:
        return JSONResponse(_with_leases(engine.landing_queue.state()))

    @app.post("/landing/resume")
    async def resume() -> JSONResponse:
        return JSONResponse(engine.landing_queue.resume())

    @app.post("/landing/integration")
    async def integration(body: IntegrationBody) -> JSONResponse:
        engine.landing_queue.set_integration(body.check)
        return JSONResponse(_with_leases(engine.landing_queue.state()))

    def _with_leases(state: dict[str, Any]) -> dict[str, Any]:
        """The landing state and what a write leases by default under it (`auto` resolved)."""
        chosen = engine.runner.default_granularity
        leases = {"setting": chosen.value, "resolved": engine.runner.lease_granularity().value}
        return {**state, "lease_granularity": leases}
