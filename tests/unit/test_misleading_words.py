"""Words that said something untrue (issue 40, item 8), each held to what happened.

A cancelled task's dependent is blocked by a cancel, not a failure; the attempt
count a person reads is the charged one; a holder's name is shown whole or
elided visibly, never cut mid-word.
"""

from __future__ import annotations

import test_engine
from rich.console import Console, RenderableType
from test_engine import Fleet

from codefleet.models import EventType
from codefleet.ui.report import task_table
from codefleet.ui.task_view import task_detail
from codefleet.wording import phrase

make_fleet, fleet = test_engine.make_fleet, test_engine.fleet  # the engine harness's fixtures


def render(what: RenderableType) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(what)
    return console.export_text()


def test_a_cancelled_tasks_dependent_reads_as_blocked_by_a_cancel_not_a_failure(
    fleet: Fleet,
) -> None:
    fleet.add("C1")
    fleet.add("C2", deps=("C1",))

    fleet.engine.operator.cancel("C1")

    (blocked,) = fleet.events(EventType.TASK_BLOCKED_UPSTREAM)
    assert phrase("task_blocked_upstream", blocked["payload"]) == "blocked: C1 was cancelled"


def test_an_uncharged_attempt_is_not_counted_in_the_attempts_a_person_reads() -> None:
    task = {  # attempt 2 of 3 running; attempt 1 was interrupted (not charged)
        "id": "T1",
        "title": "t",
        "status": "running",
        "attempts": 2,
        "uncharged_attempts": 1,
        "max_attempts": 3,
        "cost_usd": 0.0,
    }

    table = render(task_table([task]))
    detail = render(task_detail(task))

    assert "1/3 +1 free" in table
    assert "2/3" not in table
    assert "1 of 3 charged (+1 free: interrupted, a usage limit or a repair)" in detail


def test_a_persons_hold_is_named_whole_not_cut_mid_word(fleet: Fleet) -> None:
    fleet.engine.person.hold("hold-root", "root", ["db"])
    fleet.engine.person.hold("0aeef531-5b6c-4c1e-9d7e-1234567890ab", "ada", ["cache"])

    names = sorted(h.name for h in fleet.engine.person.by_session.values())

    assert names == ["ada@0aeef531", "root@hold-root"]  # a random id: its prefix is enough
