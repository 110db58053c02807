"""The Gemini API wire format (`streamGenerateContent`), as far as the fake needs it.

The same scripts as the fake Anthropic model (`fakescript`) rendered for the API the
Gemini CLI speaks. Pure: no I/O, no clock.

Reading a request (measured against Gemini CLI 0.61.0): the conversation is `contents`,
a list of `{role: "user"|"model", parts}`; the script id comes from the first user text
part carrying `marker(id)`, the turn index is the number of `model` entries already in
it (the CLI echoes each reply back as one). Tool results are the `functionResponse`
parts after the last `model` entry: `{name, id, response: {output}}`, or `{error}` when
the call failed or a hook blocked it.

Writing a reply: one SSE event (`data: <json>` and a blank line) holding a whole
`GenerateContentResponse`: one candidate whose `content.parts` are `{text}` or
`{functionCall: {name, args}}`, `finishReason: STOP`, and `usageMetadata`. An error is
the Google API error body `{"error": {code, message, status}}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from codefleet.offlinemodels.anthropicwire import MARKER_RE, RecordedRequest, ToolResult
from codefleet.offlinemodels.modelscripts import ApiError, ContentItem, Text, Turn, Usage

__all__ = [
    "GeminiRequest",
    "count_turn",
    "find_script_id",
    "render_error",
    "render_stream",
]

MODEL_ROLE: Final = "model"
STATUS_NAMES: Final = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

Content = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class GeminiRequest(RecordedRequest):
    """One `streamGenerateContent` request as received; `body["contents"]` is the conversation."""

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """The `functionResponse` parts new in this request (after the last model entry)."""
        return tuple(
            ToolResult(
                script_id=self.script_id,
                turn=self.turn,
                tool_use_id=str(answer.get("id", "")),
                content=_response_text(answer.get("response")),
                is_error=_is_error(answer.get("response")),
            )
            for answer in _new_function_responses(_contents(self.body))
        )


def find_script_id(body: Mapping[str, Any]) -> str | None:
    """The script id from the first user text part carrying a marker, if any."""
    for content in _contents(body):
        if content.get("role") == MODEL_ROLE:
            continue
        for part in _parts(content):
            if match := MARKER_RE.search(str(part.get("text", ""))):
                return match.group(1)
    return None


def count_turn(body: Mapping[str, Any]) -> int:
    """The turn index: how many model entries the conversation already holds."""
    return sum(1 for c in _contents(body) if c.get("role") == MODEL_ROLE)


def render_stream(turn: Turn, model: str) -> bytes:
    """The whole SSE body of a scripted reply: one event with the whole response."""
    usage = turn.usage or Usage()
    response = {
        "candidates": [
            {
                "content": {"role": MODEL_ROLE, "parts": [_part(i) for i in turn.content]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens,
        },
        "modelVersion": model,
    }
    return f"data: {json.dumps(response)}\r\n\r\n".encode()


def render_error(error: ApiError) -> bytes:
    """The JSON body of a Google API error."""
    status = STATUS_NAMES.get(error.status, error.type.upper())
    body = {"error": {"code": error.status, "message": error.message, "status": status}}
    return json.dumps(body).encode()


def _part(item: ContentItem) -> dict[str, Any]:
    if isinstance(item, Text):
        return {"text": item.text}
    return {"functionCall": {"name": item.name, "args": dict(item.input)}}


def _contents(body: Mapping[str, Any]) -> list[Content]:
    raw = body.get("contents")
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def _parts(content: Content) -> list[Mapping[str, Any]]:
    raw = content.get("parts")
    return [p for p in raw if isinstance(p, Mapping)] if isinstance(raw, list) else []


def _new_function_responses(contents: Sequence[Content]) -> list[Mapping[str, Any]]:
    roles = [c.get("role") for c in contents]
    start = len(roles) - roles[::-1].index(MODEL_ROLE) if MODEL_ROLE in roles else 0
    return [
        part["functionResponse"]
        for content in contents[start:]
        for part in _parts(content)
        if isinstance(part.get("functionResponse"), Mapping)
    ]


def _response_text(response: Any) -> str:
    if not isinstance(response, Mapping):
        return str(response or "")
    value = response.get("error", response.get("output", ""))
    return value if isinstance(value, str) else json.dumps(value)


def _is_error(response: Any) -> bool:
    return isinstance(response, Mapping) and "error" in response
