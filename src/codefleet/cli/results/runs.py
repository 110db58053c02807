"""`codefleet runs`: the run directory, `--prune` for old demos, `runs new` for a fresh run.

`runs new` starts a fresh run on the same tree: the last run's database is kept beside it,
and `codefleet runs` lists the databases kept so. It needs the database free: while a
server runs on it, it is refused naming that server (URL and pid) and the way on (stop
it, `runs new`, serve again).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from codefleet.cli.common import (
    OPERATE,
    JsonOpt,
    RunDirOpt,
    app,
    fail,
    print_json,
    settings_from,
)
from codefleet.cli.helptext import CliTyper
from codefleet.cli.output import console
from codefleet.cli.results.rundirs import RunEntry, list_runs, prune_runs
from codefleet.server.lock import DatabaseInUse, ServerLock
from codefleet.treelock import live_server

__all__ = ["runs", "runs_new"]

runs_app = CliTyper(invoke_without_command=True)
app.add_typer(runs_app, name="runs", rich_help_panel=OPERATE)


@runs_app.callback()
def runs(
    ctx: typer.Context,
    prune: Annotated[
        bool, typer.Option("--prune", help="Remove demo workspaces but the newest --keep.")
    ] = False,
    keep: Annotated[int, typer.Option("--keep", help="With --prune: how many to keep.")] = 3,
    run_dir: RunDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the run directory (demo workspaces, runner records) with sizes; --prune old demos.

    Also lists the databases codefleet runs new kept. codefleet runs new starts a fresh run
    on the same tree.
    """
    if ctx.invoked_subcommand is not None:
        return

    if keep < 0:
        raise fail("--keep must be 0 or more")
    settings = settings_from(find_server=False, run_dir=run_dir)
    kept = kept_databases(settings.db)
    removed: list[RunEntry] = []
    busy: list[RunEntry] = []
    if prune:
        removed, busy = prune_runs(settings.run_dir, keep)
    entries = list_runs(settings.run_dir)
    if json_out:
        print_json(
            {
                "run_dir": str(settings.run_dir),
                "entries": [_as_dict(e) for e in entries],
                "removed": [_as_dict(e) for e in removed],
                "in_use": [_as_dict(e) for e in busy],
                "kept_databases": [_kept_dict(k) for k in kept],
            }
        )
        return
    console.print(f"runs: {settings.run_dir.resolve()}", markup=False)
    if entries:
        console.print(_table(entries))
    else:
        console.print(
            "  no demo workspace or runner record here (a `codefleet run` keeps its record in "
            "the server's database: `codefleet report`, `codefleet runs new` for a fresh one)",
            markup=False,
        )
    for entry in removed:
        console.print(f"removed {entry.path.name} ({_size(entry.size)})", markup=False)
    for entry in busy:
        console.print(f"kept {entry.path.name}: a running server uses its database", markup=False)
    if prune and not removed and not busy:
        console.print(f"nothing to prune: at most {keep} demo workspace(s)", markup=False)
    if kept:
        console.print(f"kept databases (runs new): {settings.db.resolve().parent}", markup=False)
        now = time.time()
        for path in kept:
            size, age = path.stat().st_size, now - path.stat().st_mtime
            console.print(f"  {path.name}  {_size(size)}  {_age(age)}", markup=False)


@runs_app.command("new")
def runs_new(
    db: Annotated[
        Path | None, typer.Option("--db", help="The server's database [CODEFLEET_DB].")
    ] = None,
) -> None:
    """Start a fresh run on the same tree: the last run's database is kept beside it.

    The database (tasks, events, patches) is renamed codefleet-<UTC time>.db (codefleet
    runs lists the kept ones); the next codefleet serve starts an empty one. The tree is
    not touched. Stop the server first: while it runs, runs new is refused, naming it.
    """
    path = settings_from(find_server=False, db=db).db
    if not path.exists():
        console.print(
            f"runs new: no database at {path}: the next run is fresh already", markup=False
        )
        return
    try:
        lock = ServerLock.acquire(path)
    except DatabaseInUse as err:
        raise fail(_in_use(path, err)) from None
    try:
        kept = _set_aside(path)
    finally:
        lock.release()
    console.print(
        f"runs new: kept the last run's database as {kept}; the next `codefleet serve` starts "
        "a fresh one (the tree is not touched)",
        markup=False,
    )


def _in_use(db: Path, err: DatabaseInUse) -> str:
    """Why `runs new` cannot set `db` aside now, naming the running server and the way on."""
    record = live_server(db.parent)
    who = record.names() if record is not None else f"pid {err.pid}"
    stop = f"kill {err.pid}" if err.pid is not None else "its kill"
    return (
        f"the database {db} is in use by another CodeFleet server, {who}: stop it first (Ctrl-C "
        f"where it runs, or `{stop}`), then `codefleet runs new`, then `codefleet serve` "
        "again for a fresh run"
    )


def kept_databases(db: Path) -> list[Path]:
    """The databases `runs new` set aside beside `db` (`<stem>-<UTC time><suffix>`), oldest
    first."""
    pattern = f"{db.stem}-????????T??????Z{db.suffix}"
    return sorted(db.parent.glob(pattern)) if db.parent.is_dir() else []


def _kept_dict(path: Path) -> dict[str, object]:
    return {"path": str(path), "bytes": path.stat().st_size, "modified": path.stat().st_mtime}


def _set_aside(db: Path) -> Path:
    """Rename the database (and its WAL files) to `<stem>-<UTC time><suffix>`; the new name."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    kept = db.with_name(f"{db.stem}-{stamp}{db.suffix}")
    for extra in ("-wal", "-shm"):  # a server that stopped cleanly leaves none
        side = db.with_name(db.name + extra)
        if side.exists():
            side.rename(kept.with_name(kept.name + extra))
    db.rename(kept)
    return kept


def _table(entries: list[RunEntry]) -> Table:
    table = Table(title_justify="left", expand=False)
    for column, justify in (
        ("entry", "left"),
        ("kind", "left"),
        ("size", "right"),
        ("age", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    now = time.time()
    for entry in entries:
        kind = "demo workspace" if entry.is_demo else "runner records"
        table.add_row(Text(entry.path.name), kind, _size(entry.size), _age(now - entry.modified))
    return table


def _as_dict(entry: RunEntry) -> dict[str, object]:
    return {
        "path": str(entry.path),
        "demo": entry.is_demo,
        "bytes": entry.size,
        "modified": entry.modified,
    }


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"
