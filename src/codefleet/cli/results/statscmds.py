"""`codefleet stats`: where the run's time and money went, and what the graph should learn.

Reads the run through the server's wire API (`review.fetch.fetch_record`, the
one client), computes `review.collisionstats.fleet_stats` (pure, over the event log) and
prints it; `--suggest GRAPH -o OUT` writes GRAPH amended from the run's
collisions (`suggest`), a comment on each change.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.table import Table

from codefleet.api.graphfile import GraphError, load_graph
from codefleet.cli.common import (
    REVIEW,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    fail,
    print_json,
    settings_from,
)
from codefleet.cli.output import console
from codefleet.review.collisionstats import fleet_stats, part_row_label
from codefleet.review.facts import run_facts
from codefleet.review.fetch import fetch_record
from codefleet.review.report.reportblocks import seconds
from codefleet.review.statsjson import stats_json
from codefleet.review.suggest import render_graph, suggest
from codefleet.wording import cost_text

if TYPE_CHECKING:
    from codefleet.review.collisionstats import FleetStats

__all__ = ["fleet_line", "landing_line", "stats"]


@app.command(rich_help_panel=REVIEW)
def stats(
    suggest_from: Annotated[
        Path | None,
        typer.Option(
            "--suggest",
            help="The graph file the run was loaded from: write it amended from the run's "
            "collisions (vetoed files into scope, depends_on where a retry waited for the holder).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="With --suggest: write the amended graph here."),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Collisions and their cost per file and per task; parallelism; makespan vs critical path."""
    if output is not None and suggest_from is None:
        raise fail("-o/--output goes with --suggest GRAPH")
    original = _read_graph(suggest_from) if suggest_from is not None else None
    settings = settings_from(server_url=server, token=token)
    facts = run_facts(call_server(settings, lambda c: fetch_record(c, with_ledgers=False)))
    found = fleet_stats(facts)
    if original is not None and suggest_from is not None:
        _suggest(suggest_from, original, facts, output, settings.url)
        return
    if json_out:
        print_json(stats_json(found))
        return
    print_stats(found)


def _read_graph(path: Path) -> str:
    try:
        load_graph(path)
        return path.read_text(encoding="utf-8")
    except GraphError as err:
        raise fail(str(err)) from None


def _suggest(path: Path, original: str, facts: Any, output: Path | None, url: str) -> None:
    raw = yaml.safe_load(original)
    tasks, changes = suggest(raw["tasks"], facts)
    text = render_graph(original, raw, tasks, changes, f"the run on {url}")
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise fail(f"cannot write {output}: {err.strerror or err}") from None
    for c in changes:
        console.print(f"{c.task_id}: + {c.key} {c.value} ({c.why})", markup=False)
    console.print(f"{len(changes)} change(s) to {path} written to {output}", markup=False)


def fleet_line(s: FleetStats) -> str:
    """The fleet in one sentence: parallelism, makespan against the critical path, losses."""
    chain = " → ".join(s.critical_path) or "—"
    stretch = f"{s.stretch:.1f}x" if s.stretch is not None else "—"
    line = (
        f"{s.runners} runner(s), {s.busy_mean:.2f} busy on average ({s.parallelism:.0%}) · "
        f"makespan {seconds(s.makespan_s)} vs critical path {seconds(s.critical_s)} ({chain}): "
        f"{stretch} · lost to vetoes {seconds(s.veto_lost_s)}, to rollbacks "
        f"{seconds(s.rollback_lost_s)} · {cost_text(s.cost_usd, s.simulated)}"
    )
    if s.pauses:
        line += f" · {s.pauses} usage-limit pause(s), {seconds(s.paused_s)}"
    return line


def landing_line(s: FleetStats) -> str | None:
    """Landing in one sentence: checks per landed task, the waits, the breaks, the halts."""
    landing = s.landing
    if landing is None:
        return None
    per = landing.checks_per_landed
    each = f" ({per:.2f} per landed task)" if per is not None else ""
    mean = landing.waited_s / landing.landed if landing.landed else 0.0
    return (
        f"Landing: {landing.landed} landed · {landing.checks} landing check(s){each} · "
        f"waited to land {seconds(mean)} on average, {seconds(landing.waited_max_s)} at most · "
        f"{landing.breaks} integration break(s), {landing.reworked} reworked and landed · "
        f"{landing.halts} halt(s)"
    )


