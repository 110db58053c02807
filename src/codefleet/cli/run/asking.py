"""`codefleet run` answers the agents' questions from the terminal it runs in.

When standard input is a terminal, each line the operator types while the run
goes on answers the oldest open question (`ask_operator`); the live log keeps
printing meanwhile (the question itself shows there, with `codefleet answer`'s
command, the moment it is asked). Standard input is read with the event loop's
reader (no thread left blocked on it when the run ends); an empty line is
ignored, and end of input stops listening.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from codefleet.api.client import FleetClient

__all__ = ["HINT", "answer_from_terminal", "answer_oldest"]

HINT: Final = "An agent's question shows below; type the answer and press Enter to answer it."


async def answer_oldest(client: FleetClient, text: str) -> str:
    """Answer the oldest open question with `text`; what to tell the operator."""
    found = await client.questions()
    if not found:
        return "no open question to answer"
    q = found[0]
    await client.answer(str(q["task_id"]), text, str(q["question_id"]))
    return f"{q['task_id']}: answered {q['question_id']} ({q['text']})"


async def answer_from_terminal(
    client: FleetClient, stop: asyncio.Event, say: Callable[[str], None]
) -> None:
    """Until `stop`: each line typed on standard input answers the oldest open question."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()
    fd = sys.stdin.fileno()

    def readable() -> None:
        line = sys.stdin.readline()
        if not line:  # end of input: stop listening
            loop.remove_reader(fd)
        lines.put_nowait(line)

    loop.add_reader(fd, readable)
    try:
        while not stop.is_set():
            line = await _next_line(lines, stop)
            if line is None:
                return
            if line.strip():
                say(await _answered(client, line.strip()))
    finally:
        loop.remove_reader(fd)


async def _answered(client: FleetClient, text: str) -> str:
    try:
        return await answer_oldest(client, text)
    except Exception as err:  # a loop boundary: a refused answer must not end the run
        return f"not answered: {err}"


async def _next_line(lines: asyncio.Queue[str], stop: asyncio.Event) -> str | None:
    """The next line typed, or None when the run stopped or the input ended."""
    get = asyncio.ensure_future(lines.get())
    halt = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({get, halt}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        get.cancel()
        halt.cancel()
    if get not in done:
        return None
    line = get.result()
    return line if line else None
