"""A `uv run` check resolves once per content of what defines its lock, not at every start.

`uv run` first makes `uv.lock` agree with `pyproject.toml` (the resolution:
a millisecond when the lock is current, a second or more when it is missing or
stale, since it asks the package index), then syncs the environment, then runs.
A check's view is thrown away, so a lock uv writes there is lost and the next
check resolves again. `LockCache` keeps, per key, the lock the view had after a
run; the key is one SHA-256 over the command, the checks' `UV_*` variables and
the content, as the view shows it, of `DEFINING` (`pyproject.toml`, `uv.lock`,
`.python-version`, `uv.toml`). A later check with the same key runs with
`UV_FROZEN=1` on that lock (laid into its view when the tree's differs): no
resolution, the sync still done. An edit to any of those files is a new key,
so it resolves again. A lock is kept only when the key held still for the run
and uv wrote it, or the command exited 0 with the lock as it was (current).

Only plain `uv run` commands on the tree's own project qualify (`uv_run_command`);
a workspace, path sources or dynamic dependencies (other files define the lock)
have no key. Locks are files named by key under the user's cache directory.
docs/decisions/0162-a-uv-run-check-resolves-once-per-content.md.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from codefleet.rollback import PreImage

__all__ = [
    "DEFINING",
    "LOCK",
    "LockCache",
    "LockPlan",
    "Resolution",
    "defining_key",
    "uv_run_command",
    "view_reader",
]

LOCK: Final = "uv.lock"
DEFINING: Final = ("pyproject.toml", LOCK, ".python-version", "uv.toml")
FROZEN: Final = "UV_FROZEN"
# Set already, these leave uv nothing to resolve (or conflict with `UV_FROZEN`).
ALREADY: Final = frozenset({"--frozen", "--locked", "--no-sync", "--no-project", "--isolated"})
# Options that point uv at another project or configuration: not this tree's lock.
ELSEWHERE: Final = frozenset({"--project", "--directory", "--config-file", "--script", "--package"})
HERE: Final = frozenset({".", "./"})
_PUNCTUATION: Final = frozenset("();<>|&")

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
    """`uv run`'s own options (up to the command it runs) name no other project."""
    for n, word in enumerate(options):
        if not word.startswith("-"):
            return True
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

    @property
    def resolution(self) -> Resolution:
        return Resolution.RESOLVED if self.lock is None else Resolution.SKIPPED

    @property
    def env(self) -> dict[str, str]:
        """What the command's environment gets: `UV_FROZEN=1` on a kept lock."""
        return {} if self.lock is None else {FROZEN: "1"}

    @property
    def image(self) -> PreImage | None:
        """The kept lock as the view must show it, where the view's own differs."""
        if self.lock is None or self.lock == self.before:
            return None
        return PreImage(LOCK, existed=True, content=self.lock, mode=0o644)


class LockCache:
    """The locks kept by key, one file each under `directory` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def default(cls) -> LockCache:
        """Under `$XDG_CACHE_HOME` (else `~/.cache`): `codefleet/uv-locks`."""
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return cls(Path(cache) / "codefleet" / "uv-locks")

    def plan(self, read: Read, command: str, env: Mapping[str, str]) -> LockPlan | None:
        """The plan of a check about to start (None: not a `uv run` check with a key)."""
        if not uv_run_command(command) or env.keys() & {FROZEN, "UV_LOCKED", "UV_NO_SYNC"}:
            return None
        key = defining_key(read, command, env)
        if key is None:
            return None
        try:
            lock = (self.directory / key).read_bytes()
        except OSError:
            lock = None
        return LockPlan(key, lock, read(LOCK))

    def keep(self, plan: LockPlan, lock: bytes | None, exit_code: int | None, still: bool) -> bool:
        """Keep the view's `lock` after a resolving run when the key held still (`still`)
        and uv wrote it, or the command passed with it as it was (it was current)."""
        if plan.lock is not None or lock is None or not still:
            return False
        if lock == plan.before and exit_code != 0:  # uv may have failed before it resolved
            return False
        return self._write(plan.key, lock)

    def held_still(self, plan: LockPlan, read: Read, command: str, env: Mapping[str, str]) -> bool:
        """Whether the view, read again after the run (its lock as before), has `plan`'s key."""

        def as_before(path: str) -> bytes | None:
            return plan.before if path == LOCK else read(path)

        return defining_key(as_before, command, env) == plan.key

    def _write(self, key: str, lock: bytes) -> bool:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".keep-")
            with os.fdopen(fd, "wb") as out:
                out.write(lock)
            os.replace(temp, self.directory / key)
        except OSError:
            return False
        return True
