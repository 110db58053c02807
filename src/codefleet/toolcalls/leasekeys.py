"""Lease keys and the one rule of which exclude each other: a file, its parts, a resource.

A lease key is a canonical path (the whole file), a resource key (`/resource:...`), or
a part key `path::name`: part `name` of the file at `path` (`parts`
names the parts). The path is everything before the first `::`, so a path that itself
contains `::` has no part keys and is always leased whole. A whole-file key and any
part key of the same file exclude each other; two part keys of one file exclude each
other only when they name the same part; a resource key excludes only itself. A key
is covered by itself and, for a part, by its whole file (`covering`): what a holder
of the file may write, and what a scope naming the file takes in.

`excludes(a, b)` is the rule. `KeyIndex` holds keys (each with a value: its holder)
indexed by file, and answers by that same rule which of them a key excludes
(`excluded_by`, `conflicts`) in time bounded by the keys held on its file: the lease
table's mirror, the scheduler's busy set and the wait room's wait-for graph are each one.
Standard library only: the hook, the runner's gate, the scheduler and the server all
import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Final, Generic, TypeVar

__all__ = [
    "PART_SEPARATOR",
    "KeyIndex",
    "covering",
    "excludes",
    "file_of",
    "part_key",
    "split_part_key",
]

V = TypeVar("V")

PART_SEPARATOR: Final = "::"
RESOURCE_KEY_START: Final = "/"  # a resource key (`resources.RESOURCE_PREFIX`), never a path
_NONE_HELD: Final[frozenset[str]] = frozenset()  # `KeyIndex.keys_on` a file nobody holds


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


def covering(key: str) -> tuple[str, ...]:
    """The keys whose holder may write `key`: the key itself and, for a part, its whole file.
    (A part does not cover its file, nor another part of it.)"""
    if PART_SEPARATOR not in key:
        return (key,)
    path, name = split_part_key(key)
    return (key,) if name is None else (key, path)


def excludes(a: str, b: str) -> bool:
    """Do two lease keys exclude each other? A file and any of its parts do; two parts don't."""
    if a == b:
        return True
    if a.startswith(RESOURCE_KEY_START) or b.startswith(RESOURCE_KEY_START):
        return False
    path_a, _, name_a = a.partition(PART_SEPARATOR)
    path_b, _, name_b = b.partition(PART_SEPARATOR)
    return path_a == path_b and (not name_a or not name_b or name_a == name_b)


class KeyIndex(Generic[V]):
    """Held keys, each with its value (who holds it), indexed by file."""

    __slots__ = ("held", "on_file")

    def __init__(self) -> None:
        self.held: dict[str, V] = {}
        self.on_file: dict[str, set[str]] = {}  # a file (or resource) -> the keys held on it

    def put(self, key: str, value: V) -> None:
        """Hold `key` for `value` (replacing the value of a key already held)."""
        self.held[key] = value
        self.on_file.setdefault(file_of(key), set()).add(key)

    def update(self, keys: Iterable[str], value: V) -> None:
        """Hold each of `keys` for `value` (`put`, inlined: the scheduler builds its busy index
        from every claim on every tick)."""
        held, on_file = self.held, self.on_file
        for key in keys:
            held[key] = value
            path = key if PART_SEPARATOR not in key else split_part_key(key)[0]
            on_file.setdefault(path, set()).add(key)

    def pop(self, key: str) -> V:
        """Let go of `key`; its value."""
        value = self.held.pop(key)
        path = file_of(key)
        on = self.on_file[path]
        on.discard(key)
        if not on:
            del self.on_file[path]
        return value

    def excluded_by(self, key: str) -> list[str]:
        """The held keys `key` excludes (`excludes`): every key on a file for the file (or a
        resource), else the part itself and its whole file."""
        if PART_SEPARATOR not in key:
            on = self.on_file.get(key)
            return sorted(on) if on else []
        path, _ = split_part_key(key)
        on = self.on_file.get(path)
        return [k for k in (path, key) if k in on] if on else []

    def conflicts(self, key: str) -> bool:
        """Does a held key exclude `key`? (`excluded_by` is not empty; constant time.)"""
        if key in self.held:
            return True
        path, name = split_part_key(key)
        if name is None:
            return path in self.on_file
        return path in self.held

    def isdisjoint(self, keys: Iterable[str]) -> bool:
        """No key of `keys` conflicts with one held (set-like, for a scope)."""
        return not any(self.conflicts(key) for key in keys)

    def keys_on(self, path: str) -> AbstractSet[str]:
        """The keys held on a file: the file itself, its parts (read only: none is one shared
        empty set)."""
        return self.on_file.get(path, _NONE_HELD)

    def __contains__(self, key: object) -> bool:
        return key in self.held

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)
