"""The wait room over literal requests and holders: queues, the wait-for graph, deadlocks.

`holders` is the lease mirror's view (path -> holding task); every test states
who holds what and who waits, and the exact answer.
"""

from __future__ import annotations

from codefleet.coord.policy.waits import (
    Contender,
    Waiter,
    WaitOutcome,
    WaitRoom,
    find_cycle,
    holder_ends_soon,
)


def who(task_id: str, priority: int = 3, created_at: str = "") -> Contender:
    return Contender(task_id, priority, created_at or f"2026-07-31T18:00:0{task_id[-1]}.000Z")


def room_with(*parked: tuple[Contender, str]) -> tuple[WaitRoom, list[tuple[str, WaitOutcome]]]:
    ended: list[tuple[str, WaitOutcome]] = []
    room = WaitRoom(on_end=lambda w, o: ended.append((w.task_id, o)))
    for contender, path in parked:
        room.park(contender, f"a_{contender.task_id}", [path], "Edit")
    return room, ended


def test_a_wait_that_closes_a_cycle_of_two_is_refused_to_the_newer_requester_at_once() -> None:
    room, _ = room_with((who("T1"), "y"))  # T1 holds x, waits for y
    holders = {"x": "T1", "y": "T2"}
    assert room.resolve(who("T2"), ["T1"], holders) == (False, [])


def test_a_cycle_of_three_is_refused_at_once() -> None:
    room, _ = room_with((who("T1"), "y"), (who("T2"), "z"))  # T1 -> T2 -> T3
    holders = {"x": "T1", "y": "T2", "z": "T3"}
    assert find_cycle(room.graph(holders), "T3", ["T1"]) == ("T3", "T1", "T2")
    assert room.resolve(who("T3"), ["T1"], holders) == (False, [])


def test_an_older_requester_closing_a_cycle_parks_and_the_newest_waiter_gives_way() -> None:
    room, _ = room_with((who("T2"), "x"))  # T2 holds y, waits for x held by T1
    holders = {"x": "T1", "y": "T2"}
    assert room.resolve(who("T1"), ["T2"], holders) == (True, ["T2"])


def test_higher_priority_wins_a_deadlock_over_age() -> None:
    room, _ = room_with((who("T1"), "y"))
    holders = {"x": "T1", "y": "T2"}
    assert room.resolve(who("T2", priority=5), ["T1"], holders) == (True, ["T1"])


def test_a_wait_with_no_cycle_parks() -> None:
    room, _ = room_with((who("T1"), "y"))  # T1 waits for T2, which waits for nobody
    assert room.resolve(who("T3"), ["T1"], {"x": "T1", "y": "T2"}) == (True, [])


def test_a_waiter_whose_holder_died_has_no_edge_and_closes_no_cycle() -> None:
    room, _ = room_with((who("T1"), "y"))
    holders_after_death = {"x": "T1"}  # T2 went stale: its lease on y was released
    assert room.graph(holders_after_death) == {}
    assert room.resolve(who("T2"), ["T1"], holders_after_death) == (True, [])


def test_a_fenced_waiter_leaves_every_queue_and_is_told_its_wait_ended() -> None:
    room, ended = room_with((who("T1"), "x"), (who("T2"), "x"))
    room.end("T1", WaitOutcome.ENDED)
    assert [w.task_id for w in room.queue("x")] == ["T2"]
    assert room.graph({"x": "T9"}) == {"T2": {"T9"}}
    assert ended == [("T1", WaitOutcome.ENDED)]


def test_the_queue_is_priority_then_arrival() -> None:
    room, _ = room_with((who("T1"), "x"), (who("T2", priority=4), "x"), (who("T3"), "x"))
    queue = room.queue("x")
    assert [w.task_id for w in queue] == ["T2", "T1", "T3"]
    assert [room.position(w, "x") for w in queue] == [1, 2, 3]


def test_a_task_parking_again_replaces_its_earlier_request() -> None:
    room, ended = room_with((who("T1"), "x"))
    again: Waiter = room.park(who("T1"), "a_T1", ["y"], "Write")
    assert room.queue("x") == [] and room.queue("y") == [again]
    assert ended == [("T1", WaitOutcome.ENDED)]


def test_a_holder_with_no_history_is_expected_to_end_soon() -> None:
    assert holder_ends_soon(0.0, [], bound_s=5.0)


def test_a_holder_far_from_the_median_duration_is_not_expected_to_end_soon() -> None:
    assert not holder_ends_soon(1.0, [60.0, 70.0, 80.0], bound_s=30.0)
    assert holder_ends_soon(45.0, [60.0, 70.0, 80.0], bound_s=30.0)
