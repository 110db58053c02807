"""What decides a repair turn, and what it says: pure code, literal values (decision 0161)."""

from __future__ import annotations

import pytest

from codefleet.coord.policy.landingpolicy import may_repair
from codefleet.fleet.repair import repair_message
from codefleet.models import RepairCause
from codefleet.review.report.repairsections import repairs_of, reworks_of


def test_a_blamed_task_with_a_session_and_turns_left_is_repaired() -> None:
    assert may_repair("s-1", repairs=0, repair_turns=1, agent="claude", workspace="tree")
    assert may_repair("s-1", repairs=1, repair_turns=2, agent=None, workspace="tree")


@pytest.mark.parametrize(
    ("session", "repairs", "turns", "agent", "workspace", "why"),
    [
        (None, 0, 1, "claude", "tree", "no session to resume"),
        ("", 0, 1, "claude", "tree", "no session to resume"),
        ("s-1", 1, 1, "claude", "tree", "its repair turns are spent"),
        ("s-1", 0, 0, "claude", "tree", "repair turns are off"),
        ("s-1", 0, 1, "codex", "tree", "a Codex session is not resumed"),
        ("s-1", 0, 1, "claude", "clone", "a clone holds the line, not the change"),
    ],
)
def test_a_blamed_task_is_reworked_when_its_session_cannot_repair_it(
    session: str | None, repairs: int, turns: int, agent: str, workspace: str, why: str
) -> None:
    assert not may_repair(session, repairs, turns, agent, workspace), why


def test_a_blamed_task_others_stacked_on_is_reworked() -> None:
    """Its stacked files are held by the tasks on top, which are undone (decision 0159)."""
    assert not may_repair("s-1", 0, 1, "claude", "tree", stacked_on=True)


def test_a_repair_message_carries_the_failure_and_says_the_change_is_still_there() -> None:
    verify = repair_message(RepairCause.VERIFY, "Verification failed: check `test` failed.\nE 1")
    landing = repair_message(RepairCause.INTEGRATION, "Integration failed: check `test` ...")
    assert "failed its verification" in verify and "E 1" in verify
    assert "did not land" in landing and "Integration failed" in landing
    for text in (verify, landing):
        assert "still on the tree" in text and "leases are still held" in text


def test_the_report_counts_repairs_reworks_and_what_a_repair_saved() -> None:
    def event(kind: str, task: str, **payload: object) -> dict[str, object]:
        return {"type": kind, "task_id": task, "payload": payload}

    log = [
        event("repair_started", "T1", attempt=1, cause="verify", name="test", spent_usd=0.10),
        event("repair_finished", "T1", outcome="failed", cost_usd=0.02),
        event("task_requeued", "T1", error_kind="verify_failed"),
        event("repair_started", "T2", attempt=1, cause="integration", name="test", spent_usd=0.3),
        event("repair_finished", "T2", outcome="landing", cost_usd=0.05),
        event("task_requeued", "T3", error_kind="veto"),
    ]

    repairs = repairs_of(log)

    assert [(r.task_id, r.cause, r.outcome) for r in repairs] == [
        ("T1", "verify", "failed"),
        ("T2", "integration", "landing"),
    ]
    assert [round(r.saved_usd, 2) for r in repairs] == [0.0, 0.25]  # a failed one saved nothing
    assert reworks_of(log) == 1  # the veto's requeue is no rework of a failed check
