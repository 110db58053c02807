"""One commit per succeeded task, built in a temporary index, checked against the tree.

`HistoryWriter` turns `TaskChange`s into commits on top of a parent: it loads
the parent's tree into a private index, applies the task's recorded patch to
that index (`git apply --cached`), writes the tree and the commit. A binary
file's patch carries no content, so its bytes are taken from the working
tree (see "Review: commits from recorded patches" in docs/decisions/0038-review-commits-from-recorded-patches.md).
A change git refuses is `Skipped` with git's reason, and so is every later
change to one of its paths (it builds on content the branch does not have):
the other tasks still commit ("Review: one uncommittable task is skipped").

`write_history` is `codefleet commit`: every change, then the loud checks
BEFORE the branch exists: the tip's tree must equal the working tree for
every path a committed task touched and no skipped task did (else `Refused`,
naming them). Then the branch is created with `update-ref` (only if it does
not exist yet), and the paths changed in the working tree that no task
touched are reported as left out.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from codefleet.models import from_iso
from codefleet.review.git import GitError, Repo
from codefleet.review.history import TaskChange, commit_message
from codefleet.rollback import quote_name

__all__ = [
    "Author",
    "CommitResult",
    "HistoryWriter",
    "Made",
    "Refused",
    "Skipped",
    "check_new_branch",
    "commit_env",
    "default_branch",
    "left_out",
    "mismatched_paths",
    "require_identity",
    "write_history",
]

BRANCH_PREFIX = "codefleet/"
_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]*?)\s*<(?P<email>[^<>\s]+)>\s*$")


class Refused(GitError):
    """The history was not made: `paths` (tree-relative) say where the record and tree disagree."""

    def __init__(self, message: str, paths: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


@dataclass(frozen=True, slots=True)
class Author:
    name: str
    email: str

    @classmethod
    def parse(cls, text: str) -> Author:
        """`Name <email>`, as `git commit --author` takes it."""
        found = _AUTHOR.match(text)
        if found is None or not found["name"]:
            raise ValueError(f"--author {text!r}: expected 'Name <email>'")
        return cls(found["name"], found["email"])


@dataclass(frozen=True, slots=True)
class Made:
    task_id: str
    sha: str
    subject: str
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A succeeded task whose change is not on the branch, and why."""

    task_id: str
    reason: str
    paths: tuple[str, ...]


class Uncommittable(GitError):
    """This one change cannot be committed (`reason`); the history goes on without it."""


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What `commit` (or a live run) made, and what the checks found."""

    branch: str
    base: str
    commits: tuple[Made, ...]
    empty: tuple[str, ...] = ()  # succeeded tasks whose change was empty: no commit
    left_out: tuple[str, ...] = ()  # changed in the tree, touched by no task: not committed
    mismatched: tuple[str, ...] = ()  # (live) the tree differs from the branch there
    error: str | None = None  # (live) why committing stopped
    uncommitted: tuple[str, ...] = ()  # (live) succeeded after committing stopped
    skipped: tuple[Skipped, ...] = ()  # succeeded, but their change could not be committed

    @property
    def tip(self) -> str:
        return self.commits[-1].sha if self.commits else self.base

    @property
    def ok(self) -> bool:
        """Every success is on the branch and the branch agrees with the tree."""
        return self.error is None and not self.mismatched and not self.skipped


def commit_env(author: Author | None, completed_at: str | None) -> dict[str, str]:
    """Git's author and committer variables for a commit by `author` (None: git's own), dated
    `completed_at` when given."""
    env: dict[str, str] = {}
    if completed_at:
        env["GIT_AUTHOR_DATE"] = f"@{int(from_iso(completed_at).timestamp())} +0000"
    if author is not None:
        env.update(
            GIT_AUTHOR_NAME=author.name,
            GIT_AUTHOR_EMAIL=author.email,
            GIT_COMMITTER_NAME=author.name,
            GIT_COMMITTER_EMAIL=author.email,
        )
    return env


class HistoryWriter:
    """Commits changes one after another on top of `parent`, in a private index."""

    def __init__(self, repo: Repo, index: Path, parent: str, author: Author | None) -> None:
        self.repo, self.index, self.parent, self.author = repo, index, parent, author
        self.tree = repo.tree_of(parent)
        self.skipped: list[Skipped] = []
        self._held_back: dict[str, str] = {}  # path -> the skipped task whose change it carries
        repo.read_tree(index, self.tree)

    @property
    def held_back(self) -> frozenset[str]:
        """Paths a skipped task changed: the branch does not have the tree's content there."""
        return frozenset(self._held_back)

    def add(self, change: TaskChange) -> Made | None:
        """Commit `change` on the current tip; None when it changes nothing.

        Raises `Uncommittable` (and records it in `skipped`) when it cannot be committed."""
        after = sorted(p for p in change.paths if p in self._held_back)
        if after:
            task = self._held_back[after[0]]
            self.skip(change, f"it changes {quote_name(after[0])} after {task}, which was skipped")
        try:
            self._stage(change)
        except GitError as err:
            self.repo.read_tree(self.index, self.tree)  # back to the tip, for the next task
            self.skip(change, f"git refused its recorded change: {err}")
        tree = self.repo.write_tree(self.index)
        if tree == self.tree:
            return None
        message = commit_message(change)
        sha = self.repo.commit_tree(
            tree, self.parent, message, commit_env(self.author, change.completed_at)
        )
        self.parent, self.tree = sha, tree
        return Made(change.task_id, sha, message.splitlines()[0], change.paths)

    def skip(self, change: TaskChange, reason: str) -> NoReturn:
        """Leave `change` out, and every later change to its paths; raises `Uncommittable`."""
        self.skipped.append(Skipped(change.task_id, reason, change.paths))
        for path in change.paths:
            self._held_back.setdefault(path, change.task_id)
        raise Uncommittable(f"{change.task_id} was not committed: {reason}")

    def _stage(self, change: TaskChange) -> None:
        text = "".join(f.diff for f in change.files if not f.binary)
        if text:
            self.repo.apply_cached(self.index, text)
        binary = [self.repo.repo_path(f.path) for f in change.files if f.binary]
        if binary:
            self.repo.stage_from_worktree(self.index, binary)


