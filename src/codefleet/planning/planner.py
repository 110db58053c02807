"""`codefleet plan`: from a goal to a checked task graph through one read-only session.

`plan_graph` sends the planning prompt, then loops: extract the answer's
YAML block, load it with the loader `load` uses, run `graph check` on it; if
that finds errors, send them back as the next user message of the SAME
session (at most `MAX_FEEDBACK_ROUNDS` times), else return the plan. A
failed session (budget, turns, API error) or errors left after the last
round raise `PlanFailed` with everything the person needs to see. The
session is anything with `ask(text) -> Reply` (`session.readonly.ReadOnlySession`);
this module does not import the SDK. `plan_file` renders the graph file with
its header comment; `plan_record` is the JSON kept under the run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from codefleet.paths import TreeRoot
from codefleet.planning.answer import Verdict, judge_answer
from codefleet.planning.planprompt import build_feedback, build_plan_prompt
from codefleet.wording import cost_text

if TYPE_CHECKING:
    from codefleet.session.readonly import Reply

__all__ = [
    "MAX_FEEDBACK_ROUNDS",
    "Asker",
    "Plan",
    "PlanFailed",
    "plan_file",
    "plan_graph",
    "plan_record",
]

MAX_FEEDBACK_ROUNDS = 2


class Asker(Protocol):
    async def ask(self, text: str) -> Reply: ...


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user message of the planning session and what came back."""

    sent: str
    answer: str
    errors: tuple[str, ...] = ()
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A graph that passed `graph check`, with how it was obtained."""

    verdict: Verdict
    exchanges: tuple[Exchange, ...]
    cost_usd: float
    model: str | None

    @property
    def block(self) -> str:
        assert self.verdict.block is not None
        return self.verdict.block


@dataclass
class PlanFailed(Exception):
    """No usable graph: the session failed, or errors remained after the last round."""

    message: str
    errors: tuple[str, ...] = ()
    exchanges: tuple[Exchange, ...] = field(default=())
    cost_usd: float = 0.0

    def __str__(self) -> str:
        return self.message


FeedbackHook = Callable[[int, Verdict], None]


async def plan_graph(
    session: Asker,
    goal: str,
    tree: TreeRoot,
    *,
    tasks: int | None = None,
    runners: int = 3,
    marker: str | None = None,
    on_feedback: FeedbackHook | None = None,
) -> Plan:
    """Ask for a graph and send its errors back until it passes (see the module docstring)."""
    exchanges: list[Exchange] = []
    text = build_plan_prompt(goal, tasks, marker)
    while True:
        reply = await session.ask(text)
        cost = reply.outcome.cost_usd
        if not reply.outcome.ok:
            exchanges.append(Exchange(text, reply.text, (), reply.outcome.session_id))
            raise PlanFailed(
                f"the planning session failed: {reply.outcome.error}", (), tuple(exchanges), cost
            )
        verdict = judge_answer(reply.text, tree, runners)
        exchanges.append(Exchange(text, reply.text, verdict.errors, reply.outcome.session_id))
        if verdict.ok:
            return Plan(verdict, tuple(exchanges), cost, reply.model)
        rounds = len(exchanges) - 1
        if rounds >= MAX_FEEDBACK_ROUNDS:
            raise PlanFailed(
                f"the graph still has errors after {rounds} feedback round(s)",
                verdict.errors,
                tuple(exchanges),
                cost,
            )
        if on_feedback is not None:
            on_feedback(len(exchanges), verdict)
        text = build_feedback(verdict.errors, verdict.warnings)


def plan_file(
    plan: Plan, goal: str, when: datetime, name: str = "THIS_FILE", simulated: bool = False
) -> str:
    """The graph file: a header comment (goal, date, model, cost), then the answer's YAML."""
    goal_lines = goal.strip().splitlines() or [""]
    header = [
        "# Task graph planned by `codefleet plan`.",
        f"# goal: {goal_lines[0]}",
        *(f"#       {line}" for line in goal_lines[1:]),
        f"# date: {when.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"# model: {plan.model or 'unknown'}",
        f"# cost: {cost_text(plan.cost_usd, simulated)} ({len(plan.exchanges)} answer(s), "
        f"{len(plan.exchanges) - 1} feedback round(s))",
        f"# check it: codefleet graph check {name}; run it: codefleet load {name}",
        "",
    ]
    body = plan.block if plan.block.endswith("\n") else plan.block + "\n"
    return "\n".join(header) + body


def plan_record(
    goal: str, exchanges: tuple[Exchange, ...], init: dict[str, Any] | None, cost: float
) -> dict[str, Any]:
    """What a planning run leaves under the run directory: every message both ways."""
    return {
        "goal": goal,
        "init": init,
        "cost_usd": cost,
        "exchanges": [
            {
                "sent": e.sent,
                "answer": e.answer,
                "errors": list(e.errors),
                "session_id": e.session_id,
            }
            for e in exchanges
        ],
    }
