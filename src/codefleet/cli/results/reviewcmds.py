"""Review commands: `commit` (one commit per succeeded task), `land`, `report` (the run's page).

`commit` and `report` read the run through the server's wire API
(`review.fetch.fetch_record`); neither opens the database. `commit` writes only
git objects and one new branch: never the working tree, the person's index or
the checked-out branch. `land` needs no server: it moves the checked-out
branch to the fleet's branch and its index entries with it (`review.land`).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from codefleet.review.commit import Author, Refused, default_branch, write_history
from codefleet.review.commitview import history_json, print_history
from codefleet.review.fetch import fetch_record
from codefleet.review.git import GitError, Repo
from codefleet.review.history import (
    NO_PATCHES,
    commits_of_tasks,
    committed_before,
    planned_changes,
    unfinished_tasks,
    wrote_without_patch,
)
from codefleet.review.land import NoFastForward, fetch_line
from codefleet.review.land import land as land_branch
from codefleet.review.landedline import line_dir
from codefleet.review.live import open_committer
from codefleet.review.report.reportrender import render_html, render_markdown
from codefleet.review.report.runreport import build_report, report_json
from codefleet.rollback import quote_name
from codefleet.statedir import tree_root

if TYPE_CHECKING:
    from codefleet.config import Settings
    from codefleet.review.commit import CommitResult
    from codefleet.review.history import TaskChange
    from codefleet.review.live import LiveCommitter
    from codefleet.review.runrecord import RunRecord

__all__ = [
    "AuthorOpt",
    "BranchOpt",
    "CommitOpt",
    "commit",
    "committer_for",
    "land",
    "parse_author",
    "report",
]

BranchOpt = Annotated[
    str | None,
    typer.Option("--branch", help="Branch to create (default: codefleet/<date-time>)."),
]
AuthorOpt = Annotated[
    str | None,
    typer.Option(
        "--author", help="Author and committer 'Name <email>' (default: git's user.name/email)."
    ),
]
CommitOpt = Annotated[
    bool,
    typer.Option(
        "--commit/--no-commit",
        help="Commit each task on a new branch the moment it succeeds (the tree must be a "
        "git repository; your working tree, index and HEAD are not touched).",
    ),
]
TreeOpt = Annotated[
    Path | None,
    typer.Option("--workdir", help="The working tree (default: the server's tree)."),
]


def parse_author(text: str | None) -> Author | None:
    if text is None:
        return None
    try:
        return Author.parse(text)
    except ValueError as err:
        raise fail(str(err)) from None


def committer_for(tree: Path, branch: str | None, author: str | None = None) -> LiveCommitter:
    """The live committer of `run --commit`, or a clear error before anything runs."""
    try:
        return open_committer(tree, branch, parse_author(author))
    except GitError as err:
        raise fail(f"--commit: {err}") from None


def _refuse_without_patches(settings: Any, record: RunRecord) -> None:
    """Every succeeded task has an empty patch: fail if that is because none were recorded."""
    for task_id, patch in record.patches.items():
        detail = call_server(settings, lambda c, i=task_id: c.task(i))
        if wrote_without_patch(detail, patch):
            raise fail(NO_PATCHES)


IN_HEAD = "(committed by an earlier `codefleet commit` and landed; not repeated)"


def _split_landed(
    repo: Repo, base: str, record: RunRecord, changes: list[TaskChange]
) -> tuple[list[TaskChange], list[str]]:
    """The changes still to commit, and the tasks whose recorded commit `base` contains."""
    commits = commits_of_tasks(record)
    landed = {
        c.task_id
        for c in changes
        if any(repo.contains(base, s) for s in commits.get(c.task_id, []))
    }
    return [c for c in changes if c.task_id not in landed], sorted(landed)


@app.command(rich_help_panel=REVIEW)
def commit(
    branch: BranchOpt = None,
    onto: Annotated[
        str | None, typer.Option("--onto", help="Start the branch at this commit (default: HEAD).")
    ] = None,
    author: AuthorOpt = None,
    workdir: TreeOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """One commit per succeeded task, in the order they succeeded, on a new branch.

    Built with git plumbing in a temporary index: your working tree, your index and
    your checked-out branch stay exactly as they are. Refuses (and names the paths)
    when the tree differs from the tasks' recorded changes. A task git cannot commit
    is skipped with its reason while the others commit; the exit status is then 1.
    """
    settings = settings_from(server_url=server, token=token)
    who = parse_author(author)
    record = call_server(settings, fetch_record)
    made = _write_commits(settings, record, workdir or Path(record.workdir), branch, onto, who)
    if made is not None:
        _say_commits(settings, record, made, json_out)


def _write_commits(
    settings: Settings,
    record: RunRecord,
    tree: Path,
    branch: str | None,
    onto: str | None,
    who: Author | None,
) -> tuple[CommitResult, str, list[str]] | None:
    """`commit`'s git side: the history written, its log and the tasks already in HEAD;
    None (said) when every succeeded task is in HEAD already."""
    changes = planned_changes(record)
    try:
        repo = Repo.open(tree)
        base = repo.resolve_commit(onto or "HEAD")
        name = branch or default_branch(repo)
        if not changes:
            raise fail("no task has succeeded on this server yet: nothing to commit")
        if not any(c.files for c in changes):
            _refuse_without_patches(settings, record)
        changes, in_head = _split_landed(repo, base, record, changes)
        if not changes:
            console.print(f"nothing new to commit: {', '.join(in_head)} {IN_HEAD}")
            return None
        result = write_history(repo, changes, name, base, who)
        log = repo.log_oneline(base, result.tip)
    except Refused as err:
        raise fail(f"{err}:\n  " + "\n  ".join(quote_name(p) for p in err.paths)) from None
    except GitError as err:
        raise fail(str(err)) from None
    return result, log, in_head


def _say_commits(
    settings: Settings,
    record: RunRecord,
    made: tuple[CommitResult, str, list[str]],
    json_out: bool,
) -> None:
    """Record the commits on the server and print them; exit 1 when a task was skipped."""
    result, log, in_head = made
    if result.commits:
        pairs = [(c.task_id, c.sha) for c in result.commits]
        call_server(settings, lambda c: c.record_commits(result.branch, pairs))
    unfinished, before = unfinished_tasks(record), committed_before(record)
    if json_out:
        print_json({**history_json(result, unfinished, before), "in_head": in_head})
    else:
        print_history(console, result, log, unfinished, before)
        if in_head:
            console.print(f"already in HEAD: {', '.join(in_head)} {IN_HEAD}", style="dim")
    if result.skipped:
        raise typer.Exit(1)


@app.command(rich_help_panel=REVIEW)
def land(
    branch: Annotated[
        str | None,
        typer.Argument(
            metavar="BRANCH", help="The branch to land (default: the newest codefleet/ branch)."
        ),
    ] = None,
    workdir: Annotated[
        Path,
        typer.Option(
            "--workdir", show_default=False, help="A directory of the repository (default: here)."
        ),
    ] = Path(),
    line: Annotated[
        bool,
        typer.Option(
            "--line",
            help="Land the server's landed line instead (every landed task, one commit each, "
            "kept in .codefleet/landed.git): fetched as codefleet/landed first.",
        ),
    ] = False,
) -> None:
    """Move the checked-out branch to BRANCH (or --line), whose changes are in the working tree.

    What git merge --ff-only refuses after commit: when HEAD is the branch's base and every
    file the branch changes is in the working tree exactly as committed, the checked-out
    branch moves to the branch's tip and the index with it; the working tree is not written,
    so git status is clean for those files. Otherwise it refuses, says what differs (HEAD
    moved, a file differs) and changes nothing.
    """
    if line and branch is not None:
        raise fail("give BRANCH or --line, not both")
    try:
        repo = Repo.open(workdir)
        if line:
            branch = fetch_line(repo, line_dir(tree_root(workdir)[0]))
        landed = land_branch(repo, branch)
        log = repo.log_oneline(landed.old, landed.new) if landed.moved else ""
    except NoFastForward as err:
        shown = f"\n  shown by: {err.shown_by}" if err.shown_by else ""
        raise fail(f"{err}:\n  " + "\n  ".join(err.reasons) + shown) from None
    except GitError as err:
        raise fail(str(err)) from None
    if not landed.moved:
        console.print(f"{landed.branch} is already landed: {landed.onto} contains it")
        return
    console.print(
        f"landed {landed.branch} on {landed.onto}: {landed.old[:7]} → {landed.new[:7]} · "
        f"{len(landed.paths)} file(s) staged as committed, the working tree untouched",
        markup=False,
        highlight=False,
    )
    console.print(log.rstrip(), markup=False, highlight=False)


class ReportFormat(StrEnum):
    MD = "md"
    HTML = "html"
    JSON = "json"


def _format_for(given: ReportFormat | None, output: Path | None) -> ReportFormat:
    if given is not None:
        return given
    suffix = output.suffix.lower() if output else ""
    return {".html": ReportFormat.HTML, ".htm": ReportFormat.HTML, ".json": ReportFormat.JSON}.get(
        suffix, ReportFormat.MD
    )


@app.command(rich_help_panel=REVIEW)
def report(
    format_: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="md (pastes into a pull request), html (one self-contained file) or json "
            "(default: from -o's suffix, else md).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """The run on one page: verdict, timing, tasks, vetoes, rollbacks, failed verifies, cost, branch."""
    settings = settings_from(server_url=server, token=token)
    made = build_report(call_server(settings, fetch_record))
    kind = _format_for(format_, output)
    if kind is ReportFormat.HTML:
        text = render_html(made)
    elif kind is ReportFormat.JSON:
        text = json.dumps(report_json(made), indent=2, default=str) + "\n"
    else:
        text = render_markdown(made)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise fail(f"cannot write {output}: {err.strerror or err}") from None
    console.print(f"report ({kind.value}, verdict {made.verdict}) written to {output}")
