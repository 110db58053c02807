"""The routes of named resources, sequences and ports: a session's calls, and their read.

`POST /resources/acquire` and `POST /sequences/next` are runner calls (fenced by
`X-Agent-Epoch` like every other: a stale epoch is `409 stale_epoch`); `GET
/resources` is the operator's read of holders, waiters and sequences. Not on
the fast path: a session calls them a few times, not on every write.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse

from codefleet.api.wire import NumberBody, ResourceBody
from codefleet.coord.engine import Engine
from codefleet.readmodel.readapi import Reads
from codefleet.transport.answerjson import lease_json

__all__ = ["install_resource_routes"]

Epoch = Annotated[int, Header(alias="X-Agent-Epoch")]


def install_resource_routes(app: FastAPI, engine: Engine, reads: Reads) -> None:
    @app.post("/resources/acquire")
    async def acquire_resource(body: ResourceBody, epoch: Epoch) -> JSONResponse:
        answer = engine.runner.acquire_resource(body.agent_id, epoch, body.task_id, body.name)
        return JSONResponse(lease_json(answer))

    @app.get("/resources")
    async def resources() -> JSONResponse:
        return JSONResponse(reads.resources())

    @app.post("/sequences/next")
    async def next_number(body: NumberBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(
            engine.runner.next_number(body.agent_id, epoch, body.task_id, body.sequence)
        )
