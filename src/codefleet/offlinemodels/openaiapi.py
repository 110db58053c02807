"""A scripted fake of the OpenAI Responses API for driving the real Codex CLI offline.

The fake Anthropic model (`anthropicapi.FakeModel`) with another wire: the same scripts
(`fakescript`: a prompt carries `marker(id)`, a script is a list of `Turn`s), the same
loopback server, request log, `wait_for` holds, signals and errors; only the path
(`POST /v1/responses`) and the rendering (`responseswire`) differ. The reply is chosen
from the request alone, so one server serves many parallel Codex sessions.

A `ToolUse("apply_patch", {"input": PATCH})` is Codex's file edit (a custom tool, its
raw text the patch); any other tool name is a function call with its JSON input.

Point a Codex session at it with a custom model provider whose `base_url` is
`responses_url` and whose key is `FAKE_API_KEY` (see `session.codexagents`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from codefleet.offlinemodels.anthropicapi import (
    LOOPBACK,
    MESSAGES_PATH,
    SSE_CONTENT_TYPE,
    FakeModel,
)
from codefleet.offlinemodels.anthropicwire import RecordedRequest
from codefleet.offlinemodels.modelscripts import (
    ContentItem,
    Text,
    ToolUse,
    Turn,
    WaitFor,
    turn_from_dict,
)
from codefleet.offlinemodels.openaiwire import (
    ResponsesRequest,
    count_turn,
    find_script_id,
    render_stream,
)
from codefleet.offlinemodels.openaiwire import render_error as responses_error

__all__ = ["FAKE_API_KEY", "PATCH_TOOL", "FakeCodexModel", "codex_turns", "patch_call"]

RESPONSES_PATH = "/v1/responses"
FAKE_API_KEY = "sk-fake-codex"
PATCH_TOOL = "apply_patch"
CLAUDE_TOOLS = frozenset(
    {
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "Glob",
        "Grep",
    }
)


def patch_text(*body: str) -> str:
    """A whole `apply_patch` patch around the header and hunk lines `body`."""
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def codex_turns(turns: Sequence[Turn]) -> list[Turn]:
    """A Claude Code script played by Codex: its writes as patches, its other tools dropped.

    `Write` becomes `*** Add File:` (Codex's add replaces an existing file), `Edit` an
    `*** Update File:` hunk of its old and new lines (the old string must be whole lines).
    Claude Code's reads and searches have no Codex counterpart here and are dropped; CodeFleet's
    own tools (`mcp__codefleet__*`) are Codex's too and kept (Codex needs a `tool_search`
    call in an earlier turn to expose them); a turn left with no tool call is dropped too (a Codex turn ends at a text-only reply), its
    `wait_for` moving to the next turn kept. The last turn is kept as it is.
    """
    kept: list[Turn] = []
    waiting: WaitFor | None = None
    for index, turn in enumerate(turns):
        content = tuple(item for item in map(_as_codex, turn.content) if item is not None)
        last = index == len(turns) - 1
        if (
            not last
            and not any(isinstance(i, ToolUse) for i in content)
            and turn.stop_reason == "tool_use"
        ):
            waiting = waiting or turn.wait_for
            continue
        kept.append(replace(turn, content=content, wait_for=turn.wait_for or waiting))
        waiting = None
    return kept


def _as_codex(item: ContentItem) -> ContentItem | None:
    if isinstance(item, Text) or item.name not in CLAUDE_TOOLS:
        return item
    path = str(item.input.get("file_path", ""))
    if item.name == "Write":
        added = [f"+{line}" for line in str(item.input.get("content", "")).splitlines()]
        return ToolUse(PATCH_TOOL, {"input": patch_text(f"*** Add File: {path}", *added)})
    if item.name == "Edit":
        old = [f"-{line}" for line in str(item.input.get("old_string", "")).splitlines()]
        new = [f"+{line}" for line in str(item.input.get("new_string", "")).splitlines()]
        return ToolUse(
            PATCH_TOOL, {"input": patch_text(f"*** Update File: {path}", "@@", *old, *new)}
        )
    return None  # a read or a search: not a Codex tool here


def patch_call(*body: str) -> dict[str, Any]:
    """A plain-data `apply_patch` call whose patch holds the header and hunk lines `body`."""
    return {"tool_use": {"name": PATCH_TOOL, "input": {"input": patch_text(*body)}}}


class FakeCodexModel(FakeModel):
    """The fake Responses API: `with FakeCodexModel() as fm:` serves on 127.0.0.1.

    It also answers the Messages API like `FakeModel`, from the same scripts and log, so
    one server can serve a mixed fleet and a `wait_for` in a Claude session's script can
    wait on a Codex session's tool result, and the other way round.
    """

    api_path: ClassVar[str] = RESPONSES_PATH

    def __init__(self, host: str = LOOPBACK, port: int = 0) -> None:
        super().__init__(host, port)
        self._codex_scripts: dict[str, tuple[Turn, ...]] = {}

    def add_script(self, script_id: str, turns: Iterable[Turn | Mapping[str, Any]]) -> None:
        """Register a script for both wires: as given, and as Codex plays it (`codex_turns`)."""
        built = tuple(t if isinstance(t, Turn) else turn_from_dict(t) for t in turns)
        super().add_script(script_id, built)
        with self._cond:
            self._codex_scripts[script_id] = tuple(codex_turns(built))

    def serves(self, path: str) -> bool:
        return path in (RESPONSES_PATH, MESSAGES_PATH)

    def answer_at(
        self, path: str, body: Mapping[str, Any]
    ) -> tuple[int, str, bytes, dict[str, str]]:
        return self.answer(body) if path == RESPONSES_PATH else super().answer(body)

    @property
    def responses_url(self) -> str:
        """The provider `base_url` Codex appends `/responses` to."""
        return f"{self.base_url}/v1"

    def answer(self, body: Mapping[str, Any]) -> tuple[int, str, bytes, dict[str, str]]:
        """Log one Responses request and build its reply: `(status, content type, body, headers)`."""
        record = self._record(find_script_id(body), count_turn(body), body)
        turn = self._codex_turn_for(record.script_id, record.turn)
        refused = self._staged(record, turn, responses_error)
        if refused is not None:
            return refused
        return 200, SSE_CONTENT_TYPE, render_stream(turn, record.turn, body), {}

    def _codex_turn_for(self, script_id: str | None, turn: int) -> Turn:
        with self._cond:
            turns = self._codex_scripts.get(script_id) if script_id is not None else None
        if turns is None or turn >= len(turns):
            return self._turn_for(script_id, 1 << 30)  # the fake's own ending for either case
        return turns[turn]

    def _record(self, script_id: str | None, turn: int, body: Mapping[str, Any]) -> RecordedRequest:
        kind = ResponsesRequest if "input" in body and "messages" not in body else RecordedRequest
        with self._cond:
            record = kind(len(self._log), script_id, turn, body)
            self._log.append(record)
            self._cond.notify_all()
        return record
