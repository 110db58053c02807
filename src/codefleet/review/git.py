"""The `git` binary, plumbing only: build commits without touching the person's checkout.

Everything that writes goes through a temporary index (`GIT_INDEX_FILE` in an
`IndexDir`) and the object database: `read-tree`, `apply --cached`,
`hash-object`, `update-index`, `write-tree`, `commit-tree`, and finally
`update-ref` for the one branch being made. No command here writes the
working tree, the person's index (`.git/index`) or `HEAD`; read commands run
with `GIT_OPTIONAL_LOCKS=0` so not even a stat refresh of the person's index
happens. Git's own variables inherited from a calling hook (`GIT_DIR`,
`GIT_INDEX_FILE`, ...) are dropped, so the repository is the tree's own.

Paths handed in and out are repository paths (relative to the top level,
POSIX). A tree that is a subdirectory of a repository has a `prefix`. No
path is ever handed to git on a line of its own that git might unquote:
lists go NUL-separated (`-z`), and a working-tree file is read here and its
bytes handed to `hash-object --stdin`. `worktree_entries` hashes in Python
(`blob_id`), so the check against the tree shares no code with the writing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codefleet.review.indexdir import IndexDir

__all__ = ["Entry", "GitError", "NotARepository", "Repo", "blob_id", "read_entry"]

ZERO_SHA = "0" * 40
_DROPPED_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_DATE",
)


class GitError(Exception):
    """A git command failed; the message is git's own, with the command."""


class NotARepository(GitError):
    """The tree is not inside a git repository (or git is not installed)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One file as git stores it: mode (`100644`, `100755`, `120000`) and blob id."""

    mode: str
    sha: str


def blob_id(content: bytes, object_format: str = "sha1") -> str:
    """The id git gives a blob of `content` (no filters): the hash of `blob <size>\\0` + content."""
    return hashlib.new(object_format, b"blob %d\0" % len(content) + content).hexdigest()


def read_entry(path: Path) -> tuple[str, bytes] | None:
    """The git mode and bytes of `path` as it is (a symlink: `120000` and its target); None
    when it is absent or neither a file nor a symlink."""
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return "120000", os.readlink(os.fsencode(path))
        if stat.S_ISREG(info.st_mode):
            return ("100755" if info.st_mode & stat.S_IXUSR else "100644"), path.read_bytes()
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise GitError(f"cannot read {path}: {err.strerror or err}") from None
    return None


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    return env