def print_stats(s: FleetStats) -> None:
    console.print(fleet_line(s), markup=False, highlight=False)
    if (landing := landing_line(s)) is not None:
        console.print(landing, markup=False, highlight=False)
    files = _files_table(s)
    console.print(
        files if files is not None else "No write was refused and no attempt was rolled back."
    )
    for section in (_resources_table, _stale_table, _waits_table):
        shown = section(s)
        if shown is not None:
            console.print(shown)
    console.print(_tasks_table(s))
    if len(s.kinds) > 1:  # a mixed fleet: which agent made the attempts and met the vetoes
        line = " · ".join(
            f"{k.agent}: {k.attempts} attempt(s), {k.vetoed} vetoed, {seconds(k.attempt_s)}"
            for k in s.kinds
        )
        console.print(f"Agents: {line}", markup=False, highlight=False)


def _files_table(s: FleetStats) -> Table | None:
    if not s.files:
        return None
    files = Table(title="Files: collisions and rollbacks", title_justify="left")
    for name in ("path", "vetoes", "tasks", "lost to vetoes", "lost to rollbacks"):
        files.add_column(name, justify="right" if name.startswith(("vetoes", "lost")) else "left")
    for f in s.files:
        files.add_row(
            f.path,
            str(f.vetoes),
            ", ".join(f.tasks) or "—",
            seconds(f.veto_lost_s),
            seconds(f.rollback_lost_s),
        )
        for part in f.parts:  # a file leased by part: its total above, each part beneath
            files.add_row(
                part_row_label(part.path),
                str(part.vetoes),
                ", ".join(part.tasks),
                seconds(part.veto_lost_s),
                "—",  # a rollback puts the file back: counted on its row
            )
    return files


def _resources_table(s: FleetStats) -> Table | None:
    if not s.resources:
        return None
    held = Table(
        title="Resources: tasks refused a resource another task held", title_justify="left"
    )
    for name in ("resource", "vetoes", "tasks", "lost to vetoes"):
        held.add_column(name, justify="left" if name in ("resource", "tasks") else "right")
    for r in s.resources:
        held.add_row(r.name, str(r.vetoes), ", ".join(r.tasks), seconds(r.veto_lost_s))
    return held


def _stale_table(s: FleetStats) -> Table | None:
    if not s.stale_reads:
        return None
    stale = Table(
        title="Stale reads: a file read, then changed by another task", title_justify="left"
    )
    for name in ("path", "read by", "changed by", "times"):
        stale.add_column(name, justify="right" if name == "times" else "left")
    for r in s.stale_reads:
        stale.add_row(r.path, r.reader, r.changed_by, str(r.count))
    return stale


def _waits_table(s: FleetStats) -> Table | None:
    if not s.lease_waits:
        return None
    waits = Table(
        title="Waits: writes that waited for a held file instead of a veto", title_justify="left"
    )
    for name in ("path", "waits", "outcomes", "waiting", "work kept", "cost kept"):
        waits.add_column(name, justify="left" if name in ("path", "outcomes") else "right")
    for w in s.lease_waits:
        for label, row in ((w.path, w), *((part_row_label(p.path), p) for p in w.parts)):
            outcomes = ", ".join(f"{n} {o}" for o, n in row.outcomes)
            kept_usd = f"~{cost_text(row.kept_usd, s.simulated)}"  # an estimate: see docs/decisions/0119-waiting-for-a-lease-instead-of-starting-over.md
            waits.add_row(
                label,
                str(row.waits),
                outcomes,
                seconds(row.waited_s),
                seconds(row.kept_s),
                kept_usd,
            )
    return waits


def _tasks_table(s: FleetStats) -> Table:
    landed = s.landing is not None  # a run before landing keeps its columns
    tasks = Table(title="Tasks", title_justify="left")
    columns = ("task", "status", "attempts", "vetoed", "waiting", "running", "cost")
    for name in columns + (("landed", "to land") if landed else ()):
        tasks.add_column(name, justify="left" if name in ("task", "status") else "right")
    for t in s.tasks:
        attempts = f"{t.attempts}" + (f" ({t.uncharged} uncharged)" if t.uncharged else "")
        row = [
            t.id,
            t.status,
            attempts,
            str(t.vetoed),
            seconds(t.waiting_s),
            seconds(t.running_s),
            f"${t.cost_usd:.4f}",
        ]
        if landed:
            row += [f"#{t.order}" if t.order is not None else "—", seconds(t.landing_s)]
        tasks.add_row(*row)
    return tasks
