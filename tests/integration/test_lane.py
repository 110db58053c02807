"""The keep-alive lane (`api.lane`): every JSON call, as httpx, fails closed, writes sent once.

Against the real server: an acquire over the lane is the answer httpx gets, a
stale epoch is `StaleEpoch`, and the runner's write gate allows and denies as
before; every call rides it, a GET with its query encoded as httpx does, a
write with the body httpx sends. Against a scripted loopback server: one connection serves call after
call; a connection the server closed while idle is replaced without the caller
seeing it; a write on a connection that closes under it is not sent again; no
server, no answer in time, a cut answer or a chunked one are
`ServerUnavailable`, which the write gate turns into a denial.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from fleet_support import server_settings

from codefleet.api.client import FleetClient, ServerUnavailable, query_string
from codefleet.errors import StaleEpoch, Unauthorized
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread, free_port

TOKEN = "lane-token"
ALLOW = json.dumps({"decision": "allow", "granted": ["a.py"], "denied": []}).encode()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    tree = tmp_path / "tree"
    tree.mkdir()
    settings = server_settings(tmp_path, tree, token=TOKEN)
    with ServerThread(settings) as running:
        yield running


async def started_task(client: FleetClient, tree: Path) -> tuple[str, int, str]:
    await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
    agent = await client.register("runner-1", str(tree), None)
    agent_id, epoch = agent["agent_id"], agent["epoch"]
    task = await client.assignment(agent_id, epoch, wait=5)
    assert task is not None
    await client.start(task.id, agent_id, epoch)
    return agent_id, epoch, task.id


async def test_the_lane_gets_the_servers_answers_and_errors(server: ServerThread) -> None:
    tree = server.settings.workdir
    async with FleetClient(server.url, token=TOKEN) as client:
        assert client._lane is not None, "guard: an http server is reached over the lane"
        agent_id, epoch, task_id = await started_task(client, tree)
        answer = await client.acquire(agent_id, epoch, task_id, ["a.py"], "Write")
        assert answer["decision"] == "allow"
        with pytest.raises(StaleEpoch):
            await client.acquire(agent_id, epoch + 1, task_id, ["a.py"], "Write")
        gate = WriteGate(client, TreeRoot(tree), agent_id, epoch, task_id)
        assert (await gate.check("Write", {"file_path": str(tree / "b.py")})).allowed
        outside = await gate.check("Write", {"file_path": "/etc/passwd"})
        assert not outside.allowed and "outside the shared working tree" in outside.reason
        assert client._httpx is None, "no httpx client is made for a plain http server"


async def test_every_call_rides_the_lane_with_its_query_and_body(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = server.settings.workdir
    async with FleetClient(server.url, token=TOKEN) as client:
        agent_id, epoch, task_id = await started_task(client, tree)

        async def through_httpx(method: str, path: str, **_: object) -> None:
            raise AssertionError(f"{method} {path} went through httpx")

        monkeypatch.setattr(client._http, "request", through_httpx)
        assert (await client.task(task_id))["status"] == "running"
        assert [t["id"] for t in await client.tasks(status="running")] == [task_id]
        assert await client.tasks(status="pending") == []  # the query reached the server
        assert await client.assignment(agent_id, epoch, wait=0) is None  # started: a 204
        assert (await client.health())["status"] == "ok"
        await client.record_change(agent_id, epoch, task_id, "a.py", "Write")  # a body, answered
        assert (await client.say(task_id, "naïve ☃"))["text"] == "naïve ☃"  # as httpx: UTF-8
        with pytest.raises(StaleEpoch):  # the epoch header, and the error envelope decoded
            await client.record_change(agent_id, epoch + 1, task_id, "b.py", "Write")
        await client.leave(agent_id, epoch, interrupted=True)  # a DELETE with its query
        assert (await client.task(task_id))["status"] == "pending"  # interrupted: not charged
        assert (await client.cancel(task_id))["status"] == "cancelled"  # a body-less POST


@pytest.mark.parametrize(
    "params",
    [
        {"since": 0},
        {"status": "running", "limit": 50},
        {"type": ["task_succeeded", "landed"], "wait": 0.1},
        {"interrupted": True, "replace": False, "note": None},
        {"path": "src/a b/ü&=?.py", "task_id": "T1#2"},
        {"ids": ("T1", "T2"), "empty": [], "n": -3},
    ],
)
def test_a_query_is_encoded_as_httpx_encodes_it(params: dict[str, object]) -> None:
    """The lane's query (`query_string`) is byte for byte httpx's, without importing it."""
    import httpx

    assert query_string(params) == str(httpx.QueryParams(params))  # type: ignore[arg-type]


def test_a_plain_http_client_never_imports_httpx() -> None:
    """Every call to an http server rides the lane: httpx loads only for https or a transport."""
    code = (
        "import asyncio, sys\n"
        "from codefleet.api.client import FleetClient, query_string\n"
        "client = FleetClient('http://127.0.0.1:9')\n"
        "query_string({'a': 1})\n"
        "asyncio.run(client.aclose())\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'h11') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- a scripted server ------------------------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Start = Callable[[Handler], Awaitable[str]]


@pytest.fixture
async def scripted() -> AsyncIterator[Start]:
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        servers.append(await asyncio.start_server(handler, "127.0.0.1", 0))
        return f"http://127.0.0.1:{servers[-1].sockets[0].getsockname()[1]}"

    yield start
    for running in servers:
        running.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


def answer(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def acquire(client: FleetClient) -> dict[str, object]:
    return await client.acquire("a_1", 1, "T1", ["a.py"], "Write")


async def test_one_connection_serves_call_after_call(scripted: Start) -> None:
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            try:
                request = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            assert b"X-Agent-Epoch: 1\r\n" in request and b"Authorization: Bearer t\r\n" in request
            writer.write(answer(ALLOW))

    async with FleetClient(await scripted(handler), token="t") as client:
        for _ in range(5):
            assert (await acquire(client))["decision"] == "allow"
    assert len(connections) == 1


async def test_a_connection_closed_while_idle_is_replaced_unseen(scripted: Start) -> None:
    served: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        served.append(1)
        writer.write(answer(ALLOW))  # then close: the keep-alive timeout of a real server
        await writer.drain()
        writer.close()

    async with FleetClient(await scripted(handler), token="t") as client:
        assert (await acquire(client))["decision"] == "allow"
        await asyncio.sleep(0.05)  # let the close arrive (a real idle connection's fate)
        assert (await acquire(client))["decision"] == "allow"
    assert len(served) == 2


async def test_a_write_skips_a_connection_the_server_closed_while_idle(scripted: Start) -> None:
    served: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(await read_request(reader))
        writer.write(answer(b"{}"))  # then close: the keep-alive timeout of a real server
        await writer.drain()
        writer.close()

    async with FleetClient(await scripted(handler), token="t") as client:
        for _ in range(2):
            await client.record_change("a_1", 1, "T1", "a.py", "Write")
            await asyncio.sleep(0.05)  # let the close arrive (a real idle connection's fate)
    assert len(served) == 2 and all(r.startswith(b"POST /changes ") for r in served)


async def test_a_write_the_connection_closes_under_is_not_sent_again(scripted: Start) -> None:
    served: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(await read_request(reader))
        writer.write(answer(b"{}"))
        served.append(await read_request(reader))  # read the next one, then close unanswered
        writer.close()

    async with FleetClient(await scripted(handler), token="t") as client:
        await client.task("T1")
        assert await client.task("T1") == {}  # a read the server may have read goes again
        assert len(served) == 3  # the second connection answered it; it closes on the next
        with pytest.raises(ServerUnavailable):
            await client.record_change("a_1", 1, "T1", "b.py", "Write")
    assert len(served) == 4, "the write the server may have read was not sent again"
    assert served[-1].startswith(b"POST /changes ") and b'"path":"b.py"' in served[-1]


@pytest.mark.parametrize(
    "reply",
    [
        b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"decision"',  # cut short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"",  # closed on a fresh connection without an answer
        None,  # never answers
    ],
    ids=["cut-short", "chunked", "closed", "silent"],
)
async def test_an_unusable_answer_is_server_unavailable_and_the_gate_denies(
    scripted: Start, reply: bytes | None, tmp_path: Path
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if reply is None:
            await reader.read()  # until the client gives up and hangs up
            return
        writer.write(reply)
        await writer.drain()
        writer.close()

    url = await scripted(handler)
    async with FleetClient(url, token="t", timeout=0.5) as client:
        with pytest.raises(ServerUnavailable):
            await acquire(client)
        gate = WriteGate(client, TreeRoot(tmp_path), "a_1", 1, "T1")
        verdict = await gate.check("Write", {"file_path": str(tmp_path / "a.py")})
    assert not verdict.allowed and "could not grant the lease" in verdict.reason


async def test_no_server_is_server_unavailable() -> None:
    async with FleetClient(f"http://127.0.0.1:{free_port()}", token="t") as client:
        with pytest.raises(ServerUnavailable):
            await acquire(client)


# -- the event stream over the lane ------------------------------------------------------

STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_stream_frames_split_across_chunks_are_read_whole_and_comments_skipped(
    scripted: Start,
) -> None:
    frames = b': connected\n\nid: 1\nevent: a\ndata: {"id":1,"type":"a"}\n\n: ping\n\n'
    frames += b'id: 2\nevent: b\ndata: {"id":2,"type":"b"}\n\nid: 3\nevent: a\ndata: {"id":3,"type":"a"}\n\n'

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        assert request.startswith(b"GET /events/stream?since=0 HTTP/1.1\r\n")
        writer.write(STREAM_HEAD)
        for at in range(0, len(frames), 7):  # frames cut anywhere, a chunk at a time
            writer.write(chunk(frames[at : at + 7]))
            await writer.drain()
        writer.write(b"0\r\n\r\n")  # the answer ends: so does the stream
        await writer.drain()

    url = await scripted(handler)
    async with FleetClient(url, token="t") as client:
        assert [e["id"] async for e in client.stream(0)] == [1, 2, 3]
        assert [e["id"] async for e in client.stream(0, {"a"})] == [1, 3]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (answer(b'{"error":{"code":"unauthorized","message":"no"}}', b""), Unauthorized),
        (STREAM_HEAD + chunk(b": connected\n\n"), ServerUnavailable),  # then silent
        (answer(b"{}"), ServerUnavailable),  # a sized answer is no stream
    ],
    ids=["refused", "silent", "sized"],
)
async def test_a_stream_refused_or_silent_raises_as_the_client_says(
    scripted: Start, reply: bytes, error: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("codefleet.api.client.STREAM_READ_TIMEOUT_S", 0.3)
    if error is Unauthorized:
        reply = reply.replace(b"200 OK", b"401 Unauthorized")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()
        await reader.read()  # until the client hangs up

    async with FleetClient(await scripted(handler), token="t") as client:
        with pytest.raises(error):
            await anext(client.stream(0))
