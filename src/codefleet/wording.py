"""How events read, said once: `wording.json`, rendered here and by the web dashboard.

The table maps an event type to a template: a list of parts, concatenated. A
part is text with `{field}` placeholders (a dotted path into the payload,
optionally `{field|filter}` or `{field|filter:N}`), or a list of alternatives
`[condition, text]` of which the first that holds is rendered (none: nothing).
A condition is `""` (always), `f` (truthy), `!f` (falsy), `f?` (present, not
null) or `f=v` (renders as `v`), joined by `&`. A bare missing value reads `?`.

The terminal dashboard (`ui.viewmodel`) and the browser (`server/web/wording.js`,
which fetches this file from `/web/wording.json`) interpret it the same way;
tests/unit/test_wording.py runs both over one corpus and fails if they differ.
`cost_text` is how a run's or a plan's cost reads in the terminal, simulated or
spent; `verify_blame_text` how a failed `--verify`'s bisection reads (the run's
verdict, the report); `halt_cause` why landing halted, in every view that says it
(the log's `landing_halted` line says the same, from the table); `attempts_text` how a
task's attempts read in every table: the charged ones of its allowance, then the free
ones and those a `retry` set aside, apart. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final

from codefleet.models import AttemptCounts, HaltCause
from codefleet.resources import lease_label

__all__ = [
    "SIMULATED",
    "WORDING_FILE",
    "AttemptCounts",
    "attempts_text",
    "cost_text",
    "halt_cause",
    "ordinal",
    "phrase",
    "spent_text",
    "table",
    "verify_blame_text",
]

WORDING_FILE: Final = Path(__file__).with_name("wording.json")
PLACEHOLDER: Final = re.compile(r"\{([\w.]+)(?:\|(\w+)(?::(\d+))?)?\}")


@cache
def table() -> dict[str, list[Any]]:
    loaded: dict[str, list[Any]] = json.loads(WORDING_FILE.read_text(encoding="utf-8"))
    return loaded


def phrase(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The words for one event of type `kind`, or None when the table has no entry."""
    template = table().get(kind)
    if template is None:
        return None
    return "".join(_part(part, payload) for part in template)


def _part(part: str | list[list[str]], body: Mapping[str, Any]) -> str:
    if isinstance(part, str):
        return _fill(part, body)
    for condition, text in part:
        if all(_holds(c, body) for c in condition.split("&") if c):
            return _fill(text, body)
    return ""


def _get(body: Mapping[str, Any], path: str) -> Any:
    value: Any = body
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _truthy(value: Any) -> bool:
    return bool(value)  # None, False, 0, "", [] and {} are falsy here and in wording.js


def _holds(condition: str, body: Mapping[str, Any]) -> bool:
    if condition.startswith("!"):
        return not _truthy(_get(body, condition[1:]))
    if condition.endswith("?"):
        return _get(body, condition[:-1]) is not None
    if "=" in condition:
        field, expected = condition.split("=", 1)
        value = _get(body, field)
        return value is not None and _text(value) == expected
    return _truthy(_get(body, condition))


def _fill(text: str, body: Mapping[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        value = _get(body, match[1])
        if match[2]:
            return _filter(match[2], value, int(match[3] or 0))
        return "?" if value is None else _text(value)

    return PLACEHOLDER.sub(one, text)


def _text(value: Any) -> str:
    """A value as JavaScript's `String()` shows it (so both renderers agree)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _filter(name: str, value: Any, n: int) -> str:
    match name:
        case "cost":
            usd = float(value or 0)
            return f"${usd:.{2 if usd >= 100 else 4}f}"
        case "trunc":
            text = "" if value is None else _text(value)
            return text if len(text) <= n else f"{text[: max(1, n - 1)]}…"
        case "short":
            return "" if value is None else _text(value)[:n]
        case "join":
            return ", ".join(_text(v) for v in value or ())
        case "counts":
            return ", ".join(f"{_text(v)} {k}" for k, v in (value or {}).items())
        case "clock":
            return _clock(value)
        case "key":
            return lease_label("" if value is None else _text(value))
        case "stale":
            return ", ".join(_stale_one(v) for v in value or ())
    raise ValueError(f"wording.json names an unknown filter {name!r}")


def _stale_one(item: Any) -> str:
    """One stale read: "api.py (T3)", or "api.py (deleted by T3)"."""
    item = item if isinstance(item, Mapping) else {}
    who = ", ".join(_text(v) for v in item.get("changed_by") or ())
    gone = "deleted by " if item.get("now_sha256") is None else ""
    return f"{_text(item.get('path', '?'))} ({gone}{who})"


def _clock(stamp: Any) -> str:
    """A server timestamp as local wall-clock time, `HH:MM:SS` ('' when it is not one)."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return ""


SIMULATED: Final = " simulated, nothing spent"  # after a cost no real model ran up


def cost_text(cost: float, simulated: bool) -> str:
    """A cost; `simulated` when no real model ran (the figure is priced, not spent)."""
    return f"${cost:.4f}{SIMULATED if simulated else ''}"


def attempts_text(task: Mapping[str, Any]) -> str:
    """A task row's attempts as a table shows them (`AttemptCounts.short`)."""
    return AttemptCounts.of(task).short()


def spent_text(cost: float, simulated: bool) -> str:
    """What a budget has spent: `$X spent`, or the simulated cost labelled as such."""
    return cost_text(cost, simulated) if simulated else f"${cost:.4f} spent"


HALT_CAUSES: Final = {
    HaltCause.FAILS_ALONE: "the landed tree alone fails {check}",
    HaltCause.CANNOT_START: "{check} could not start on the landed tree alone",
    HaltCause.FLAKY: "{check} is flaky: it failed, then passed when run again on the same tree",
    HaltCause.COULD_NOT_RUN: "no landing worker could run {check}",
}


def halt_cause(check: str, why: str | None) -> str:
    """Why landing halted, as a clause: "the landed tree alone fails test", "test is flaky: ..."
    (a halt recorded before its cause was: the first)."""
    try:
        cause = HaltCause(why or "")
    except ValueError:
        cause = HaltCause.FAILS_ALONE
    return HALT_CAUSES[cause].format(check=check)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def verify_blame_text(verify: Mapping[str, Any]) -> str | None:
    """What a failed `--verify`'s bisection found (its `run_finished` payload), in one line;
    None when it passed or was not bisected."""
    if verify.get("ok") or "landings" not in verify:
        return None
    if verify.get("first_failing"):
        landed = f"landed {ordinal(int(verify['order']))} of {verify['landings']}"
        title = json.dumps(str(verify.get("title") or ""), ensure_ascii=False)
        return f"verify failed: first failing with {verify['first_failing']} {title} ({landed})"
    if verify.get("before_run_fails"):
        return (
            f"verify failed with every one of the {verify['landings']} landing(s) undone too: "
            "the tree before the run fails it, no task is to blame"
        )
    return f"verify failed: no landing named: {verify.get('not_bisected')}"
