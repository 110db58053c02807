"""The landed line: each task that lands is one commit, on a line the server owns.

The server keeps the landed result as git history in a bare repository of its
own, `.codefleet/landed.git`, whose branch `landed` gains one commit per task in
the order tasks land (`task_succeeded`), made from the task's recorded patch as
`codefleet commit` makes it (`HistoryWriter`). The repository borrows the tree's
objects (`objects/info/alternates`), so it stores only what the fleet made, and
nothing is written to the tree's own repository. The server serves it read-only
over git's smart HTTP (`server.gitbackend`): runners and people fetch it with
plain git.

The line starts from the tree as it was at a moment no task held a lease: the
tree's HEAD, plus one commit of what differed from HEAD then (uncommitted and
untracked files), so each landed patch applies to the content it was made from.
The event the line started after and the last event it handled are kept in the
repository's config (`codefleet.since`, `codefleet.cursor`); the branch moves
with a compare-and-swap. A restart goes on from the cursor, and a task already
on the line (its `CodeFleet-Task` trailer) is never committed twice
(docs/decisions/0147-the-landed-line-is-a-bare-repository-served-by-git.md).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.review.commit import Author, HistoryWriter, Made, Uncommittable, commit_env
from codefleet.review.git import GitError, NotARepository, Repo
from codefleet.review.history import TaskChange
from codefleet.review.indexdir import IndexDir
from codefleet.statedir import STATE_DIR

__all__ = ["BRANCH", "LINE_DIR", "LandedLine", "LineStart", "line_dir"]

LINE_DIR: Final = "landed.git"
BRANCH: Final = "landed"
REF: Final = f"refs/heads/{BRANCH}"
FALLBACK_AUTHOR: Final = Author("CodeFleet", "codefleet@localhost")
# The line is served read-only (`server.gitbackend`): fetched, never pushed to.
SERVE_READ_ONLY: Final = "[http]\n\treceivepack = false\n\tuploadpack = true\n"
START_MESSAGE: Final = (
    "CodeFleet: the tree as the landed line found it\n\n"
    "Files that differed from HEAD (uncommitted or untracked) when the line started.\n"
)


def line_dir(tree: Path) -> Path:
    """Where the tree's landed line lives."""
    return tree / STATE_DIR / LINE_DIR


@dataclass(frozen=True, slots=True)
class LineStart:
    """A base made for a new line, not yet its branch: `LandedLine.begin` makes it so."""

    base: str
    since: int


