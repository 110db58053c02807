"""The usage-limit pause policy (`limits`), pure: literal states and an explicit `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from codefleet.coord.policy.limitpolicy import (
    MAX_PAUSE_S,
    LimitState,
    Pause,
    PauseChange,
    on_limit,
    on_success,
    pause_seconds,
)

NOW = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_a_stated_retry_time_pauses_the_fleet_until_then_and_counts_no_strike():
    state, change = on_limit(LimitState(), NOW, 42.0, "429", "T1")

    assert change is PauseChange.STARTED
    assert state == LimitState(Pause(NOW, later(42), "429", "T1"), strikes=0)
    assert state.paused_at(later(41.9)) and not state.paused_at(later(42))


def test_without_a_retry_time_the_pause_doubles_from_30_s_and_stops_at_15_min():
    assert [pause_seconds(n) for n in range(7)] == [30, 60, 120, 240, 480, 900, 900]
    assert pause_seconds(10_000) == MAX_PAUSE_S


def test_each_pause_in_a_row_without_a_retry_time_is_a_strike_and_a_success_clears_them():
    state, _ = on_limit(LimitState(), NOW, None, "429")
    assert (state.paused_until(), state.strikes) == (later(30), 1)

    state, change = on_limit(state, later(30), None, "429")  # the first pause ran out
    assert change is PauseChange.STARTED
    assert (state.paused_until(), state.strikes) == (later(30 + 60), 2)

    state = on_success(state)
    state, _ = on_limit(state, later(100), None, "429")
    assert (state.paused_until(), state.strikes) == (later(100 + 30), 1)


def test_a_limit_reported_during_a_pause_joins_it_without_a_strike():
    state, _ = on_limit(LimitState(), NOW, None, "first", "T1")

    joined, change = on_limit(state, later(5), None, "second", "T2")

    assert change is PauseChange.JOINED
    assert joined == state  # same end, same reason, same first task, no extra strike


def test_a_later_stated_retry_time_extends_the_pause_and_an_earlier_one_joins_it():
    state, _ = on_limit(LimitState(), NOW, 60.0, "first", "T1")

    sooner, change = on_limit(state, later(10), 20.0, "sooner")
    assert change is PauseChange.JOINED and sooner.paused_until() == later(60)

    moved, change = on_limit(state, later(10), 120.0, "later")
    assert change is PauseChange.EXTENDED
    assert moved.pause == Pause(NOW, later(130), "later", "T1")


def test_a_limit_with_retry_after_zero_still_starts_a_pause_that_ends_at_once():
    state, change = on_limit(LimitState(), NOW, 0.0, "429")

    assert change is PauseChange.STARTED and not state.paused_at(NOW)
