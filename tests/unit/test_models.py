"""Timestamps at the model boundary: aware UTC only, milliseconds, `Z`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from codefleet.models import from_iso, new_agent_id, new_task_id, to_iso

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def test_to_iso_refuses_a_naive_datetime():
    with pytest.raises(ValueError, match="naive"):
        to_iso(datetime(2026, 7, 31, 18, 4, 22))


def test_to_iso_writes_milliseconds_and_a_z_suffix():
    moment = datetime(2026, 7, 31, 18, 4, 22, 117_999, tzinfo=UTC)

    assert to_iso(moment) == "2026-07-31T18:04:22.117Z"


def test_to_iso_writes_milliseconds_even_on_a_whole_second():
    assert to_iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"


def test_to_iso_converts_another_offset_to_utc():
    paris_summer = timezone(timedelta(hours=2))
    moment = datetime(2026, 7, 31, 20, 4, 22, 117_000, tzinfo=paris_summer)

    assert to_iso(moment) == "2026-07-31T18:04:22.117Z"


def test_from_iso_round_trips_to_iso():
    moment = datetime(2026, 7, 31, 18, 4, 22, 117_000, tzinfo=UTC)

    back = from_iso(to_iso(moment))

    assert back == moment
    assert back.tzinfo is UTC
    assert to_iso(back) == "2026-07-31T18:04:22.117Z"


def test_from_iso_reads_an_explicit_offset_as_utc():
    assert from_iso("2026-07-31T20:04:22.117+02:00") == datetime(
        2026, 7, 31, 18, 4, 22, 117_000, tzinfo=UTC
    )


def test_from_iso_refuses_a_timestamp_without_a_timezone():
    with pytest.raises(ValueError, match="timezone"):
        from_iso("2026-07-31T18:04:22.117")


def test_generated_ids_have_their_prefix_and_twelve_hex_digits():
    assert re.fullmatch(r"t_[0-9a-f]{12}", new_task_id())
    assert re.fullmatch(r"a_[0-9a-f]{12}", new_agent_id())
    assert new_task_id() != new_task_id()


def test_every_format_written_matches_the_documented_shape():
    for micros in (0, 1, 999, 1000, 999_999):
        moment = datetime(2026, 7, 31, 23, 59, 59, micros, tzinfo=UTC)
        assert ISO_MS_Z.match(to_iso(moment))
