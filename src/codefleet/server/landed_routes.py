"""The landed line's routes: its state, and git's smart HTTP to fetch it.

`GET /landed` says where the line is (its first commit, its tip, the last event
it followed, tasks that could not go on it, or why the tree has none). Under
`/git/landed.git/` git's own `http-backend` answers fetches and clones
(`server.gitbackend`); a line that has not started answers 503 with the reason.
`GET /landed` is a row (`transport.routetable.Route`); git's routes hand git the
raw request (method, query, headers, body) and stay written out. Never on the
hook's path: nothing here is a fast-path route.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI, Request
from fastapi.responses import Response

from codefleet.api.answermodels import LandedLine
from codefleet.server.gitbackend import git_response
from codefleet.server.linefollower import LineFollower
from codefleet.transport.guards import envelope
from codefleet.transport.routetable import Answer, Args, Route, install_route

__all__ = ["LANDED_ROUTE", "install_landed_routes"]


async def _landed(follower: LineFollower, _: Args) -> Answer:
    return 200, LandedLine.model_validate(follower.state())


LANDED_ROUTE: Final = Route(  # over the `LineFollower`
    "landed", "GET", "/landed", _landed, answer=LandedLine
)


def install_landed_routes(app: FastAPI, follower: LineFollower) -> None:
    """`GET /landed` from its row; git's two routes written out: they hand git the raw request."""
    install_route(app, follower, LANDED_ROUTE)

    async def git(rest: str, request: Request) -> Response:
        line = follower.line
        if line is None or not line.started:
            why = follower.off or "the landed line has not started yet (a task holds a lease)"
            return Response(envelope("unavailable", why), 503, media_type="application/json")
        return await git_response(
            line.place.parent,
            request.method,
            rest,
            request.url.query,
            request.headers,
            await request.body(),
        )

    for method in ("GET", "POST"):  # one route each: each its own operation in the schema
        app.add_api_route("/git/landed.git/{rest:path}", git, methods=[method], response_model=None)