@dataclass(frozen=True, slots=True)
class Repo:
    top: Path  # the repository's working tree root
    prefix: str  # where the shared tree sits inside it: "" or "sub/dir/"
    object_format: str = "sha1"  # or "sha256": how blob ids are computed
    git_dir: Path | None = None  # another repository's refs and objects (the landed line's)

    @classmethod
    def open(cls, tree: Path) -> Repo:
        """The repository holding `tree`; `NotARepository` with a clear reason otherwise."""
        if shutil.which("git") is None:
            raise NotARepository("git is not installed (install it to commit the fleet's work)")
        if not tree.is_dir():
            raise NotARepository(f"{tree} is not a directory")
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--show-object-format", "--show-prefix"],
            cwd=tree,
            capture_output=True,
            env=_base_env(),
            check=False,
        )
        if done.returncode != 0:
            raise NotARepository(
                f"{tree} is not in a git repository: run `git init` and commit its current "
                "state first, so the fleet's work has a commit to start from"
            )
        top, found, prefix = ([*done.stdout.decode().splitlines(), "", ""])[:3]
        return cls(Path(top), prefix, found if found in ("sha1", "sha256") else "sha1")

    # -- running git ----------------------------------------------------------------------

    def run(
        self,
        *args: str,
        stdin: bytes | None = None,
        index: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run `git args...` at the top level; its stdout, or `GitError` with its stderr."""
        full = self._env()
        if index is not None:
            full["GIT_INDEX_FILE"] = str(index)
        full.update(env or {})
        done = subprocess.run(
            ["git", *args], cwd=self.top, input=stdin, capture_output=True, env=full, check=False
        )
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
            raise GitError(f"git {args[0]}: {why}")
        return done.stdout.decode(errors="surrogateescape")

    def _env(self) -> dict[str, str]:
        env = _base_env()
        if self.git_dir is not None:  # the working tree stays the tree: binaries are read there
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.top))
        return env

    def repo_path(self, tree_path: str) -> str:
        """A path relative to the shared tree, as a repository path."""
        return f"{self.prefix}{tree_path}"

    # -- refs and commits -----------------------------------------------------------------

    def resolve_commit(self, ref: str) -> str:
        """The commit `ref` names; `GitError` naming the ref when there is none."""
        try:
            return self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        except GitError:
            if ref == "HEAD":
                raise GitError(
                    "the repository has no commit yet: commit the tree's starting state first"
                ) from None
            raise GitError(f"{ref!r} does not name a commit in {self.top}") from None

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", "--verify", f"{commit}^{{tree}}").strip()

    def contains(self, commit: str, ancestor: str) -> bool:
        """Whether `ancestor` is `commit` or one of its ancestors (False if unknown here)."""
        done = subprocess.run(
            ["git", "merge-base", "--is-ancestor", ancestor, commit],
            cwd=self.top,
            capture_output=True,
            env=self._env(),
            check=False,
        )
        return done.returncode == 0

    def has_identity(self) -> bool:
        """Whether git knows who commits (user.name/user.email or what it can detect)."""
        try:
            self.run("var", "GIT_COMMITTER_IDENT")
            self.run("var", "GIT_AUTHOR_IDENT")
        except GitError:
            return False
        return True

    def branch_exists(self, name: str) -> bool:
        try:
            self.run("rev-parse", "--verify", "--quiet", f"refs/heads/{name}")
        except GitError:
            return False
        return True

    def check_branch_name(self, name: str) -> None:
        try:
            self.run("check-ref-format", "--branch", name)
        except GitError:
            raise GitError(f"{name!r} is not a valid branch name") from None

    def commit_tree(
        self, tree: str, parent: str, message: str, env: Mapping[str, str] | None = None
    ) -> str:
        return self.run(
            "commit-tree", tree, "-p", parent, "-F", "-", stdin=message.encode(), env=env
        ).strip()

    def update_branch(self, name: str, new: str, old: str | None) -> None:
        """Point `refs/heads/name` at `new` only if it is still `old` (None: must not exist)."""
        self.run("update-ref", "-m", "codefleet commit", f"refs/heads/{name}", new, old or ZERO_SHA)

    def log_oneline(self, base: str, tip: str) -> str:
        return self.run("log", "--oneline", "--no-decorate", "--no-color", f"{base}..{tip}")

    # -- the temporary index --------------------------------------------------------------

    @contextlib.contextmanager
    def temp_index(self, seed_from_person: bool = False) -> Iterator[Path]:
        """A private index file; optionally a COPY of the person's (for its stat cache only)."""
        made = IndexDir()
        try:
            index = made.index
            if seed_from_person:
                own = Path(self.run("rev-parse", "--git-path", "index").strip())
                own = own if own.is_absolute() else self.top / own
                with contextlib.suppress(OSError):
                    shutil.copyfile(own, index)
            yield index
        finally:
            made.close()

    def read_tree(self, index: Path, tree: str) -> None:
        """Load `tree` into `index`, keeping the stat cache of entries whose content matches."""
        self.run("read-tree", "--reset", tree, index=index)

    def apply_cached(self, index: Path, diff: str) -> None:
        """Apply a git-style diff of tree paths to `index` only (never the working tree)."""
        args = ["apply", "--cached", "--whitespace=nowarn"]
        if self.prefix:
            args.append(f"--directory={self.prefix.rstrip('/')}")
        self.run(*args, "-", stdin=diff.encode(errors="surrogateescape"), index=index)

    def stage_from_worktree(self, index: Path, paths: Sequence[str]) -> None:
        """Put the working tree's current bytes (or absence) of `paths` into `index`."""
        lines, gone = [], []
        for path in paths:
            found = read_entry(self.top / path)
            if found is None:
                gone.append(path)
                continue
            mode, content = found
            sha = self.run("hash-object", "-w", "--stdin", "--no-filters", stdin=content).strip()
            lines.append(f"{mode} {sha}\t{path}")
        if lines:
            self.run("update-index", "-z", "--index-info", stdin=_z(lines), index=index)
        if gone:
            self.run("update-index", "--force-remove", "-z", "--stdin", stdin=_z(gone), index=index)

    def write_tree(self, index: Path) -> str:
        return self.run("write-tree", index=index).strip()

    # -- comparing with the working tree --------------------------------------------------

    def tree_entries(self, tree: str, paths: Iterable[str]) -> dict[str, Entry]:
        """`paths` as stored in `tree` (absent paths are missing from the answer)."""
        wanted = set(paths)
        found: dict[str, Entry] = {}
        for line in self.run("ls-tree", "-r", "-z", "--full-tree", tree).split("\0"):
            meta, _, path = line.partition("\t")
            if path in wanted:
                mode, _, sha = meta.split(" ")
                found[path] = Entry(mode, sha)
        return found

    def worktree_entries(self, paths: Iterable[str]) -> dict[str, Entry]:
        """`paths` as they are in the working tree, hashed here from their bytes (no filters)."""
        found: dict[str, Entry] = {}
        for path in paths:
            entry = read_entry(self.top / path)
            if entry is not None:
                found[path] = Entry(entry[0], blob_id(entry[1], self.object_format))
        return found

    def tracks_file_mode(self) -> bool:
        try:
            return self.run("config", "--bool", "core.fileMode").strip() != "false"
        except GitError:  # unset: git's default
            return True

    def changed_since(self, tree: str) -> list[str]:
        """Paths under the prefix whose working-tree state differs from `tree`.

        Modified and deleted tracked files, and untracked files that are not
        ignored. Uses a copy of the person's index for its stat cache, so only
        files whose stat changed are read.
        """
        scope = [f":(top){self.prefix}"] if self.prefix else []
        with self.temp_index(seed_from_person=True) as index:
            self.read_tree(index, tree)
            with contextlib.suppress(GitError):  # refresh exits 1 when files differ
                self.run("update-index", "-q", "--refresh", index=index)
            modified = self.run("diff-files", "--name-only", "-z", "--", *scope, index=index)
            untracked = self.run(
                "ls-files",
                "--others",
                "--exclude-standard",
                "-z",
                "--full-name",
                "--",
                *scope,
                index=index,
            )
        return sorted({p for p in (modified + untracked).split("\0") if p})


def _z(items: Iterable[str]) -> bytes:
    return "".join(f"{item}\0" for item in items).encode(errors="surrogateescape")
