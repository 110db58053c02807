"""A damaged database is refused at start with one clear message, never a traceback.

`codefleet serve` runs SQLite's own check (`PRAGMA quick_check`) before it
builds the engine: a truncated file, a damaged header or one damaged page ends
the process non-zero, naming the file, what SQLite said and how to recover,
before anything listens. A healthy database still serves (the other tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from codefleet.coord.storage.sqlitefile import check_database
from codefleet.coord.storage.store import Store
from codefleet.errors import DatabaseDamaged
from codefleet.server.thread import free_port

EXIT_BOUND_S = 30.0
PAGE = 4096  # SQLite's default page size, what `Store` creates


def _healthy_database(path: Path) -> Path:
    Store(path).close()  # the schema, every table and index: several pages
    return path


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _damaged_header(data: bytes) -> bytes:
    return bytes(100) + data[100:]


def _damaged_last_page(data: bytes) -> bytes:
    return data[:-PAGE] + b"\xab" * PAGE


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "truncated": _truncated,
    "damaged header": _damaged_header,
    "damaged last page": _damaged_last_page,
}


def _serve(db: Path, workdir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    args = [
        sys.executable,
        "-m",
        "codefleet.cli",
        "serve",
        "--port",
        str(free_port()),
        "--db",
        str(db),
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    try:
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail("the server started on a damaged database instead of refusing it")


@pytest.mark.parametrize("damage", DAMAGES)
def test_serve_refuses_a_damaged_database_with_one_clear_message_and_no_traceback(
    damage: str, tmp_path: Path, workdir: Path
) -> None:
    db = _healthy_database(tmp_path / "fleet.db")
    db.write_bytes(DAMAGES[damage](db.read_bytes()))

    result = _serve(db, workdir, tmp_path)

    output = result.stdout + result.stderr
    message = " ".join(output.split())
    assert result.returncode != 0
    assert "Traceback" not in output
    assert str(db) in message
    assert "damaged" in message
    assert "new database" in message  # how to recover


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_check_names_what_sqlite_said(damage: str, tmp_path: Path) -> None:
    db = _healthy_database(tmp_path / "fleet.db")
    db.write_bytes(DAMAGES[damage](db.read_bytes()))

    with pytest.raises(DatabaseDamaged) as raised:
        check_database(db)

    assert raised.value.path == db
    assert raised.value.sqlite_said
    assert raised.value.sqlite_said in str(raised.value)


def test_the_message_names_the_previous_runs_copy_that_runs_new_kept(tmp_path: Path) -> None:
    db = _healthy_database(tmp_path / "fleet.db")
    for stamp in ("20261130T090000Z", "20261201T090000Z"):
        _healthy_database(tmp_path / f"fleet-{stamp}.db")
    db.write_bytes(_damaged_header(db.read_bytes()))

    with pytest.raises(DatabaseDamaged) as raised:
        check_database(db)

    assert raised.value.kept == tmp_path / "fleet-20261201T090000Z.db"
    assert "previous run's copy (fleet-20261201T090000Z.db" in str(raised.value)
    assert f"codefleet runs new --db {db}" in str(raised.value)


def test_a_healthy_database_passes_the_check_in_full(tmp_path: Path) -> None:
    assert check_database(_healthy_database(tmp_path / "fleet.db")) is True


def test_a_check_past_its_time_budget_stops_and_says_it_was_cut_short(tmp_path: Path) -> None:
    db = _healthy_database(tmp_path / "fleet.db")

    assert check_database(db, budget_s=0.0) is False


def test_a_file_that_does_not_exist_yet_is_a_new_database_not_a_damaged_one(
    tmp_path: Path,
) -> None:
    assert check_database(tmp_path / "new.db") is True
    assert not (tmp_path / "new.db").exists()
