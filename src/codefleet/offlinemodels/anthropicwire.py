"""The Anthropic Messages wire format, as far as the fake model needs it.

Reading: which script and turn a request belongs to, and which tool_result blocks it
carries. Writing: the streaming SSE body of a reply and the JSON body of an API error.
Everything here is pure (no I/O, no clock); ids are random but never asserted on.

Event order of a reply (measured against Claude Code 2.1.332): `message_start` with full
usage, `ping`, then per block `content_block_start` / `content_block_delta`* /
`content_block_stop` (`text_delta` or `input_json_delta` fragments), `message_delta`
with `stop_reason` and output usage, `message_stop`.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codefleet.offlinemodels.modelscripts import ApiError, ContentItem, Text, Turn, Usage

__all__ = [
    "RecordedRequest",
    "ToolResult",
    "count_turn",
    "error_headers",
    "find_script_id",
    "render_error",
    "render_stream",
]

MARKER_RE = re.compile(r"\[\[fakemodel:([^\]\s]+)\]\]")
TEXT_FRAGMENT_CHARS = 40
JSON_FRAGMENT_CHARS = 24

Message = Mapping[str, Any]
Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool_result block the CLI sent back, its content flattened to text."""

    script_id: str | None
    turn: int
    tool_use_id: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One `POST /v1/messages` as received; `index` is its arrival order."""

    index: int
    script_id: str | None
    turn: int
    body: Mapping[str, Any]

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """The tool_result blocks new in this request (after the last assistant entry)."""
        return tuple(
            ToolResult(
                script_id=self.script_id,
                turn=self.turn,
                tool_use_id=str(block.get("tool_use_id", "")),
                content=_text_of(block.get("content")),
                is_error=bool(block.get("is_error", False)),
            )
            for block in _new_tool_result_blocks(self.body.get("messages", []))
        )


# --- reading a request ---------------------------------------------------------------------


def find_script_id(messages: Sequence[Message]) -> str | None:
    """The script id from the first user text carrying a marker, if any."""
    for message in messages:
        if message.get("role") != "user":
            continue
        for text in _user_texts(message):
            if match := MARKER_RE.search(text):
                return match.group(1)
    return None


def count_turn(messages: Sequence[Message]) -> int:
    """The turn index: how many assistant entries the conversation already holds."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def _user_texts(message: Message) -> Iterator[str]:
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        yield from (b["text"] for b in content if b.get("type") == "text" and "text" in b)


def _text_of(content: Any) -> str:
    """Flatten tool_result content (a string or a list of blocks) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b.get("text")) for b in content if isinstance(b, dict))
    return ""


def _new_tool_result_blocks(messages: Sequence[Message]) -> list[dict[str, Any]]:
    roles = [m.get("role") for m in messages]
    start = len(roles) - roles[::-1].index("assistant") if "assistant" in roles else 0
    blocks: list[dict[str, Any]] = []
    for message in messages[start:]:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            blocks.extend(b for b in content if b.get("type") == "tool_result")
    return blocks


# --- writing a reply -----------------------------------------------------------------------


def render_stream(turn: Turn, model: str) -> bytes:
    """The whole SSE body of a scripted reply."""
    usage = turn.usage or Usage()
    events: list[Event] = [_message_start(model, usage), ("ping", {"type": "ping"})]
    for index, item in enumerate(turn.content):
        events += _block_events(index, item)
    events.append(_message_delta(turn.stop_reason, usage))
    events.append(("message_stop", {"type": "message_stop"}))
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def error_headers(error: ApiError, now: float) -> dict[str, str]:
    """The headers of an error answer at Unix time `now`: when the limit lifts, if scripted.

    `retry-after` in whole seconds, rounded up; `anthropic-ratelimit-unified-status:
    rejected` with `-reset` (Unix seconds) as a subscription login's usage limit answers.
    Measured (CLI 2.1.332): an API-key login keeps both to itself; a subscription login
    reports the reset in a `rate_limit_event` (docs/decisions/0055-what-a-session-knows-about-a-usage-limit.md).
    """
    if error.retry_after_s is None:
        return {}
    wait = max(0, math.ceil(error.retry_after_s))
    return {
        "retry-after": str(wait),
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(math.ceil(now + error.retry_after_s)),
    }


def render_error(error: ApiError) -> bytes:
    """The JSON body of an Anthropic API error."""
    body = {"type": "error", "error": {"type": error.type, "message": error.message}}
    return json.dumps(body).encode()


def _message_start(model: str, usage: Usage) -> Event:
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
        },
    }
    return "message_start", {"type": "message_start", "message": message}


def _message_delta(stop_reason: str, usage: Usage) -> Event:
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    usage_out = {"output_tokens": usage.output_tokens}
    return "message_delta", {"type": "message_delta", "delta": delta, "usage": usage_out}


def _block_events(index: int, item: ContentItem) -> list[Event]:
    """content_block_start, its deltas, content_block_stop, for one block."""
    if isinstance(item, Text):
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [
            {"type": "text_delta", "text": c} for c in _chunks(item.text, TEXT_FRAGMENT_CHARS)
        ]
    else:
        tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
        start = {"type": "tool_use", "id": tool_id, "name": item.name, "input": {}}
        fragments = _chunks(json.dumps(dict(item.input)), JSON_FRAGMENT_CHARS)
        deltas = [{"type": "input_json_delta", "partial_json": c} for c in fragments]
    head = {"type": "content_block_start", "index": index, "content_block": start}
    body = [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    tail = {"type": "content_block_stop", "index": index}
    middle = [("content_block_delta", b) for b in body]
    return [("content_block_start", head), *middle, ("content_block_stop", tail)]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
