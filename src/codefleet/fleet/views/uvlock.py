"""A `uv run` check resolves once per content of what defines its lock, not at every start.

`uv run` first makes `uv.lock` agree with `pyproject.toml` (a millisecond when the
lock is current, a second or more against the package index when it is missing
or stale), then syncs the environment. A view is thrown away with the lock uv
wrote there, so `LockCache` keeps the lock a view had after a run, under a key:
one SHA-256 over the command, the `UV_*` variables and `DEFINING` as the view
shows them. A later check with that key runs as `uv run --frozen` on the kept
lock (laid into its view where the view's own differs): no resolution, the sync
still done; a flag, not `UV_FROZEN`, so a uv that the check's program starts is
not frozen. An edit to one of `DEFINING` is a new key: uv resolves again. A lock
is kept only when the key held still and uv wrote it, or the command passed with
it as it was. Only plain `uv run` commands of the tree's own project qualify; a
lock other files define too (a workspace, path sources) has no key. Locks are
kept in the tree's state directory (`.codefleet/`), which agents cannot write.
docs/decisions/0162-a-uv-run-check-resolves-once-per-content.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from codefleet.rollback import PreImage
from codefleet.statedir import NoTreeId, open_state_file, write_state_once

__all__ = [
    "DEFINING",
    "LOCK",
    "LockCache",
    "LockPlan",
    "Resolution",
    "defining_key",
    "frozen_command",
    "uv_run_command",
    "view_reader",
]

LOCK: Final = "uv.lock"
DEFINING: Final = ("pyproject.toml", LOCK, ".python-version", "uv.toml")
FROZEN: Final = "UV_FROZEN"
KEPT_PREFIX: Final = "uv-lock-"  # + the key: a kept lock's name in the state directory
# Set already, these leave uv nothing to resolve (or conflict with `--frozen`).
ALREADY: Final = frozenset({"--frozen", "--locked", "--no-sync", "--no-project", "--isolated"})
# Options that point uv at another project or configuration: not this tree's lock.
ELSEWHERE: Final = frozenset({"--project", "--directory", "--config-file", "--script", "--package"})
HERE: Final = frozenset({".", "./"})
_PUNCTUATION: Final = frozenset("();<>|&")
# `uv run` where a simple command starts (after `NAME=value` prefixes): where `--frozen` goes.
_UV_RUN: Final = re.compile(
    r"(^|[;&|(\n]\s*)((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)uv(\s+)run(?=\s|$)"
)

Read = Callable[[str], bytes | None]  # a path's content as the view shows it (None: absent)


class Resolution(StrEnum):
    RESOLVED = "resolved"  # uv resolved (or found the lock current): its lock kept for the key
    SKIPPED = "skipped"  # run frozen on the lock kept for this same key: no resolution


def uv_run_command(command: str) -> bool:
    """Whether every simple command of `command` that runs uv is a plain `uv run` of the
    tree's own project, and one does (no `cd`, no other uv verb, no other project)."""
    found = False
    for words in _simple_commands(command):
        if words and words[0] == "cd":
            return False
        if not words or words[0] != "uv":
            continue
        if len(words) < 2 or words[1] != "run" or not _plain_run(words[2:]):
            return False
        found = True
    return found


def frozen_command(command: str) -> str | None:
    """`command` with `--frozen` after each `uv run` (only that uv, not one its program
    starts); None where the rewrite cannot be checked word for word."""
    frozen = _UV_RUN.sub(lambda m: f"{m[1]}{m[2]}uv{m[3]}run --frozen", command)
    expected = [
        [*w[:2], "--frozen", *w[2:]] if w[:1] == ["uv"] else w for w in _simple_commands(command)
    ]
    return frozen if _simple_commands(frozen) == expected else None


def _simple_commands(command: str) -> list[list[str]]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    try:
        for word in lexer:
            if set(word) <= _PUNCTUATION:
                commands.append([])
            elif commands[-1] or "=" not in word:  # `NAME=value` prefixes are skipped
                commands[-1].append(word)
    except ValueError:  # an unterminated quote: not ours to run differently
        return [["cd"]]
    return commands


def _plain_run(options: list[str]) -> bool:
    """No word after `uv run` is an option that names another project or already says
    how to lock (the program's own words too: a false alarm only costs the fast path)."""
    for n, word in enumerate(options):
        name, _, value = word.partition("=")
        if name in ALREADY:
            return False
        if name in ELSEWHERE:
            value = value or (options[n + 1] if n + 1 < len(options) else "")
            if name in ("--config-file", "--script", "--package") or value not in HERE:
                return False
    return True


