"""Reads are stamped in the server's time (issue 33 item 3: the server's clock is the only one
that counts).

The server finds the other tasks' writes since a read by comparing the read's
time with its own ledger's. A runner on another host measures the skew between
the server's clock and its own at registration (`models.clock_skew_s`, from
the answer's `server_time`) and stamps each read with its own time plus that
skew: a clock 30 s ahead would otherwise hide 30 s of other tasks' writes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from codefleet.fleet.gate.readset import ReadLog
from codefleet.models import clock_skew_s, from_iso, read_clock_skew_s, to_iso, utcnow
from codefleet.paths import TreeRoot

T0 = datetime(2026, 12, 1, 18, 0, 0, tzinfo=UTC)


def test_the_skew_is_the_servers_time_minus_the_middle_of_the_exchange() -> None:
    server_stamped = to_iso(T0 + timedelta(seconds=10))

    assert clock_skew_s(server_stamped, T0, T0 + timedelta(seconds=2)) == 9.0
    assert clock_skew_s(to_iso(T0), T0, T0) == 0.0
    assert clock_skew_s(to_iso(T0), T0 + timedelta(seconds=30), T0 + timedelta(seconds=30)) == -30


def test_a_read_is_stamped_in_the_servers_time_not_this_hosts(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    tree = TreeRoot(tmp_path)
    ahead = ReadLog(skew_s=-30.0)  # this host's clock runs 30 s ahead of the server's

    before = utcnow()
    ahead.record(tree, "Read", {"file_path": str(tmp_path / "a.py")})
    after = utcnow()

    at = from_iso(ahead.latest["a.py"].at)
    shift = timedelta(seconds=30)
    assert before - shift - timedelta(milliseconds=1) <= at <= after - shift


def test_reads_take_the_lowest_skew_the_exchange_allows_so_a_slow_registration_hides_no_write() -> (
    None
):
    """Same clock, a registration answered slowly (the server stamped it near the end): the
    middle of the exchange would put the server 0.9 s ahead and stamp every read 0.9 s late,
    after a write that came 0.5 s after the read (found as "outside the lock", not the task)."""
    sent, received = T0, T0 + timedelta(seconds=2)
    server_stamped = to_iso(T0 + timedelta(seconds=1.9))

    assert clock_skew_s(server_stamped, sent, received) == 0.9
    skew = read_clock_skew_s(server_stamped, received)
    assert skew == -0.1  # never above the true skew (0 here): the server stamped before it arrived
    read_at = T0 + timedelta(seconds=3) + timedelta(seconds=skew)
    write_at = T0 + timedelta(seconds=3.5)
    assert to_iso(write_at) >= to_iso(read_at)  # the ledger's `at >= read` finds the write
    assert read_clock_skew_s(
        to_iso(T0 + timedelta(seconds=30.05)), T0 + timedelta(seconds=0.1)
    ) == (
        29.95  # a host 30 s behind, a quick exchange: the skew within its round trip
    )
