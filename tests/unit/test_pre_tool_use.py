"""The PreToolUse callback's own decisions: a gate that answers in time decides; one that does not is a denial."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from codefleet.fleet.gate.prewrite import Verdict, WriteGate
from codefleet.session.attempthooks import UNCHECKED, AttemptLog, make_pre_tool_use


class Gate:
    """A write gate whose answer takes `delay` seconds."""

    def __init__(self, delay: float, verdict: Verdict) -> None:
        self.delay, self.verdict = delay, verdict
        self.blocked_on: str | None = None
        self.asked: list[str] = []

    async def check(self, tool_name: str, tool_input: Any) -> Verdict:
        self.asked.append(tool_name)
        await asyncio.sleep(self.delay)
        return self.verdict


def _call(gate: Gate, timeout: float) -> tuple[dict[str, Any], AttemptLog]:
    attempt_log = AttemptLog(gate=cast(WriteGate, gate), check_timeout=timeout)
    hook = make_pre_tool_use(attempt_log)
    data = {"tool_name": "Write", "tool_input": {"file_path": "a.py", "content": "x"}}
    answer = asyncio.run(hook(cast(Any, data), "tool-1", cast(Any, {})))
    return dict(answer), attempt_log


def test_a_gate_that_answers_in_time_decides_and_the_call_is_timed() -> None:
    answer, attempt_log = _call(Gate(0.0, Verdict(allowed=True)), timeout=5.0)

    assert answer == {}
    assert len(attempt_log.hook_ms) == 1 and not attempt_log.refusals


def test_a_gate_slower_than_the_check_timeout_is_a_denial_not_a_wait() -> None:
    gate = Gate(30.0, Verdict(allowed=True))

    answer, attempt_log = _call(gate, timeout=0.05)

    assert gate.asked == ["Write"]
    reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reason == UNCHECKED
    assert attempt_log.refusals[0]["paths"] == ["a.py"]
    assert attempt_log.hook_ms[0] < 30_000.0
