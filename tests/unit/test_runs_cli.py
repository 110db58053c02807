"""`codefleet runs` lists the run directory with sizes; `--prune` removes old demo workspaces;
`runs new` sets the last run's database aside for a fresh one."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.coord.storage.store import Store
from codefleet.server.lock import ServerLock


def workspace(run_dir: Path, name: str, age_s: float, size: int) -> Path:
    path = run_dir / name
    (path / "tree").mkdir(parents=True)
    (path / "tree" / "data.bin").write_bytes(b"x" * size)
    stamp = 1_700_000_000 - age_s
    for item in (path / "tree" / "data.bin", path / "tree", path):
        os.utime(item, (stamp, stamp))
    return path


def runs(*args: str) -> list[dict[str, object]] | dict[str, object]:
    result = CliRunner().invoke(app, ["runs", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_runs_lists_every_entry_newest_first_with_its_size(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs"
    workspace(run_dir, "demo-1-old", 300, 10)
    workspace(run_dir, "demo-2-new", 100, 2048)
    (run_dir / "runners").mkdir()

    listed = runs("--run-dir", str(run_dir))
    table = CliRunner().invoke(app, ["runs", "--run-dir", str(run_dir)], env={"COLUMNS": "120"})

    assert isinstance(listed, dict)
    names = [(Path(str(e["path"])).name, e["bytes"], e["demo"]) for e in listed["entries"]]  # type: ignore[index, union-attr]
    assert names == [("runners", 0, False), ("demo-2-new", 2048, True), ("demo-1-old", 10, True)]
    assert table.exit_code == 0
    assert "demo-2-new" in table.stdout and "2.0 KB" in table.stdout


def test_prune_keeps_the_newest_demos_the_records_and_any_a_server_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs"
    for n, age in enumerate((400, 300, 200, 100)):
        workspace(run_dir, f"demo-{n}", age, 1)
    (run_dir / "runners").mkdir()
    held = ServerLock.acquire(run_dir / "demo-0" / "codefleet.db")  # a live server on the oldest

    try:
        pruned = runs("--prune", "--keep", "1", "--run-dir", str(run_dir))
    finally:
        held.release()

    assert isinstance(pruned, dict)
    gone = sorted(Path(str(e["path"])).name for e in pruned["removed"])  # type: ignore[union-attr]
    assert gone == ["demo-1", "demo-2"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["demo-0", "demo-3", "runners"]


def test_runs_new_keeps_the_last_database_and_leaves_the_next_serve_a_fresh_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / ".codefleet" / "codefleet.db"
    db.parent.mkdir()
    Store(db).close()
    old = db.read_bytes()

    result = CliRunner().invoke(app, ["runs", "new", "--db", str(db)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    [kept] = [p for p in db.parent.iterdir() if p.name.startswith("codefleet-")]
    assert re.fullmatch(r"codefleet-\d{8}T\d{6}Z\.db", kept.name)
    assert kept.read_bytes() == old and not db.exists()
    assert f"kept the last run's database as {kept}" in " ".join(result.stdout.split())
    assert "the next `codefleet serve` starts a fresh one" in " ".join(result.stdout.split())


def test_runs_new_refuses_while_a_server_uses_the_database(tmp_path: Path) -> None:
    db = tmp_path / "codefleet.db"
    Store(db).close()
    held = ServerLock.acquire(db)

    try:
        result = CliRunner().invoke(app, ["runs", "new", "--db", str(db)])
    finally:
        held.release()

    assert result.exit_code == 1
    assert "is in use by another CodeFleet server" in " ".join(result.output.split())
    assert db.exists()


def test_an_empty_run_directory_says_where_a_run_s_record_is_not_nothing_here(
    tmp_path: Path,
) -> None:
    listed = CliRunner().invoke(
        app, ["runs", "--run-dir", str(tmp_path / "runs")], env={"COLUMNS": "200"}
    )

    assert listed.exit_code == 0
    said = " ".join(listed.stdout.split())
    assert "nothing here yet" not in said
    assert "no demo workspace or runner record here" in said
    assert "`codefleet report`" in said and "`codefleet runs new`" in said
