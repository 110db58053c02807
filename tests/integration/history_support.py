"""A branch's history, checked commit by commit; and a pair of tasks that break a suite together.

`check_each_commit` writes each commit of `base..branch` (oldest first) into its
own directory with `git archive` (the person's repository, index and worktree
list are not touched) and runs a check there: the property "every commit on
the branch passes the check" is `failing(check_each_commit(...)) == []`.

`run_scripted` is the real `codefleet run --dry-run --script` process. The
rename-and-caller pair: `lib.py` has `greet` and its test; one task renames
it to `salute` with its test, another adds a caller of `greet` with a test.
Each passes `SUITE` alone; together they fail it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from git_support import checkout_to, git

SUITE = f'"{sys.executable}" -m pytest -q -p no:cacheprovider'
CHECK_TIMEOUT_S = 120

LIB = 'def greet(name):\n    return f"hello {name}"\n'
TEST_LIB = 'from lib import greet\n\n\ndef test_greet():\n    assert greet("a") == "hello a"\n'
RENAMED = LIB.replace("greet", "salute")
TEST_RENAMED = TEST_LIB.replace("greet", "salute")
WELCOME = 'from lib import greet\n\n\ndef welcome():\n    return greet("you")\n'
TEST_WELCOME = (
    'from welcome import welcome\n\n\ndef test_welcome():\n    assert welcome() == "hello you"\n'
)


def run_scripted(
    url: str, tree: Path, script: dict[str, Any], *extra: str, runners: int = 2
) -> Any:
    """The real `codefleet run --dry-run --script`, to the drain (give a script that waits
    on other tasks one runner per task, or the waiting ones hold every runner)."""
    path = tree.parent / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    return subprocess.run(
        [
            sys.executable, "-m", "codefleet.cli", "run", "--dry-run", "--script", str(path),
            "--runners", str(runners), "--server", url, "--workdir", str(tree),
            "--run-dir", str(tree.parent / "runs"), *extra,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )  # fmt: skip


def write_lib(tree: Path) -> None:
    """The tree before the pair: `greet` and its passing test."""
    (tree / "lib.py").write_text(LIB)
    (tree / "test_lib.py").write_text(TEST_LIB)


RENAME_STEPS = [
    {"write": {"path": "lib.py", "content": RENAMED}},
    {"write": {"path": "test_lib.py", "content": TEST_RENAMED}},
]
CALLER_STEPS = [
    {"write": {"path": "welcome.py", "content": WELCOME}},
    {"write": {"path": "test_welcome.py", "content": TEST_WELCOME}},
]


@dataclass(frozen=True, slots=True)
class CommitCheck:
    sha: str
    task: str  # its CodeFleet-Task trailer
    exit_code: int
    output: str

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def check_each_commit(
    tree: Path, branch: str, command: str, into: Path, base: str = "main"
) -> list[CommitCheck]:
    """`command` run on the files of every commit of `base..branch`, oldest first."""
    found = []
    for n, sha in enumerate(git(tree, "rev-list", "--reverse", f"{base}..{branch}").split()):
        files = checkout_to(tree, sha, into / f"{n:03d}-{sha[:10]}")
        ran = subprocess.run(
            command,
            shell=True,
            cwd=files,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
        body = git(tree, "log", "-1", "--format=%B", sha)
        task = next(
            (
                line.split(": ", 1)[1]
                for line in body.splitlines()
                if line.startswith("CodeFleet-Task: ")
            ),
            "",
        )
        found.append(CommitCheck(sha, task, ran.returncode, ran.stdout + ran.stderr))
    return found


def failing(checks: Iterable[CommitCheck]) -> list[str]:
    """The tasks whose commit fails the check, in branch order."""
    return [c.task for c in checks if not c.passed]
