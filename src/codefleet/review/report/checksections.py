"""What tasks did to what the checks run, from the event log: deleted tests, changed checks.

A green check proves little about a tree whose tests a task deleted, or whose
check an edited graph file turned into `true`. Both are named in the run's
verdict (`ui.report.print_result`) and in `codefleet report`, from the same
two pure functions over events:

- `deleted_tests`: a test file (`is_test_path`) a task that succeeded deleted:
  its last recorded write of the path in its last attempt left no file (a
  `file_changed` with no content hash). A failed attempt's writes were
  rolled back, so only the attempt that landed counts.
- `check_changes`: a `check_defined` that replaced a command, with what it was,
  the file it came from and the task whose write left that file as it was.

The report's section (`checks_section`) shows the same lines over the whole
log; it is left out when nothing was weakened. Editing a test to match broken
code is not found here: it reads like any other edit (docs/security-checks.md, "Checks").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from codefleet.models import EventType
from codefleet.review.facts import RunFacts
from codefleet.review.report.reportblocks import Para, Section

__all__ = [
    "CheckChange",
    "check_changes",
    "checks_section",
    "deleted_tests",
    "is_test_path",
    "weakened_lines",
]

# A directory of tests, at any depth.
TEST_DIRS: Final = frozenset({"tests", "test", "__tests__", "testing"})
# A test file's own name, wherever it lies.
TEST_NAMES: Final = (
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*Test.java",
    "*_spec.rb",
)


def is_test_path(path: str) -> bool:
    """A file under a tests directory, or named like a test file (`test_*.py`, `*.test.ts`...)."""
    *dirs, name = path.split("/")
    return not TEST_DIRS.isdisjoint(dirs) or any(fnmatch.fnmatchcase(name, p) for p in TEST_NAMES)


def deleted_tests(
    events: Iterable[Mapping[str, Any]], succeeded: Collection[str]
) -> dict[str, list[str]]:
    """The test files each task of `succeeded` deleted in its last attempt, in order."""
    gone: dict[str, dict[str, bool]] = {}  # task -> path -> deleted by its last write
    for event in events:
        task_id = event.get("task_id")
        if not task_id or task_id not in succeeded:
            continue
        if event["type"] == EventType.TASK_STARTED:
            gone[task_id] = {}  # a new attempt: the last one's writes were rolled back
        elif event["type"] == EventType.FILE_CHANGED:
            body = event["payload"]
            if is_test_path(str(body["path"])):
                gone.setdefault(task_id, {})[str(body["path"])] = not body.get("sha256")
    named = {t: [p for p, deleted in paths.items() if deleted] for t, paths in gone.items()}
    return {t: paths for t, paths in sorted(named.items()) if paths}


@dataclass(frozen=True, slots=True)
class CheckChange:
    """A check whose command was replaced: by whom, if a task's write made its file so."""

    name: str
    was: str
    now: str
    source: str | None = None  # the graph file it was read from (a key in the tree)
    written_by: str | None = None  # the task whose write left that file as it was

    def line(self) -> str:
        where = ""
        if self.source is not None:
            who = f" last written by {self.written_by}" if self.written_by else ""
            where = f" ({self.source}{who})"
        return f"check {self.name} changed: `{self.was}` → `{self.now}`{where}"


def check_changes(events: Iterable[Mapping[str, Any]]) -> list[CheckChange]:
    """Every replaced check command, in the order the server took them."""
    return [
        CheckChange(
            str(body["name"]),
            str(body["was"]),
            str(body["command"]),
            body.get("source"),
            body.get("written_by"),
        )
        for event in events
        if event["type"] == EventType.CHECK_DEFINED and "was" in (body := event["payload"])
    ]


def weakened_lines(events: Iterable[Mapping[str, Any]], succeeded: Collection[str]) -> list[str]:
    """One line per task that deleted test files and per check changed (verdict and report)."""
    events = list(events)
    lines = [
        f"{task_id} deleted test file(s): {', '.join(paths)}"
        for task_id, paths in deleted_tests(events, succeeded).items()
    ]
    return lines + [change.line() for change in check_changes(events)]


def checks_section(facts: RunFacts) -> Section | None:
    """Tasks that deleted test files, and checks whose command was replaced."""
    succeeded = {str(t["id"]) for t in facts.record.tasks if t["status"] == "succeeded"}
    lines = weakened_lines(facts.record.events, succeeded)
    if not lines:
        return None
    blocks = tuple(Para(line, "warn") for line in lines)
    return Section("checks", "What the checks run", blocks, lines)
