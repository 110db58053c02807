"""The OpenAI Responses wire format, as far as the fake Codex model needs it.

The same scripts as the fake Anthropic model (`fakescript`) rendered for the API the
Codex CLI speaks (`POST /v1/responses`, `stream: true`). Pure: no I/O, no clock.

Reading a request: the script id comes from the first user `input_text` carrying
`marker(id)`; the turn index is encoded in the call and message ids this module hands
out (`call_<turn>_<n>`, `msg_<turn>_<n>`; Codex sends both back), so a request carrying
our items of turn t is turn t+1 — chosen from the request alone, whatever else
(developer messages, reasoning, context, a second user message on the same thread)
Codex puts in `input`. Tool results are the `function_call_output` /
`custom_tool_call_output` / `tool_search_output` items after the last call.

Writing a reply (measured against Codex CLI 0.163.0): `response.created`, per item
`response.output_item.added` / `response.output_item.done`, then `response.completed`
with the whole response and its usage. A `ToolUse` becomes a `custom_tool_call` (its
`input["input"]` is the raw text, e.g. an `apply_patch` patch) when the request declares
that tool as `custom`, else a `function_call` with the JSON input as `arguments`.
Codex defers MCP tools behind its `tool_search` (CLI 0.163.0): `ToolUse("tool_search",
{"query": ...})` becomes a client-executed `tool_search_call`, and a tool named
`mcp__<server>__<tool>` a `function_call` of `<tool>` in the namespace `mcp__<server>`,
as Codex exposes a found MCP tool.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from codefleet.offlinemodels.anthropicwire import MARKER_RE, RecordedRequest, ToolResult
from codefleet.offlinemodels.modelscripts import ApiError, ContentItem, Text, ToolUse, Turn, Usage

__all__ = [
    "ResponsesRequest",
    "count_turn",
    "error_headers",
    "find_script_id",
    "render_error",
    "render_stream",
]

ITEM_ID_RE: Final = re.compile(r"^(?:call|msg)_(\d+)_\d+$")
SEARCH_TOOL: Final = "tool_search"
MCP_PREFIX: Final = "mcp__"
CALL_TYPES: Final = frozenset({"function_call", "custom_tool_call", "tool_search_call"})
OUTPUT_TYPES: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "tool_search_output"}
)
CUSTOM_TOOL_TEXT_KEY: Final = "input"

Item = Mapping[str, Any]
Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResponsesRequest(RecordedRequest):
    """One `POST /v1/responses` as received; `body["input"]` is the conversation."""

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """The tool outputs new in this request (after the last call it carries)."""
        items = _items(self.body)
        last_call = max(
            (i for i, it in enumerate(items) if it.get("type") in CALL_TYPES), default=-1
        )
        return tuple(
            ToolResult(
                script_id=self.script_id,
                turn=self.turn,
                tool_use_id=str(item.get("call_id", "")),
                content=_output_text(item.get("output")),
                is_error=False,
            )
            for item in items[last_call + 1 :]
            if item.get("type") in OUTPUT_TYPES
        )


def find_script_id(body: Mapping[str, Any]) -> str | None:
    """The script id from the first user text carrying a marker, if any."""
    for item in _items(body):
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        for text in _texts(item.get("content")):
            if match := MARKER_RE.search(text):
                return match.group(1)
    return None


def count_turn(body: Mapping[str, Any]) -> int:
    """The turn index: one past the highest turn encoded in the call and message ids the
    input carries."""
    turns = [
        int(match.group(1)) for item in _items(body) if (match := ITEM_ID_RE.match(_item_id(item)))
    ]
    return max(turns) + 1 if turns else 0


def render_stream(turn: Turn, index: int, body: Mapping[str, Any]) -> bytes:
    """The whole SSE body of scripted turn number `index`, answering request `body`."""
    model = str(body.get("model", ""))
    custom = _custom_tools(body)
    items = [_item(index, n, item, custom) for n, item in enumerate(turn.content)]
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    events: list[Event] = [
        {"type": "response.created", "response": _response(response_id, model, "in_progress")}
    ]
    for n, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": n, "item": item})
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    done = _response(response_id, model, "completed", items, turn.usage or Usage())
    events.append({"type": "response.completed", "response": done})
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def error_headers(error: ApiError, now: float) -> dict[str, str]:
    """`retry-after` (whole seconds, rounded up) when the scripted limit lifts; `now` unused
    but kept so both wires share one signature."""
    del now
    if error.retry_after_s is None:
        return {}
    return {"retry-after": str(max(0, math.ceil(error.retry_after_s)))}


def render_error(error: ApiError) -> bytes:
    """The JSON body of an OpenAI API error (`code` carries the type, e.g. rate_limit_exceeded)."""
    body = {"error": {"type": error.type, "code": error.type, "message": error.message}}
    return json.dumps(body).encode()


def _items(body: Mapping[str, Any]) -> list[Item]:
    raw = body.get("input")
    return [i for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else []


def _item_id(item: Item) -> str:
    if item.get("type") in CALL_TYPES:
        return str(item.get("call_id", ""))
    return str(item.get("id", "")) if item.get("role") == "assistant" else ""


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b["text"]) for b in content if isinstance(b, Mapping) and "text" in b]
    return []


def _output_text(output: Any) -> str:
    if isinstance(output, Mapping):
        return str(output.get("content", ""))
    return "\n".join(_texts(output)) if isinstance(output, list) else str(output or "")


def _custom_tools(body: Mapping[str, Any]) -> frozenset[str]:
    tools = body.get("tools")
    if not isinstance(tools, Sequence):
        return frozenset()
    return frozenset(
        str(t.get("name")) for t in tools if isinstance(t, Mapping) and t.get("type") == "custom"
    )


def _item(turn: int, n: int, item: ContentItem, custom: frozenset[str]) -> dict[str, Any]:
    if isinstance(item, Text):
        text = {"type": "output_text", "text": item.text, "annotations": []}
        return {
            "type": "message",
            "id": f"msg_{turn}_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
    return _call(f"call_{turn}_{n}", item, custom)


def _call(call_id: str, tool: ToolUse, custom: frozenset[str]) -> dict[str, Any]:
    base = {"id": f"fc_{uuid.uuid4().hex[:24]}", "status": "completed", "call_id": call_id}
    if tool.name == SEARCH_TOOL:
        search = {"type": "tool_search_call", "execution": "client", "arguments": dict(tool.input)}
        return {**base, **search}
    if tool.name in custom:
        text = str(tool.input.get(CUSTOM_TOOL_TEXT_KEY, ""))
        return {**base, "type": "custom_tool_call", "name": tool.name, "input": text}
    arguments = json.dumps(dict(tool.input))
    if tool.name.startswith(MCP_PREFIX) and "__" in tool.name[len(MCP_PREFIX) :]:
        namespace, _, name = tool.name.rpartition("__")
        call = {"type": "function_call", "namespace": namespace, "name": name}
        return {**base, **call, "arguments": arguments}
    return {**base, "type": "function_call", "name": tool.name, "arguments": arguments}


def _response(
    response_id: str,
    model: str,
    status: str,
    output: Sequence[Mapping[str, Any]] = (),
    usage: Usage | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "model": model,
        "status": status,
        "output": list(output),
    }
    if usage is not None:
        response["usage"] = {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }
    return response
