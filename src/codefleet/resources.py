"""Named resources: exclusive locks on things that are not files, in the lease table.

A resource (`db`, `build:web`, a port `port:41234`) is held like a file: one
row of `file_leases`, so "never two holders" is the same primary key, the
same release at the end of an attempt and the same invariant checker. Its
key is `RESOURCE_PREFIX + name`, a string no canonical path can be: a lease
key for a file is a relative POSIX path, which never starts with `/`
(docs/decisions/0107-resources-share-the-lease-table-under-their-own-namespace.md, "Resources share the lease table under their own
namespace"). A name matches `RESOURCE_NAME_PATTERN`; a task declares at most
`MAX_RESOURCES`. Standard library only: the runner, the engine and the
graph loader all import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Final

__all__ = [
    "MAX_RESOURCES",
    "PORT_PREFIX",
    "RESOURCE_NAME_PATTERN",
    "RESOURCE_PREFIX",
    "glob_inside_tree",
    "is_resource_key",
    "lease_label",
    "port_resource",
    "resource_key",
    "resource_keys",
    "resource_name",
    "valid_resource_name",
]

RESOURCE_NAME_PATTERN: Final = r"^[a-z][a-z0-9_.:-]{0,63}$"
MAX_RESOURCES: Final = 64
RESOURCE_PREFIX: Final = "/resource:"
PORT_PREFIX: Final = "port:"  # `allocate_port` holds the resource `port:<number>`

_NAME = re.compile(RESOURCE_NAME_PATTERN)


def valid_resource_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def resource_key(name: str) -> str:
    """The lease key of resource `name` (`ValueError` for a name the pattern refuses)."""
    if not valid_resource_name(name):
        raise ValueError(f"resource name {name!r} must match {RESOURCE_NAME_PATTERN}")
    return RESOURCE_PREFIX + name


def resource_keys(names: Iterable[str]) -> frozenset[str]:
    return frozenset(resource_key(n) for n in names)


def is_resource_key(key: str) -> bool:
    return key.startswith(RESOURCE_PREFIX)


def resource_name(key: str) -> str:
    """The name in a resource's lease key (the key itself if it is a path's)."""
    return key[len(RESOURCE_PREFIX) :] if is_resource_key(key) else key


def lease_label(key: str) -> str:
    """A lease key as people read it: a file's path, or `resource db` for `/resource:db`."""
    return f"resource {resource_name(key)}" if is_resource_key(key) else key


def port_resource(port: int) -> str:
    return f"{PORT_PREFIX}{port}"


def glob_inside_tree(pattern: str) -> bool:
    """Can a sequence's `start_after` glob only match inside the tree? (relative, no `..`)"""
    parts = PurePosixPath(pattern).parts
    return (
        bool(pattern)
        and not pattern.startswith(("/", "~"))
        and ".." not in parts
        and "\\" not in pattern
    )
