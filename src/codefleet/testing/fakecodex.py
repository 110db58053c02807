"""A scripted fake of the OpenAI Responses API for driving the real Codex CLI offline.

The fake Anthropic model (`fakemodel.FakeModel`) with another wire: the same scripts
(`fakescript`: a prompt carries `marker(id)`, a script is a list of `Turn`s), the same
loopback server, request log, `wait_for` holds, signals and errors; only the path
(`POST /v1/responses`) and the rendering (`responseswire`) differ. The reply is chosen
from the request alone, so one server serves many parallel Codex sessions.

A `ToolUse("apply_patch", {"input": PATCH})` is Codex's file edit (a custom tool, its
raw text the patch); any other tool name is a function call with its JSON input.

Point a Codex session at it with a custom model provider whose `base_url` is
`responses_url` and whose key is `FAKE_API_KEY` (see `session.codexoptions`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

from codefleet.testing.fakemodel import JSON_CONTENT_TYPE, SSE_CONTENT_TYPE, FakeModel
from codefleet.testing.fakewire import RecordedRequest
from codefleet.testing.responseswire import (
    ResponsesRequest,
    count_turn,
    error_headers,
    find_script_id,
    render_error,
    render_stream,
)

__all__ = ["FAKE_API_KEY", "PATCH_TOOL", "FakeCodexModel", "patch_call"]

RESPONSES_PATH = "/v1/responses"
FAKE_API_KEY = "sk-fake-codex"
PATCH_TOOL = "apply_patch"


def patch_call(*body: str) -> dict[str, Any]:
    """A plain-data `apply_patch` call whose patch holds the header and hunk lines `body`."""
    patch = "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"
    return {"tool_use": {"name": PATCH_TOOL, "input": {"input": patch}}}


class FakeCodexModel(FakeModel):
    """The fake Responses API: `with FakeCodexModel() as fm:` serves on 127.0.0.1."""

    api_path: ClassVar[str] = RESPONSES_PATH

    @property
    def responses_url(self) -> str:
        """The provider `base_url` Codex appends `/responses` to."""
        return f"{self.base_url}/v1"

    def answer(self, body: Mapping[str, Any]) -> tuple[int, str, bytes, dict[str, str]]:
        """Log one Responses request and build its reply: `(status, content type, body, headers)`."""
        record = self._record(find_script_id(body), count_turn(body), body)
        turn = self._turn_for(record.script_id, record.turn)
        if turn.wait_for is not None:
            self._hold(record, turn.wait_for)
        if turn.delay_s > 0:
            self._closed.wait(turn.delay_s)
        if turn.error is not None:
            headers = error_headers(turn.error, time.time())
            return turn.error.status, JSON_CONTENT_TYPE, render_error(turn.error), headers
        return 200, SSE_CONTENT_TYPE, render_stream(turn, record.turn, body), {}

    def _record(self, script_id: str | None, turn: int, body: Mapping[str, Any]) -> RecordedRequest:
        with self._cond:
            record = ResponsesRequest(len(self._log), script_id, turn, body)
            self._log.append(record)
            self._cond.notify_all()
        return record
