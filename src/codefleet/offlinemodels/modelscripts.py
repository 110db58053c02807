"""Scripts for the fake model: what it answers, turn by turn.

A script is an ordered list of `Turn`s registered under an id; a prompt opts into it by
carrying `marker(script_id)`. Every value here is frozen, so one script can be served to
many parallel sessions. `turn_from_dict` / `scripts_from_dict` build the same values from
plain data (a parsed YAML file) and refuse unknown keys rather than dropping them.

Plain-data shape of one turn (every key optional):

    content: [{text: "..."}, {tool_use: {name: Write, input: {file_path: a.py, content: ""}}}]
    delay_s: 0.2
    usage: {input_tokens: 1000, output_tokens: 50}
    error: {status: 429, type: rate_limit_error, message: "...", retry_after_s: 2}
    wait_for: {substring: "a.py", script_id: T3, timeout_s: 15}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

__all__ = [
    "ApiError",
    "ContentItem",
    "ScriptError",
    "Text",
    "ToolUse",
    "Turn",
    "Usage",
    "WaitFor",
    "marker",
    "scripts_from_dict",
    "turn_from_dict",
]

MARKER_PREFIX = "[[fakemodel:"
MARKER_SUFFIX = "]]"


class ScriptError(ValueError):
    """A script given as plain data is malformed."""


@dataclass(frozen=True, slots=True)
class Text:
    """A text block in a scripted reply."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool call in a scripted reply; `input` is the tool's JSON input."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)


ContentItem = Text | ToolUse


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported for one reply (the CLI prices them itself)."""

    input_tokens: int = 1000
    output_tokens: int = 50


@dataclass(frozen=True, slots=True)
class ApiError:
    """Answer the turn with this HTTP error instead of a stream (e.g. 429 rate_limit_error).

    `retry_after_s` sends the headers of a limit that lifts after that many seconds: the
    standard `retry-after`, and the `anthropic-ratelimit-unified-*` pair a subscription
    account's limit carries (see `anthropicwire.error_headers`).
    """

    status: int = 500
    type: str = "api_error"
    message: str = "scripted failure"
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Hold a reply until a request carrying a tool_result containing `substring` arrived
    (or the test called `FakeModel.signal` with a text containing it).

    `script_id` narrows the search to that script's requests. After `timeout_s` the reply
    is sent anyway and the give-up is recorded (`FakeModel.wait_timeouts`).
    """

    substring: str
    script_id: str | None = None
    timeout_s: float = 15.0


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted model reply: content, or an error, possibly held or delayed."""

    content: tuple[ContentItem, ...] = ()
    delay_s: float = 0.0
    usage: Usage | None = None
    error: ApiError | None = None
    wait_for: WaitFor | None = None

    @property
    def stop_reason(self) -> str:
        """`tool_use` when the reply calls a tool, else `end_turn`."""
        return "tool_use" if any(isinstance(i, ToolUse) for i in self.content) else "end_turn"


def marker(script_id: str) -> str:
    """The text to put in a prompt so the fake model serves `script_id`."""
    return f"{MARKER_PREFIX}{script_id}{MARKER_SUFFIX}"


_T = TypeVar("_T", Usage, ApiError, WaitFor)
_TURN_KEYS = frozenset({"content", "delay_s", "usage", "error", "wait_for"})
_TOOL_USE_KEYS = frozenset({"name", "input"})


def turn_from_dict(raw: Mapping[str, Any]) -> Turn:
    """Build a `Turn` from plain data; unknown keys raise `ScriptError`."""
    _check_keys(raw, _TURN_KEYS, "turn")
    return Turn(
        content=tuple(_item_from_dict(item) for item in raw.get("content", ())),
        delay_s=float(raw.get("delay_s", 0.0)),
        usage=_build(Usage, raw.get("usage")),
        error=_build(ApiError, raw.get("error")),
        wait_for=_build(WaitFor, raw.get("wait_for")),
    )


def scripts_from_dict(raw: Mapping[str, Any]) -> dict[str, list[Turn]]:
    """Build `{script_id: turns}` from plain data, e.g. a parsed YAML mapping."""
    if not isinstance(raw, Mapping):
        raise ScriptError(f"scripts must be a mapping of id to turns, got {raw!r}")
    return {str(sid): _turns_from_list(sid, turns) for sid, turns in raw.items()}


def _turns_from_list(script_id: object, raw: object) -> list[Turn]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ScriptError(f"script {script_id!r} must be a list of turns, got {raw!r}")
    return [turn_from_dict(t) for t in raw]


def _item_from_dict(raw: Mapping[str, Any]) -> ContentItem:
    """`{"text": str}` or `{"tool_use": {"name": str, "input": {...}}}`."""
    if isinstance(raw, Mapping) and set(raw) == {"text"}:
        return Text(str(raw["text"]))
    if isinstance(raw, Mapping) and set(raw) == {"tool_use"}:
        tool = raw["tool_use"]
        _check_keys(tool, _TOOL_USE_KEYS, "tool_use")
        return ToolUse(str(tool["name"]), dict(tool.get("input", {})))
    raise ScriptError(f"content item must be {{text: ...}} or {{tool_use: ...}}, got {raw!r}")


def _build(cls: type[_T], raw: Mapping[str, Any] | None) -> _T | None:
    """Instantiate a flat dataclass from a mapping, refusing unknown keys."""
    if raw is None:
        return None
    _check_keys(raw, frozenset(f.name for f in fields(cls)), cls.__name__)
    return cls(**raw)


def _check_keys(raw: object, allowed: frozenset[str], what: str) -> None:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{what} must be a mapping, got {raw!r}")
    unknown = set(raw) - allowed
    if unknown:
        raise ScriptError(f"unknown {what} key(s): {sorted(unknown)}")
