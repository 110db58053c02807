"""A check command the graph file changed since the server last had it: the operator says yes first.

A green run means a green tree only while the checks are the operator's: a
graph file edited between runs (by a task before its file was protected, by a
task that wrote a new graph the operator then runs, or by anybody) could turn
`pytest -q` into `true`. So `run` and `load` compare the graph's checks with
the server's before anything is loaded. A change given on the command line
(`--check NAME=CMD`) is the operator's own yes. Any other is asked on a
terminal (`confirm`), naming the task whose write left the file as it is (the
server's ledger: `GET /checks?source=`); with no terminal the run is refused,
one line per change naming the check, both commands and the `--check` that
accepts it (docs/decisions/0151-the-checks-own-file-is-protected.md).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import typer

from codefleet.api.client import FleetClient

__all__ = [
    "ChangedCheck",
    "Confirm",
    "NotConfirmed",
    "changed_by_graph",
    "confirm_check_changes",
    "graph_key",
    "split_given",
    "terminal_confirm",
]

Confirm = Callable[[str], bool]  # asks the operator a yes/no question (a terminal's prompt)


class NotConfirmed(Exception):
    """A changed check the operator did not confirm; the message names each and the fix."""


@dataclass(frozen=True, slots=True)
class ChangedCheck:
    """A check whose command the graph file changes on the server."""

    name: str
    was: str
    now: str
    graph: str  # the file, as the operator knows it (its key in the tree, else its path)
    written_by: str | None = None  # the task whose write left the file as it is

    def line(self) -> str:
        by = f" (last written by task {self.written_by})" if self.written_by else ""
        return (
            f"check {self.name} changed in {self.graph}{by}: it was `{self.was}`, now `{self.now}`"
        )

    def refusal(self) -> str:
        return (
            f"{self.line()}; not applied. To apply it, run again with "
            f"--check {shlex.quote(f'{self.name}={self.now}')}; to keep the old one, restore "
            f"{self.graph}"
        )


def graph_key(path: Path, tree: Path) -> str | None:
    """The graph file's key in the tree (a relative POSIX path), or None outside it."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(tree))
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return Path(rel).as_posix()


def changed_by_graph(
    graph_checks: Mapping[str, str], given: Mapping[str, str], defined: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """(name, was, now) of each check whose command the graph changes and the command
    line does not give (`--check` wins over the graph, and is the operator's own)."""
    return [
        (name, defined[name], command)
        for name, command in sorted(graph_checks.items())
        if name not in given and name in defined and defined[name] != command
    ]


def split_given(
    graph_checks: Mapping[str, str], given: Mapping[str, str], defined: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The checks to define with the graph file (named as their source), and the command
    line's changes to checks the server has that the file does not make, defined apart: a
    change only the operator typed is never put down to the file or to its last writer
    (typing the file's own change is accepting it, and stays the file's)."""
    overrides = {
        n: c
        for n, c in given.items()
        if n in defined and defined[n] != c and graph_checks.get(n) != c
    }
    with_file = {**graph_checks, **given, **{n: defined[n] for n in overrides}}
    return with_file, overrides


async def confirm_check_changes(
    client: FleetClient,
    changes: list[tuple[str, str, str]],
    graph: str,
    source: str | None,
    confirm: Confirm | None,
) -> list[ChangedCheck]:
    """The changes, each confirmed by the operator, or `NotConfirmed` naming each change
    that was not (`confirm` None: no terminal, nobody can say yes, so none is)."""
    if not changes:
        return []
    by = await client.check_written_by(source) if source is not None else None
    found = [ChangedCheck(name, was, now, graph, by) for name, was, now in changes]
    refused = [c for c in found if confirm is None or not confirm(f"{c.line()}. Apply it?")]
    if refused:
        raise NotConfirmed("; ".join(c.refusal() for c in refused))
    return found


def terminal_confirm() -> Confirm | None:
    """A yes/no prompt on the terminal, or None when standard input is not one (CI, a pipe):
    a question nobody can answer is a refusal."""
    if not sys.stdin.isatty():
        return None
    return lambda question: typer.confirm(question, default=False, err=True)
