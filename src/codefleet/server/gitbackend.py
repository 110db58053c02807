"""Git's smart HTTP for the landed line: `git http-backend`, behind the server's own guards.

Runners and people fetch the landed line (`review.landedline`) with plain git,
over the server's port: `git clone http://HOST:PORT/git/landed.git`, and with a
token `git -c http.extraHeader="Authorization: Bearer TOKEN" clone ...`. Each
request is handed to git's own CGI program, `git http-backend`, with the line's
directory's parent as its project root, and its answer streamed back; the
guards (token, Host check, body limit) have run before. Fetching only: a push is
refused here (403) before git runs, and the repository's own config refuses it
too (`http.receivepack false`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Final

from starlette.responses import Response, StreamingResponse

from codefleet.review.landedline import LINE_DIR
from codefleet.transport.guards import envelope

__all__ = ["git_response"]

log = logging.getLogger(__name__)

CHUNK: Final = 64 * 1024
PUSH: Final = "receive-pack"


async def git_response(
    root: Path, method: str, rest: str, query: str, headers: Mapping[str, str], body: bytes
) -> Response:
    """`git http-backend`'s answer to one request for `<root>/landed.git/<rest>`."""
    if PUSH in rest or PUSH in query:
        return _refusal(403, "forbidden", "the landed line is read-only: it moves as tasks land")
    if ".." in rest.split("/"):
        return _refusal(404, "not_found", "no such path in the landed line")
    proc = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_cgi_env(root, method, rest, query, headers, len(body)),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    errors = asyncio.create_task(proc.stderr.read())
    try:
        await _send(proc.stdin, body)
        status, answer_headers = await _head(proc.stdout)
    except BaseException:
        with suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    return StreamingResponse(
        _rest(proc, errors), status_code=status, headers=answer_headers, media_type=None
    )


async def _send(stdin: asyncio.StreamWriter, body: bytes) -> None:
    """The request's body to git, which may have answered (and exited) without reading it:
    a closed pipe is `BrokenPipeError` on asyncio's loop and a closed transport's
    `RuntimeError` on uvloop's, the server's; either way git's answer stands."""
    with suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
        if body:
            stdin.write(body)
            await stdin.drain()
        stdin.close()


def _cgi_env(
    root: Path, method: str, rest: str, query: str, headers: Mapping[str, str], length: int
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_PROJECT_ROOT=str(root),
        GIT_HTTP_EXPORT_ALL="1",
        REQUEST_METHOD=method,
        PATH_INFO=f"/{LINE_DIR}/{rest}",
        QUERY_STRING=query,
        CONTENT_TYPE=headers.get("content-type", ""),
        CONTENT_LENGTH=str(length),
        REMOTE_ADDR="127.0.0.1",
        LC_ALL="C",
    )
    if "content-encoding" in headers:
        env["HTTP_CONTENT_ENCODING"] = headers["content-encoding"]
    if "git-protocol" in headers:
        env["GIT_PROTOCOL"] = headers["git-protocol"]
    return env


async def _head(out: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The CGI answer's status and headers (up to the blank line)."""
    status, headers = 200, {}
    while line := (await out.readline()).decode("latin-1").rstrip("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        else:
            headers[name.strip()] = value.strip()
    return status, headers


async def _rest(
    proc: asyncio.subprocess.Process, errors: asyncio.Task[bytes]
) -> AsyncIterator[bytes]:
    assert proc.stdout is not None
    finished = False
    try:
        while chunk := await proc.stdout.read(CHUNK):
            yield chunk
        finished = True
    finally:
        if not finished and proc.returncode is None:  # the client went away mid-answer
            with suppress(ProcessLookupError):
                proc.kill()
        code = await proc.wait()
        said = (await errors).decode(errors="replace").strip()
        if finished and (code != 0 or said):
            log.warning("git http-backend exited %s: %s", code, said[-500:])


def _refusal(status: int, code: str, message: str) -> Response:
    return Response(envelope(code, message), status_code=status, media_type="application/json")