class LandedLine:
    """The line of one tree: its bare repository, its branch and where it is in the log."""

    def __init__(self, repo: Repo, author: Author, fresh: bool = False) -> None:
        """`fresh`: its repository was just made (no branch, nothing kept): nothing to read."""
        self.repo = repo  # the line's refs and objects; the working tree is the tree
        self.author = author
        self.skipped: list[str] = []  # "T3: why" for each landed task not on the line
        self.tip = None if fresh else self._head()  # None until the line starts; kept up to date
        kept = {} if fresh else self._config()
        self.cursor = int(kept.get("codefleet.cursor") or 0)  # the last event passed
        self.base = kept.get("codefleet.base", "")  # the line's first commit
        self._on_line: set[str] | None = None  # its tasks, read once when first needed
        self._tmp: IndexDir | None = None
        self._writer: HistoryWriter | None = None

    # -- opening and starting -----------------------------------------------------------

    @classmethod
    def open(cls, tree: Path) -> LandedLine:
        """The tree's line repository (made when absent); `NotARepository` says why not."""
        person = Repo.open(tree)
        place = line_dir(tree)
        _refuse_link(place)
        fresh = not (place / "HEAD").is_file()
        if fresh:
            _init_bare(person, place)
        line = Repo(person.top, person.prefix, person.object_format, git_dir=place)
        return cls(line, _identity(person), fresh)

    @property
    def place(self) -> Path:
        """The line's bare repository."""
        assert self.repo.git_dir is not None
        return self.repo.git_dir

    @property
    def started(self) -> bool:
        return self.tip is not None

    def prepare(self, since: int) -> LineStart:
        """A base for the line from the tree as it is now: HEAD, plus what differs from it."""
        person = Repo(self.repo.top, self.repo.prefix, self.repo.object_format)
        head = person.resolve_commit("HEAD")
        changed = person.changed_since(person.tree_of(head))
        if not changed:
            return LineStart(head, since)
        listed = "".join(f"{path}\0" for path in changed).encode(errors="surrogateescape")
        with self.repo.temp_index() as index:
            self.repo.read_tree(index, self.repo.tree_of(head))
            # one git hashes every file (however many are untracked), into the line's store
            self.repo.run(
                "update-index", "--add", "--remove", "-z", "--stdin", stdin=listed, index=index
            )
            tree = self.repo.write_tree(index)
        base = self.repo.commit_tree(tree, head, START_MESSAGE, commit_env(self.author, None))
        return LineStart(base, since)

    def begin(self, start: LineStart) -> None:
        """Make `start` the line's first commit (only if the line has none yet)."""
        self._set("codefleet.base", start.base)
        self._set("codefleet.since", str(start.since))
        self._set("codefleet.cursor", str(start.since))
        self.repo.run("update-ref", "-m", "codefleet: the line starts", REF, start.base, "0" * 40)
        self.tip, self.base, self.cursor = start.base, start.base, start.since

    # -- reading ------------------------------------------------------------------------

    def _head(self) -> str | None:
        try:
            return self.repo.run("rev-parse", "--verify", "--quiet", f"{REF}^{{commit}}").strip()
        except GitError:
            return None

    def tasks(self) -> list[str]:
        """The tasks on the line, oldest first (their `CodeFleet-Task` trailers)."""
        out = self.repo.run(
            "log", "--reverse", "--format=%(trailers:key=CodeFleet-Task,valueonly)", REF
        )
        return [line.strip() for line in out.splitlines() if line.strip()]

    # -- moving on ----------------------------------------------------------------------

    def append(self, change: TaskChange) -> Made | None:
        """Commit a landed task on the line, once (a task already on it is passed over)."""
        old = self.tip
        if old is None:
            raise GitError("the landed line has not started")
        if self._on_line is None:
            self._on_line = set(self.tasks())
        if change.task_id in self._on_line:
            return None
        made = self._commit(change, old)
        self._on_line.add(change.task_id)
        return made

    def push(self, remote: str) -> None:
        """Push the line's branch to `remote` (forced: a line started again has a new base)."""
        self.repo.run("push", "--quiet", remote, f"+{REF}:{REF}", env={"GIT_TERMINAL_PROMPT": "0"})

    def pass_event(self, event_id: int) -> None:
        """Move the cursor past `event_id`: a restart reads the log again from there (a task
        it meets again is already on the line, and passed over)."""
        self._set("codefleet.cursor", str(event_id))
        self.cursor = event_id

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.close()
            self._tmp = None
            self._writer = None

    def _commit(self, change: TaskChange, old: str) -> Made | None:
        writer = self._writer_at(old)
        try:
            made = writer.add(change)
        except Uncommittable as err:
            self.skipped.append(f"{change.task_id}: {err}")
            return None
        if made is not None:
            message = f"codefleet: {change.task_id} landed"
            self.repo.run("update-ref", "-m", message, REF, made.sha, old)
            self.tip = made.sha
        return made

    def _writer_at(self, tip: str) -> HistoryWriter:
        """One writer while the branch is where it left it; a new one when it moved."""
        if self._writer is None or self._writer.parent != tip:
            self.close()
            self._tmp = IndexDir()
            self._writer = HistoryWriter(self.repo, self._tmp.index, tip, self.author)
        return self._writer

    def _config(self) -> dict[str, str]:
        """What the line keeps in its repository's config (`codefleet.*`), read at once."""
        try:
            out = self.repo.run("config", "--get-regexp", r"^codefleet\.")
        except GitError:  # none yet
            return {}
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def _set(self, key: str, value: str) -> None:
        self.repo.run("config", key, value)


def _refuse_link(place: Path) -> None:
    """The line's directory is ours: never a link to somewhere else."""
    for path in (place.parent, place):
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise NotARepository(
                f"{path} is not a directory of CodeFleet's own (a link or a file): remove it"
            )


def _init_bare(person: Repo, place: Path) -> None:
    """A bare repository that borrows the tree's objects and refuses pushes."""
    objects = Path(person.run("rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    fresh = place.with_name(f".{LINE_DIR}.new-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    init = ["git", "init", "--quiet", "--bare", f"--initial-branch={BRANCH}"]  # a clone
    done = subprocess.run(  # checks the line out
        [*init, f"--object-format={person.object_format}", str(fresh)],
        capture_output=True,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    if done.returncode != 0:
        raise GitError(f"git init: {done.stderr.decode(errors='replace').strip()}")
    (fresh / "objects" / "info" / "alternates").write_text(f"{objects / 'objects'}\n")
    with (fresh / "config").open("a") as config:  # as `git config` adds them to a new file
        config.write(SERVE_READ_ONLY)
    fresh.rename(place)  # whole or not at all


def _identity(person: Repo) -> Author:
    """Who commits on the line: the tree's own identity, else CodeFleet's (one git reads both;
    the last value of each wins, as `git config user.name` answers)."""
    try:
        out = person.run("config", "--get-regexp", r"^user\.(name|email)$")
    except GitError:
        return FALLBACK_AUTHOR
    found = dict(line.partition(" ")[::2] for line in out.splitlines())
    name, email = found.get("user.name", "").strip(), found.get("user.email", "").strip()
    return Author(name, email) if name and email else FALLBACK_AUTHOR