def defining_key(read: Read, command: str, env: Mapping[str, str]) -> str | None:
    """The key of a check's lock: the command, the `UV_*` variables and `DEFINING` as
    `read` shows them; None where other files define the lock too, or none can be."""
    pyproject = read("pyproject.toml")
    if pyproject is None or not _self_contained(pyproject):
        return None
    digest = hashlib.sha256(f"{command}\0".encode())
    for name in sorted(k for k in env if k.startswith("UV_")):
        digest.update(f"{name}={env[name]}\0".encode(errors="surrogateescape"))
    for path in DEFINING:
        content = read(path)
        state = "absent" if content is None else hashlib.sha256(content).hexdigest()
        digest.update(f"{path}\0{state}\0".encode())
    return digest.hexdigest()


def _self_contained(pyproject: bytes) -> bool:
    """No workspace, no path sources, no dynamic dependencies: the root files define it."""
    import tomllib  # on use: only a `uv run` check with a pyproject.toml reads it

    try:
        data = tomllib.loads(pyproject.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    uv: dict[str, Any] = data.get("tool", {}).get("uv", {})
    sources = uv.get("sources", {})
    dynamic = set(data.get("project", {}).get("dynamic", ()))
    return (
        "workspace" not in uv
        and not any(
            isinstance(s, dict) and ("path" in s or "workspace" in s) for s in sources.values()
        )
        and not dynamic & {"dependencies", "optional-dependencies"}
    )


def view_reader(root: Path, images: Mapping[str, PreImage] | None = None) -> Read:
    """How the view of `root` shows a file: its pre-image where `images` masks it."""

    def read(path: str) -> bytes | None:
        image = (images or {}).get(path)
        if image is not None:
            return image.content if image.existed and not image.symlink else None
        try:
            return (root / path).read_bytes()
        except OSError:  # absent, a directory, unreadable: no content
            return None

    return read


@dataclass(frozen=True, slots=True)
class LockPlan:
    """How one check starts: its key, and the lock kept for it (None: uv resolves)."""

    key: str
    lock: bytes | None
    before: bytes | None  # the view's own uv.lock
    frozen: str  # the command with `--frozen` after each `uv run`

    @property
    def resolution(self) -> Resolution:
        return Resolution.RESOLVED if self.lock is None else Resolution.SKIPPED

    def command(self, named: str) -> str:
        """What runs: the frozen command on a kept lock, else the command as named."""
        return named if self.lock is None else self.frozen

    @property
    def image(self) -> PreImage | None:
        """The kept lock as the view must show it, where the view's own differs."""
        if self.lock is None or self.lock == self.before:
            return None
        return PreImage(LOCK, existed=True, content=self.lock, mode=0o644)


class LockCache:
    """The locks kept for the tree at `root`: `.codefleet/uv-lock-KEY`, one file a key."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def plan(self, read: Read, command: str, env: Mapping[str, str]) -> LockPlan | None:
        """The plan of a check about to start (None: not a `uv run` check with a key)."""
        if not uv_run_command(command) or env.keys() & {FROZEN, "UV_LOCKED", "UV_NO_SYNC"}:
            return None
        key, frozen = defining_key(read, command, env), frozen_command(command)
        if key is None or frozen is None:
            return None
        return LockPlan(key, self._read(key), read(LOCK), frozen)

    def keep(self, plan: LockPlan, lock: bytes | None, exit_code: int | None, still: bool) -> bool:
        """Keep the view's `lock` after a resolving run when the key held still (`still`)
        and uv wrote it, or the command passed with it as it was (it was current)."""
        if plan.lock is not None or lock is None or not still:
            return False
        if lock == plan.before and exit_code != 0:  # uv may have failed before it resolved
            return False
        try:
            write_state_once(self.root, f"{KEPT_PREFIX}{plan.key}", lock)
        except (OSError, NoTreeId):  # no state directory, or not a safe one: nothing kept
            return False
        return True

    def held_still(self, plan: LockPlan, read: Read, command: str, env: Mapping[str, str]) -> bool:
        """Whether the view, read again after the run (its lock as before), has `plan`'s key."""

        def as_before(path: str) -> bytes | None:
            return plan.before if path == LOCK else read(path)

        return defining_key(as_before, command, env) == plan.key

    def _read(self, key: str) -> bytes | None:
        try:
            fd = open_state_file(self.root, f"{KEPT_PREFIX}{key}", os.O_RDONLY)
        except (OSError, NoTreeId):  # none kept, or not safely readable: uv resolves
            return None
        with os.fdopen(fd, "rb") as kept:
            return kept.read()