def mismatched_paths(repo: Repo, commit: str, paths: Iterable[str]) -> list[str]:
    """Tree paths whose content (or mode, or presence) differs between `commit` and the tree."""
    wanted = {repo.repo_path(p): p for p in paths}
    stored = repo.tree_entries(commit, wanted)
    actual = repo.worktree_entries(wanted)
    modes = repo.tracks_file_mode()
    differ = []
    for rpath, tree_path in wanted.items():
        have, want = stored.get(rpath), actual.get(rpath)
        same = (have is None) == (want is None) and (
            have is None
            or want is None
            or (have.sha == want.sha and (have.mode == want.mode or not modes))
        )
        if not same:
            differ.append(tree_path)
    return sorted(differ)


def left_out(repo: Repo, base: str, touched: Iterable[str]) -> list[str]:
    """Tree paths changed in the working tree since `base` that no task touched."""
    skip = set(touched)
    prefix = len(repo.prefix)
    return [p[prefix:] for p in repo.changed_since(repo.tree_of(base)) if p[prefix:] not in skip]


def default_branch(repo: Repo, stamp: str | None = None) -> str:
    """`codefleet/<date-time>`, with `-2`, `-3`... if that branch exists already."""
    name = BRANCH_PREFIX + (stamp or time.strftime("%Y%m%d-%H%M%S"))
    candidate, n = name, 1
    while repo.branch_exists(candidate):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def check_new_branch(repo: Repo, name: str) -> None:
    repo.check_branch_name(name)
    if repo.branch_exists(name):
        raise GitError(f"branch {name!r} exists already: pick another with --branch")


def require_identity(repo: Repo, author: Author | None) -> None:
    if author is None and not repo.has_identity():
        raise GitError(
            "git does not know who is committing: set `git config user.name` and "
            "`git config user.email`, or pass --author 'Name <email>'"
        )


def _shared_binaries(changes: Sequence[TaskChange]) -> dict[str, str]:
    """Binary path -> why no task that changed it can be committed (two or more did)."""
    counts = Counter(f.path for c in changes for f in c.files if f.binary)
    return {
        p: f"the binary file {quote_name(p)} was changed by {n} tasks and its patches carry no "
        "content, so which bytes each task wrote is not known"
        for p, n in sorted(counts.items())
        if n > 1
    }


def _commit_all(
    writer: HistoryWriter, changes: Sequence[TaskChange]
) -> tuple[list[Made], list[str]]:
    """Every change on the writer's tip, in order: (commits made, tasks with an empty change)."""
    shared = _shared_binaries(changes)
    made: list[Made] = []
    empty: list[str] = []
    for change in changes:
        with contextlib.suppress(Uncommittable):  # recorded in `writer.skipped`
            reasons = [shared[f.path] for f in change.files if f.path in shared]
            if reasons:
                writer.skip(change, reasons[0])
            commit = writer.add(change)
            if commit is None:
                empty.append(change.task_id)
            else:
                made.append(commit)
    return made, empty


def write_history(
    repo: Repo, changes: Sequence[TaskChange], branch: str, base: str, author: Author | None
) -> CommitResult:
    """Commit every change on a new `branch` from `base`, or refuse and create nothing.

    A change that cannot be committed is skipped (`CommitResult.skipped`), not the run."""
    check_new_branch(repo, branch)
    require_identity(repo, author)
    with repo.temp_index() as index:
        writer = HistoryWriter(repo, index, base, author)
        made, empty = _commit_all(writer, changes)
        tip = writer.parent
    touched = sorted({p for c in changes for p in c.paths})
    differ = mismatched_paths(repo, tip, [p for p in touched if p not in writer.held_back])
    if differ:
        raise Refused(
            "the working tree differs from the tasks' recorded changes: edited outside the lock "
            "(or uncommitted before the run). Nothing was committed",
            differ,
        )
    if made:
        repo.update_branch(branch, tip, None)
    return CommitResult(
        branch,
        base,
        tuple(made),
        tuple(empty),
        tuple(left_out(repo, base, touched)),
        skipped=tuple(writer.skipped),
    )
