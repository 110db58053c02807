"""Path canonicalization: the one rule for turning a spelling into a lease key.

Every door uses it: the runner's pre-write gate and the `codefleet hook`
command normalize before asking, and the server canonicalizes every path it
receives, so `./a.py`, `x/../a.py`, `a//b.py` and the absolute spelling of
one file always map to the same key. Symlinks are resolved, so a link cannot
smuggle a write outside the tree. A lease key is a relative POSIX path under
the resolved tree root. Refused, with a `PathRejected` naming the reason:

- anything that resolves outside the tree, including `~` and `~/...`, which
  Claude Code expands to the home directory (measured);
- protected paths: any `.git` component at any depth (compared
  case-insensitively, as a case-insensitive file system would), the
  configurable names (`DEFAULT_PROTECTED_NAMES`: agent configuration a
  person's own session would load and run) matched the same way, the
  database, its side files and the run directory, and CodeFleet's own
  state directory at the root (`.codefleet/`, with the tree's identity);
- the files the checks come from (`protect`: the graph file a run loaded,
  docs/decisions/0151-the-checks-own-file-is-protected.md);
- an existing file with more than one hard link (two names, one inode: two
  leases would guard one file; docs/decisions/0018-hard-links-are-refused.md, "Hard links are refused");
- a directory, the tree itself, or a spelling that is not a usable path.

Standard library only (a test holds it to that): the command hook runs it on
every write of a person's session.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codefleet.models import DenyReason
from codefleet.statedir import STATE_DIR

__all__ = [
    "DEFAULT_PROTECTED_NAMES",
    "MAX_PATH_CHARS",
    "LeaseKeys",
    "PathRejected",
    "TreeRoot",
    "lease_keys",
    "parse_protected_names",
]

MAX_PATH_CHARS = 4096
# Always protected, at any depth: a repository's hooks, config (core.fsmonitor) and objects.
GIT_DIR = ".git"
# Protected by default (CODEFLEET_PROTECTED_PATHS): what a person's own Claude Code session in
# this tree would load or execute, so an agent writing it would run code as that person; and
# `.env`, where `codefleet` itself reads its settings (the server's URL, the token's, the
# integration check, this very list), so an agent writing it would steer the next command.
DEFAULT_PROTECTED_NAMES: tuple[str, ...] = (".claude", ".mcp.json", ".env")
# Writing SQLite's side files rewrites the database as surely as writing the database itself;
# `.lock` is the server's one-server lock (`server.lock`).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal", ".lock")


class PathRejected(ValueError):
    def __init__(self, raw: str, reason: DenyReason, message: str) -> None:
        super().__init__(message)
        self.raw = raw
        self.reason = reason
        self.message = message


def parse_protected_names(names: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """Each name as its case-folded components; `ValueError` for one that is not a relative
    path inside the tree (absolute, empty, or with a `..`)."""
    parsed = []
    for name in names:
        parts = tuple(p.casefold() for p in name.strip().split("/") if p not in ("", "."))
        if not parts or name.strip().startswith("/") or ".." in parts:
            raise ValueError(f"protected name {name!r} must be a relative path inside the tree")
        parsed.append(parts)
    return tuple(parsed)


class TreeRoot:
    """A resolved working tree plus the paths inside it no agent may write."""

    def __init__(
        self,
        root: Path,
        protected: Iterable[Path] = (),
        names: Iterable[str] = DEFAULT_PROTECTED_NAMES,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.names = tuple(names)
        parsed = (*parse_protected_names(self.names), (GIT_DIR,))
        self._single = frozenset(p[0] for p in parsed if len(p) == 1)
        self._multi = tuple(p for p in parsed if len(p) > 1)
        resolved = [Path(os.path.realpath(p)) for p in (*protected, self.root / STATE_DIR)]
        resolved += [p.with_name(p.name + side) for p in resolved for side in SQLITE_SIDE_FILES]
        # A protected directory that contains the whole tree would forbid everything: it only
        # matters when it lies inside the tree.
        self._protected = tuple(
            str(p) for p in resolved if p != self.root and p not in self.root.parents
        )
        self._root = str(self.root)
        self._prefix = self._root.rstrip(os.sep) + os.sep

    def protect(self, key: str) -> None:
        """Refuse `key` (a file inside the tree, e.g. the graph file the checks come from)
        from now on, like a path given at construction.

        One writer: the server's check registry (`coord.tables.checkregistry`), which
        knows the checks' files; a key that resolves outside the tree changes nothing.
        """
        resolved = os.path.realpath(os.path.join(self._root, key))
        if resolved.startswith(self._prefix) and resolved not in self._protected:
            self._protected = (*self._protected, resolved)

    def canonical(self, raw: str) -> str:
        """The lease key for `raw`, or `PathRejected`.

        On the lease hot path: plain `os.path` string work plus the `lstat` calls
        that symlink resolution needs (`_resolve`), no `pathlib` objects.
        """
        if not isinstance(raw, str) or not raw.strip():
            raise PathRejected(str(raw), DenyReason.INVALID_PATH, "empty path")
        if "\x00" in raw or len(raw) > MAX_PATH_CHARS:
            raise PathRejected(raw[:200], DenyReason.INVALID_PATH, "unusable path")
        if raw == "~" or raw.startswith("~/"):  # the CLI writes these into the home directory
            raise PathRejected(
                raw, DenyReason.OUTSIDE_WORKDIR, f"{raw} is in the home directory, outside the tree"
            )
        resolved, found, missing = self._resolve(raw)
        if not resolved.startswith(self._prefix):
            if resolved == self._root:
                raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} names the tree itself")
            raise PathRejected(
                raw, DenyReason.OUTSIDE_WORKDIR, f"{raw} resolves outside the working tree"
            )
        rel = resolved[len(self._prefix) :]
        if self._protected_name(rel) or self._is_protected(resolved):
            raise PathRejected(raw, DenyReason.PROTECTED_PATH, f"{raw} is a protected path")
        if missing:
            return rel
        try:
            found = found or os.stat(resolved)
        except (FileNotFoundError, NotADirectoryError):
            return rel
        except OSError as err:  # e.g. a name longer than the file system allows
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw}: {err.strerror}") from None
        if stat.S_ISDIR(found.st_mode):
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} is a directory")
        if found.st_nlink > 1:
            raise PathRejected(
                raw,
                DenyReason.HARD_LINK,
                f"{raw} has {found.st_nlink} hard links (one file under several names), so no "
                "task may lease it: a write under one name would change the others",
            )
        return rel

    def _resolve(self, raw: str) -> tuple[str, os.stat_result | None, bool]:
        """`realpath(root/raw)`, the final name's `lstat` when the walk took it, and whether a
        name on the way is missing.

        The root is already resolved, so a relative spelling without `..` needs an `lstat`
        only of its own components, and none below a missing name (nothing there can be a
        link). A link, a `..`, an absolute spelling or any other error: `realpath` itself.
        """
        parts = [p for p in raw.split("/") if p and p != "."]
        if raw.startswith("/") or not parts or ".." in parts:
            return os.path.realpath(os.path.join(self._root, raw)), None, False
        path = self._root.rstrip(os.sep)
        found = None
        for n, part in enumerate(parts):
            path = f"{path}/{part}"
            try:
                found = os.lstat(path)
            except FileNotFoundError:
                return "/".join((path, *parts[n + 1 :])), None, True
            except OSError:
                return os.path.realpath(os.path.join(self._root, raw)), None, False
            if stat.S_ISLNK(found.st_mode):
                return os.path.realpath(os.path.join(self._root, raw)), None, False
        return path, found, False

    def _protected_name(self, rel: str) -> bool:
        """Does a protected name appear in `rel` as whole components, at any depth?"""
        parts = rel.casefold().split("/")
        if not self._single.isdisjoint(parts):
            return True
        return any(
            tuple(parts[i : i + len(name)]) == name
            for name in self._multi
            for i in range(len(parts) - len(name) + 1)
        )

    def _is_protected(self, resolved: str) -> bool:
        return any(resolved == p or resolved.startswith(p + os.sep) for p in self._protected)


@dataclass(slots=True)
class LeaseKeys:
    """Raw paths as lease keys: the keys in order (no repeats unless asked), the raw paths
    skipped for a reason the caller does not object to, and each refusal with its raw path."""

    keys: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rejected: list[tuple[str, PathRejected]] = field(default_factory=list)


def lease_keys(
    tree: TreeRoot,
    raws: Sequence[str],
    *,
    cwd: str | None = None,
    skip: frozenset[DenyReason] = frozenset(),
    first_refusal: bool = False,
    repeats: bool = False,
) -> LeaseKeys:
    """The one loop from raw paths to lease keys, for every door (the hook, the pre-write gate,
    the runner's and a person's leases).

    `cwd`: a relative path is joined to it first. A path refused for a reason in `skip` is
    `skipped`, not `rejected`. `first_refusal`: stop at the first refusal (the keys before it
    stay). `repeats`: keep a key that two spellings share twice (the pre-write gate asks as
    the tool named them).
    """
    out = LeaseKeys()
    for raw in raws:
        try:
            key = tree.canonical(raw if cwd is None else os.path.join(cwd, raw))
        except PathRejected as err:
            if err.reason in skip:
                out.skipped.append(raw)
                continue
            out.rejected.append((raw, err))
            if first_refusal:
                break
            continue
        if repeats or key not in out.keys:
            out.keys.append(key)
    return out
