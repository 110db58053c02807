"""The write latch on its own: a file whose parts were just granted is its writer's.

Literal keys and an injected clock; the files part is played by two recording
callables, so each rule of `coord.policy.writelatch` is read here directly (the
engine-level behaviour is `test_part_leases.py`'s).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from codefleet.coord.policy.writelatch import WRITE_LATCH_S, WriteLatch
from codefleet.models import DenyReason

START = datetime(2026, 1, 1, tzinfo=UTC)


class Held:
    """The files part's side: which files are held still, and until when."""

    def __init__(self) -> None:
        self.now = START
        self.still: dict[str, datetime] = {}
        self.let_go: list[str] = []

    def latch(self) -> WriteLatch:
        return WriteLatch(lambda: self.now, self.still.__setitem__, self.let_go.append)


def test_a_grant_of_parts_latches_the_file_and_holds_it_still_until_the_latch_ends() -> None:
    held = Held()
    latch = held.latch()

    latch.latch(["api.py::handle", "api.py::route"], "T1")

    assert latch.writing == {"api.py": ("T1", START + timedelta(seconds=WRITE_LATCH_S))}
    assert held.still == {"api.py": START + timedelta(seconds=WRITE_LATCH_S)}


def test_a_grant_of_whole_files_latches_nothing() -> None:
    latch = Held().latch()

    latch.latch(["api.py", "db.py"], "T1")

    assert latch.writing == {}
    assert latch.busy(["api.py"], "T2") == []


def test_another_task_asking_for_a_latched_file_is_busy_whole_or_parts() -> None:
    latch = Held().latch()
    latch.latch(["api.py::handle"], "T1")

    refused = latch.busy(["api.py", "api.py::route", "db.py"], "T2")

    assert [(d.path, d.reason) for d in refused] == [("api.py", DenyReason.BUSY)]
    assert "written by task T1" in refused[0].message
    assert latch.busy(["api.py::route"], "T1") == []  # the writer itself is never held back
    assert latch.written_by_other("api.py", "T2") and not latch.written_by_other("api.py", "T1")


def test_a_write_never_recorded_frees_the_file_when_the_latch_runs_out() -> None:
    held = Held()
    latch = held.latch()
    latch.latch(["api.py::handle"], "T1")

    held.now += timedelta(seconds=WRITE_LATCH_S + 0.1)

    assert latch.busy(["api.py::route"], "T2") == []
    assert not latch.written_by_other("api.py", "T2")


def test_unlatch_ends_one_file_or_every_file_of_the_task_and_lets_them_go() -> None:
    held = Held()
    latch = held.latch()
    latch.latch(["api.py::handle", "db.py::save"], "T1")
    latch.latch(["ui.py::draw"], "T2")

    latch.unlatch("T1", "api.py")
    assert sorted(latch.writing) == ["db.py", "ui.py"] and held.let_go == ["api.py"]

    latch.unlatch("T1")
    assert sorted(latch.writing) == ["ui.py"] and held.let_go == ["api.py", "db.py"]


def test_a_second_grant_in_the_same_write_moment_keeps_the_file_as_first_found() -> None:
    held = Held()
    latch = held.latch()
    latch.latch(["api.py::handle"], "T1")
    held.still.clear()

    held.now += timedelta(seconds=1)
    latch.latch(["api.py::route"], "T1")  # the same write moment: the still stays

    assert held.still == {}
    assert latch.writing["api.py"] == ("T1", held.now + timedelta(seconds=WRITE_LATCH_S))
