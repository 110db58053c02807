"""Lease keys for parts of a file, and which keys exclude each other.

A lease key is a canonical path (the whole file), a resource key (`/resource:...`), or
a part key `path::name`: part `name` of the file at `path` (`toolcalls.fileparts`
names the parts). The path is everything before the first `::`, so a path that itself
contains `::` has no part keys and is always leased whole. A whole-file key and any
part key of the same file exclude each other; two part keys of one file exclude each
other only when they name the same part; a resource key excludes only itself. A key
is covered by itself and, for a part, by its whole file (`covering`): what a holder
of the file may write, and what a scope naming the file takes in.

`Claims` is a set of keys that answers "does this key conflict with anything in me?"
in constant time: the scheduler's busy set and the lease table's mirror both ask it.
Standard library only: the hook, the runner's gate, the scheduler and the server all
import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

__all__ = [
    "PART_SEPARATOR",
    "Claims",
    "canonical_part_key",
    "covering",
    "file_of",
    "keys_conflict",
    "part_key",
    "split_part_key",
]

PART_SEPARATOR: Final = "::"
RESOURCE_KEY_START: Final = "/"  # a resource key (`resources.RESOURCE_PREFIX`), never a path


def part_key(path: str, name: str) -> str:
    """The lease key of part `name` of the file whose canonical key is `path`."""
    if PART_SEPARATOR in path:
        raise ValueError(f"{path!r} contains {PART_SEPARATOR!r}: such a file is leased whole")
    if not path or not name:
        raise ValueError("a part key needs a path and a name")
    return f"{path}{PART_SEPARATOR}{name}"


def split_part_key(key: str) -> tuple[str, str | None]:
    """`(path, name)` of a part key, `(key, None)` of a whole-file or resource key."""
    if key.startswith(RESOURCE_KEY_START):
        return key, None
    path, separator, name = key.partition(PART_SEPARATOR)
    if not separator:
        return key, None
    if not path or not name:
        raise ValueError(f"{key!r} is not a part key: `path::name`")
    return path, name


def file_of(key: str) -> str:
    """The file a key is on: the path of a part key, the key itself otherwise."""
    if PART_SEPARATOR not in key:  # the lease path's common case, without the checks
        return key
    return split_part_key(key)[0]


def canonical_part_key(raw: str, canonical: Callable[[str], str]) -> str:
    """`raw` with its path made canonical (e.g. `TreeRoot.canonical`); the first `::` splits."""
    path, name = split_part_key(raw)
    key = canonical(path)
    return key if name is None else part_key(key, name)


def covering(key: str) -> tuple[str, ...]:
    """The keys whose holder may write `key`: the key itself and, for a part, its whole file.
    (A part does not cover its file, nor another part of it.)"""
    if PART_SEPARATOR not in key:
        return (key,)
    path, name = split_part_key(key)
    return (key,) if name is None else (key, path)


def keys_conflict(a: str, b: str) -> bool:
    """Do two lease keys exclude each other? A file and any of its parts do; two parts don't."""
    if a == b:
        return True
    if a.startswith(RESOURCE_KEY_START) or b.startswith(RESOURCE_KEY_START):
        return False
    path_a, _, name_a = a.partition(PART_SEPARATOR)
    path_b, _, name_b = b.partition(PART_SEPARATOR)
    return path_a == path_b and (not name_a or not name_b or name_a == name_b)


class Claims:
    """A set of lease keys that says, in O(1) per key, whether a key conflicts with one in it."""

    __slots__ = ("_parted", "keys")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self.keys: set[str] = set()
        self._parted: dict[str, int] = {}  # file -> how many of its part keys are in the set
        self.update(keys)

    def add(self, key: str) -> None:
        if key in self.keys:
            return
        self.keys.add(key)
        path, name = split_part_key(key)
        if name is not None:
            self._parted[path] = self._parted.get(path, 0) + 1

    def update(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.add(key)

    def conflicts(self, key: str) -> bool:
        if key in self.keys:
            return True
        path, name = split_part_key(key)
        if name is None:
            return path in self._parted
        return path in self.keys

    def isdisjoint(self, keys: Iterable[str]) -> bool:
        """No key of `keys` conflicts with one in this set (set-like, for a scope)."""
        return not any(self.conflicts(key) for key in keys)

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def __len__(self) -> int:
        return len(self.keys)
