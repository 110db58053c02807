"""The lease rule (`coord.policy.leaserule`): one answer per request, the doors' one difference."""

from __future__ import annotations

import pytest

from codefleet.coord.policy.answers import Denial
from codefleet.coord.policy.leaserule import ALL_FREE, HOLDS_ALL, Door, Request, Verdict, decide
from codefleet.models import DenyReason

OUTSIDE = Denial("../x", DenyReason.OUTSIDE_WORKDIR, "outside")
WRITING = Denial("a.py", DenyReason.BUSY, "being written")
HELD = (("a.py", ("agent-2", "T2")),)


@pytest.mark.parametrize("door", list(Door))
def test_the_first_rule_that_applies_answers(door: Door) -> None:
    assert decide(Request(door, rejected=(OUTSIDE,), ours=True)) is Verdict.REFUSE
    assert decide(Request(door, ours=True, held=HELD)) is Verdict.OURS
    assert decide(Request(door, held=HELD)) is Verdict.DENY
    assert decide(Request(door)) is Verdict.TAKE


def test_only_a_fleet_task_is_refused_as_busy_or_stacks() -> None:
    busy = Request(Door.FLEET, busy=(WRITING,), held=HELD, stackable=True)
    assert decide(busy) is Verdict.BUSY
    assert decide(Request(Door.FLEET, held=HELD, stackable=True)) is Verdict.STACK
    # a person's session never stacks: nothing of it could be undone with the task under it
    assert decide(Request(Door.PERSON, held=HELD, stackable=True)) is Verdict.DENY


@pytest.mark.parametrize("door", list(Door))
def test_the_shared_requests_of_a_re_ask_and_of_free_keys_answer_ours_and_take(door: Door) -> None:
    # the lease table hands these out instead of building a request (the hot path)
    assert decide(HOLDS_ALL[door]) is Verdict.OURS
    assert decide(ALL_FREE[door]) is Verdict.TAKE
    assert HOLDS_ALL[door].door is door and ALL_FREE[door].door is door
