"""`codefleet land`: move the checked-out branch to a fleet branch whose work is already in the tree.

After `codefleet commit` the working tree already holds every change of the
branch, so `git merge --ff-only` refuses (it would overwrite those files).
`land` is a fast-forward without the checkout: when HEAD is an ancestor of
the branch's tip (it is the branch's base, or older) and every path that
differs between HEAD and the tip is in the working tree exactly as at the tip
(and staged as HEAD or as the tip, nothing else), HEAD's branch is moved to
the tip with `update-ref` (guarded by its old value) and the index entries of
those paths are set to the tip's, then refreshed. The working tree is never
written, so `git status` is clean for those paths. Anything else is refused
with what differs; nothing changes then. See "Landing a fleet branch" in
docs/decisions/0090-landing-a-fleet-branch.md.

`fetch_line` brings the server's landed line (`review.landedline`: every landed task,
one commit each) into the repository as the branch `codefleet/landed`, for `land` to
fast-forward to like any fleet branch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codefleet.review.commit import BRANCH_PREFIX, mismatched_paths
from codefleet.review.git import ZERO_SHA, Entry, GitError, Repo
from codefleet.review.landedline import BRANCH as LINE_BRANCH

__all__ = ["LINE_LOCAL", "FastForward", "NoFastForward", "fetch_line", "land", "newest_branch"]

LINE_LOCAL = f"{BRANCH_PREFIX}{LINE_BRANCH}"  # where `fetch_line` puts the landed line

_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
_REFUSED = "cannot land {} on {}; nothing was changed"


class NoFastForward(GitError):
    """The fast-forward was refused; `reasons` say what differs, one line each, and
    `shown_by` the git command that shows it ("" when none does). Nothing was changed."""

    def __init__(self, message: str, reasons: Sequence[str] = (), shown_by: str = "") -> None:
        super().__init__(message)
        self.reasons = tuple(reasons)
        self.shown_by = shown_by


@dataclass(frozen=True, slots=True)
class FastForward:
    """What `land` did: `onto` (the moved branch, or HEAD when detached) went `old` → `new`."""

    branch: str
    onto: str
    old: str
    new: str
    paths: tuple[str, ...]  # repository paths whose index entries are now the tip's

    @property
    def moved(self) -> bool:
        return self.old != self.new


def newest_branch(repo: Repo) -> str:
    """The `codefleet/` branch with the newest tip commit; `GitError` when there is none."""
    refs = repo.run(
        "for-each-ref",
        "--sort=-refname",
        "--sort=-committerdate",
        "--format=%(refname)",
        f"refs/heads/{BRANCH_PREFIX}",
    ).split()
    if not refs:
        raise GitError(f"no {BRANCH_PREFIX} branch in {repo.top}: run `codefleet commit` first")
    return refs[0].removeprefix("refs/heads/")


def fetch_line(repo: Repo, line: Path) -> str:
    """Fetch the landed line at `line` (a `.codefleet/landed.git`) into `LINE_LOCAL`; its name.

    Only forward: a line that was started again (it does not contain the branch's tip) is
    refused by git, naming the branch."""
    if not (line / "HEAD").is_file():
        raise GitError(
            f"no landed line at {line}: a server keeps one while it serves a git repository"
        )
    repo.run(
        "fetch",
        "--quiet",
        "--no-tags",
        str(line),
        f"refs/heads/{LINE_BRANCH}:refs/heads/{LINE_LOCAL}",
    )
    return LINE_LOCAL


def land(repo: Repo, branch: str | None = None) -> FastForward:
    """Fast-forward HEAD's branch to `branch` (default: `newest_branch`) without a checkout."""
    name = branch or newest_branch(repo)
    if not repo.branch_exists(name):
        raise GitError(f"no branch {name!r} in {repo.top}")
    tip = repo.resolve_commit(f"refs/heads/{name}")
    head = repo.resolve_commit("HEAD")
    onto = _checked_out(repo)
    if onto == name:
        raise GitError(f"{name} is the checked-out branch: check out the branch to land it on")
    if head == tip or _is_ancestor(repo, tip, head):
        return FastForward(name, onto, head, head, ())
    if not _is_ancestor(repo, head, tip):
        raise NoFastForward(_REFUSED.format(name, onto), [_moved(repo, head, tip, name)])
    paths = _touched(repo, head, tip)
    differ = mismatched_paths(Repo(repo.top, ""), tip, paths)
    reasons = _tree_differs(repo, tip, differ) + _index_differs(repo, head, tip, paths)
    if reasons:
        shown = " ".join(f"':/{p}'" for p in differ)  # `:/`: from the top, wherever it is run
        shown_by = f"git diff {name} -- {shown}" if differ else f"git diff --cached {name}"
        raise NoFastForward(_REFUSED.format(name, onto), reasons, shown_by)
    repo.run("update-ref", "-m", f"codefleet land {name}", "HEAD", tip, head)
    _stage(repo, tip, paths)
    return FastForward(name, onto, head, tip, tuple(paths))


def _checked_out(repo: Repo) -> str:
    """The checked-out branch's name, or `HEAD` when it is detached."""
    with contextlib.suppress(GitError):
        return repo.run("symbolic-ref", "--quiet", "--short", "HEAD").strip()
    return "HEAD"


def _is_ancestor(repo: Repo, older: str, newer: str) -> bool:
    try:
        repo.run("merge-base", "--is-ancestor", older, newer)
    except GitError:
        return False
    return True


def _moved(repo: Repo, head: str, tip: str, name: str) -> str:
    try:
        base = repo.run("merge-base", head, tip).strip()[:7]
    except GitError:
        base = "no common commit"
    return (
        f"HEAD moved: it is at {head[:7]}, which {name} does not contain (they part at {base}); "
        f"land needs HEAD where the branch starts: merge or rebase the branch with git instead"
    )


def _touched(repo: Repo, head: str, tip: str) -> list[str]:
    """Repository paths that differ between `head` and `tip`."""
    out = repo.run("diff-tree", "-r", "-z", "--no-renames", "--name-only", head, tip)
    return sorted(p for p in out.split("\0") if p)


def _tree_differs(repo: Repo, tip: str, differ: Sequence[str]) -> list[str]:
    """One line per path of `differ` (its working-tree state is not the tip's): how."""
    whole = Repo(repo.top, "")
    stored = whole.tree_entries(tip, differ)
    actual = whole.worktree_entries(differ)
    return [_difference(p, stored.get(p), actual.get(p)) for p in differ]


def _difference(path: str, stored: Entry | None, actual: Entry | None) -> str:
    if actual is None:
        return f"{path}: missing from the working tree (the branch has it)"
    if stored is None:
        return f"{path}: in the working tree, but the branch deletes it"
    if stored.sha != actual.sha:
        return f"{path}: the working tree's content differs from the branch's"
    return f"{path}: mode {actual.mode} in the working tree, {stored.mode} on the branch"


def _index_differs(repo: Repo, head: str, tip: str, paths: Sequence[str]) -> list[str]:
    """One line per path whose index entry is neither HEAD's nor the tip's (or is unmerged)."""
    if not paths:
        return []
    staged: dict[str, Entry | None] = dict.fromkeys(paths)
    listed = repo.run("ls-files", "--stage", "-z", "--full-name", "--", *paths, env=_LITERAL)
    reasons = []
    for line in filter(None, listed.split("\0")):
        meta, _, path = line.partition("\t")
        mode, sha, stage = meta.split(" ")
        if stage != "0":
            reasons.append(f"{path}: unmerged in the index (resolve the conflict first)")
        staged[path] = Entry(mode, sha)
    before, after = repo.tree_entries(head, paths), repo.tree_entries(tip, paths)
    reasons += [
        f"{p}: staged with content that is neither HEAD's nor the branch's"
        for p in paths
        if staged[p] not in (before.get(p), after.get(p))
    ]
    return reasons


def _stage(repo: Repo, tip: str, paths: Sequence[str]) -> None:
    """Set the person's index entries of `paths` to the tip's, then refresh their stat data."""
    entries = repo.tree_entries(tip, paths)
    lines = [
        f"{e.mode} {e.sha}\t{p}" if (e := entries.get(p)) else f"0 {ZERO_SHA}\t{p}" for p in paths
    ]
    stdin = "".join(f"{line}\0" for line in lines).encode(errors="surrogateescape")
    repo.run("update-index", "-z", "--index-info", stdin=stdin)
    with contextlib.suppress(GitError):  # exits 1 while other files are modified: not ours
        repo.run("update-index", "-q", "--refresh")
