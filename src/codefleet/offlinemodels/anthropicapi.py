"""A scripted fake of the Anthropic Messages API for driving the real Claude Code CLI offline.

One loopback server answers many parallel CLI sessions. The reply is chosen from the request
alone: the first user text carrying `[[fakemodel:SCRIPT_ID]]` names the script (see
`fakescript`), and the turn index is the number of `assistant` entries already in `messages`
(a `system` entry may appear; alternation is not assumed). Past the last scripted turn the
model ends with a short text; an unknown script gets a text saying so.

Invariants:
- every `POST /v1/messages` is logged before its `wait_for` is evaluated, so a held reply
  sees every request that arrived before it, and log order is arrival order;
- every other method or path (`HEAD /api/hello` included) gets `200 {}`; query strings are
  ignored;
- replies are whole bodies sent with a Content-Length (keep-alive safe), always in the SSE
  format of `fakewire` (the CLI always asks for `stream: true`);
- held and delayed replies are released at once when the server closes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from codefleet.offlinemodels.anthropicwire import (
    RecordedRequest,
    ToolResult,
    count_turn,
    error_headers,
    find_script_id,
    render_error,
    render_stream,
)
from codefleet.offlinemodels.modelscripts import (
    ApiError,
    ScriptError,
    Text,
    ToolUse,
    Turn,
    Usage,
    WaitFor,
    marker,
    scripts_from_dict,
    turn_from_dict,
)

__all__ = [
    "ApiError",
    "FakeModel",
    "RecordedRequest",
    "ScriptError",
    "Text",
    "ToolResult",
    "ToolUse",
    "Turn",
    "Usage",
    "WaitFor",
    "marker",
    "scripts_from_dict",
    "session_env",
    "turn_from_dict",
]

log = logging.getLogger(__name__)

Login = Literal["api_key", "subscription"]

LOOPBACK = "127.0.0.1"
FAKE_API_KEY = "sk-fake"
FAKE_OAUTH_TOKEN = "fake-subscription-token"
DEFAULT_MODEL = "claude-opus-5-5"
END_TEXT = "Done."
MESSAGES_PATH = "/v1/messages"
SSE_CONTENT_TYPE = "text/event-stream"
JSON_CONTENT_TYPE = "application/json"
HANDLER_IDLE_TIMEOUT_S = 120
LISTEN_BACKLOG = 128
SHUTDOWN_POLL_S = 0.02  # how fast close() returns; the stdlib default 0.5 s is per test


class FakeModel:
    """The fake Messages API: `with FakeModel() as fm:` serves on 127.0.0.1, a free port."""

    api_path: ClassVar[str] = MESSAGES_PATH  # the one POST path answered by `answer`

    def __init__(self, host: str = LOOPBACK, port: int = 0) -> None:
        self._address = (host, port)
        self._scripts: dict[str, tuple[Turn, ...]] = {}
        self._log: list[RecordedRequest] = []
        self._other: list[str] = []
        self._timeouts: list[tuple[str | None, int]] = []
        self._signals: list[str] = []
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> Self:
        """Bind and serve in a daemon thread."""
        self._server = _Server(self._address, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="fakemodel",
            daemon=True,
        )
        self._thread.start()
        log.debug("fakemodel serving on %s", self.base_url)
        return self

    def close(self) -> None:
        """Release held replies, stop serving and close the socket."""
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`; only valid once started."""
        if self._server is None:
            raise RuntimeError("FakeModel is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self, login: Login = "api_key") -> dict[str, str]:
        """The env vars a CLI session needs to talk only to this server (HOME/TMPDIR excluded).

        `login="subscription"` logs the CLI in with a fake subscription token instead of a
        fake API key: the CLI then reports a usage limit's reset time (`rate_limit_event`),
        which it keeps to itself under an API key. Either way it talks only to this server.
        """
        credentials = (
            {"ANTHROPIC_API_KEY": FAKE_API_KEY}
            if login == "api_key"
            else {"ANTHROPIC_API_KEY": "", "CLAUDE_CODE_OAUTH_TOKEN": FAKE_OAUTH_TOKEN}
        )
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            **credentials,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }

    def add_script(self, script_id: str, turns: Iterable[Turn | Mapping[str, Any]]) -> None:
        """Register (or replace) the turns served to prompts carrying `marker(script_id)`."""
        built = tuple(t if isinstance(t, Turn) else turn_from_dict(t) for t in turns)
        with self._cond:
            self._scripts[script_id] = built

    def requests(self, script_id: str | None = None) -> list[RecordedRequest]:
        """Logged `/v1/messages` requests in arrival order, optionally for one script."""
        with self._cond:
            return [r for r in self._log if script_id is None or r.script_id == script_id]

    def tool_results(self, script_id: str | None = None) -> list[ToolResult]:
        """Every tool_result the CLI sent back, each once, in arrival order."""
        return [result for r in self.requests(script_id) for result in r.tool_results]

    def unexpected_requests(self) -> list[str]:
        """`METHOD /path` of every request that was not `POST /v1/messages`."""
        with self._cond:
            return list(self._other)

    def wait_timeouts(self) -> list[tuple[str | None, int]]:
        """`(script_id, turn)` of every reply whose `wait_for` gave up."""
        with self._cond:
            return list(self._timeouts)

    def signal(self, text: str) -> None:
        """Release held replies whose `wait_for.substring` is in `text`: the test says "go".

        For a test that must look at the world while a session is paused between two
        turns (e.g. a lease it holds), without sleeping.
        """
        with self._cond:
            self._signals.append(text)
            self._cond.notify_all()

    def answer(self, body: Mapping[str, Any]) -> tuple[int, str, bytes, dict[str, str]]:
        """Log one Messages request and build its reply: `(status, content type, body, headers)`."""
        messages = body.get("messages", [])
        record = self._record(find_script_id(messages), count_turn(messages), body)
        turn = self._turn_for(record.script_id, record.turn)
        refused = self._staged(record, turn)
        if refused is not None:
            return refused
        model = str(body.get("model", DEFAULT_MODEL))
        return 200, SSE_CONTENT_TYPE, render_stream(turn, model), {}

    def _staged(
        self,
        record: RecordedRequest,
        turn: Turn,
        error_body: Callable[[ApiError], bytes] = render_error,
    ) -> tuple[int, str, bytes, dict[str, str]] | None:
        """What every wire does before its reply: hold, delay, or answer the turn's error
        (its body in the wire's own shape, `error_body`)."""
        if turn.wait_for is not None:
            self._hold(record, turn.wait_for)
        if turn.delay_s > 0:
            self._closed.wait(turn.delay_s)
        if turn.error is not None:
            headers = error_headers(turn.error, time.time())
            return turn.error.status, JSON_CONTENT_TYPE, error_body(turn.error), headers
        return None

    def serves(self, path: str) -> bool:
        """Is `path` (query string and trailing slash removed) a model API this fake answers?"""
        return path == self.api_path

    def answer_at(
        self, path: str, body: Mapping[str, Any]
    ) -> tuple[int, str, bytes, dict[str, str]]:
        """`answer` for a request to `path` (one of `serves`); a subclass may speak more wires."""
        del path
        return self.answer(body)

    def note_other(self, method: str, path: str) -> None:
        """Remember a request the fake answered with `200 {}`."""
        with self._cond:
            self._other.append(f"{method} {path}")

    def _record(self, script_id: str | None, turn: int, body: Mapping[str, Any]) -> RecordedRequest:
        with self._cond:
            record = RecordedRequest(len(self._log), script_id, turn, body)
            self._log.append(record)
            self._cond.notify_all()
        log.debug("fakemodel request #%d script=%s turn=%d", record.index, script_id, turn)
        return record

    def _turn_for(self, script_id: str | None, turn: int) -> Turn:
        with self._cond:
            turns = self._scripts.get(script_id) if script_id is not None else None
        if turns is None:
            return Turn(content=(Text(f"fakemodel: no script registered for {script_id!r}."),))
        return turns[turn] if turn < len(turns) else Turn(content=(Text(END_TEXT),))

    def _hold(self, record: RecordedRequest, wait: WaitFor) -> None:
        """Block this reply until `wait` is met, the server closes, or `wait.timeout_s` passes."""
        with self._cond:
            met = self._cond.wait_for(
                lambda: self._closed.is_set() or self._seen(record, wait), wait.timeout_s
            )
            if not met:
                self._timeouts.append((record.script_id, record.turn))
                log.warning(
                    "fakemodel wait_for %r gave up for %s turn %d",
                    wait.substring,
                    record.script_id,
                    record.turn,
                )

    def _seen(self, waiter: RecordedRequest, wait: WaitFor) -> bool:
        """Has another request carried a matching tool_result, or the test signalled it?

        (The caller holds the lock.)
        """
        if any(wait.substring in text for text in self._signals):
            return True
        return any(
            wait.substring in result.content
            for r in self._log
            if r.index != waiter.index and wait.script_id in (None, r.script_id)
            for result in r.tool_results
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], fake: FakeModel) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A CLI that hangs up mid-reply (e.g. killed at teardown) is not a test failure."""
        log.debug("fakemodel: connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = HANDLER_IDLE_TIMEOUT_S

    def do_POST(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        raw = self._read_body()
        if not self._fake.serves(path):
            self._fake.note_other("POST", path)
            self._send(200, JSON_CONTENT_TYPE, b"{}")
            return
        body = _parse_json_object(raw)
        if body is None:
            bad = ApiError(400, "invalid_request_error", "body is not a JSON object")
            self._send(400, JSON_CONTENT_TYPE, render_error(bad))
            return
        self._send(*self._fake.answer_at(path, body))

    def do_GET(self) -> None:
        self._other(send_body=True)

    def do_HEAD(self) -> None:
        self._other(send_body=False)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line."""

    @property
    def _fake(self) -> FakeModel:
        assert isinstance(self.server, _Server)
        return self.server.fake

    def _other(self, *, send_body: bool) -> None:
        self._read_body()
        self._fake.note_other(self.command, urlsplit(self.path).path)
        self._send(200, JSON_CONTENT_TYPE, b"{}", send_body=send_body)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(
        self,
        status: int,
        content_type: str,
        payload: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        send_body: bool = True,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        if send_body:
            self.wfile.write(payload)


def _parse_json_object(raw: bytes) -> dict[str, Any] | None:
    """The request body as a JSON object, or None if it is not one."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def session_env(fm: FakeModel, home_dir: Path, login: Login = "api_key") -> dict[str, str]:
    """`fm.env(login)` plus a private HOME and temp dirs under `home_dir` (created)."""
    tmp = home_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        **fm.env(login),
        "HOME": str(home_dir),
        "TMPDIR": str(tmp),
        "CLAUDE_CODE_TMPDIR": str(tmp),
        "XDG_RUNTIME_DIR": str(tmp),
    }
