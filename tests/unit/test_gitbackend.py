"""`git http-backend` behind the server: an answer that comes before the request was read.

The server runs on uvloop (`codefleet serve`), where writing to a pipe whose
reader has gone raises `RuntimeError` (the transport is closed), not
`BrokenPipeError`. git's CGI program answers some requests without reading
their body, and on a busy server it may have exited before its body is written;
the answer must still reach the client, on either loop. A stand-in `git` on PATH
answers at once and exits without reading, and is waited for before the body is
written (as a busy loop may), so the write meets the closed pipe every time.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from codefleet.server.gitbackend import git_response

QUICK_GIT = """#!/bin/sh
printf 'Status: 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\nanswered\\n'
exit 0
"""


@pytest.fixture
def quick_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = bin_dir / "git"
    git.write_text(QUICK_GIT)
    git.chmod(git.stat().st_mode | stat.S_IXUSR)
    started = asyncio.create_subprocess_exec

    async def exited_first(*argv: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        """The process, once it has exited: what a busy server's loop sees next."""
        proc = await started(*argv, **kwargs)
        await proc.wait()
        await asyncio.sleep(0.01)
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", exited_first)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old}"
    try:
        yield
    finally:
        os.environ["PATH"] = old


async def _ask(root: Path, body: bytes) -> tuple[int, bytes]:
    method = "POST" if body else "GET"
    answer = await git_response(root, method, "git-upload-pack", "", {}, body)
    chunks = [chunk async for chunk in answer.body_iterator]  # type: ignore[attr-defined]
    return answer.status_code, b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)


async def _many(root: Path, body: bytes, times: int) -> list[tuple[int, bytes]]:
    """`times` requests one after another."""
    return [await _ask(root, body) for _ in range(times)]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("size", [0, 4 * 1024 * 1024], ids=["no body", "a body past a pipe"])
def test_an_answer_git_gives_before_reading_the_body_still_reaches_the_client(
    quick_git: None, tmp_path: Path, loop: str, size: int
) -> None:
    body = b"0" * size
    run = uvloop.run if loop == "uvloop" else asyncio.run
    answers = run(_many(tmp_path, body, 3))
    assert answers == [(200, b"answered\n")] * 3
