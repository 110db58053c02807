"""The server a command finds in its tree, checked before anything is sent to it.

A command not told where its server is (`cli.common.found_server`, and the fast
commands' `cli.operate.quickio`) reads the nearest held record from its tree up
(`treelock.nearest_record`: only this user's directories, files and locks). Before
the token or a graph goes to the URL it names, `tree_server` asks two things: the
record names the directory it was found in (on this host; a record written on
another host is known by the tree's identity alone), and a `GET /health` without
the token, answered as CodeFleet answers it, says the tree identity of that
directory. Anything else is `NotThisTree`, one line naming the record and why;
nothing else is sent (docs/decisions/0150-a-server-record-is-believed-only-where-it-could-only-be-yours.md).
Standard library only: the fast commands import it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Final

from codefleet.api.blockingclient import exchange
from codefleet.statedir import tree_id_here
from codefleet.treelock import ServerRecord, nearest_record, server_file

__all__ = ["HEALTH_TIMEOUT_S", "NotThisTree", "tree_server"]

HEALTH_TIMEOUT_S: Final = 5.0  # a server still opening its database answers within this
HEALTH_MAX_BYTES: Final = 64 * 1024
LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


class NotThisTree(Exception):
    """A held record names something that is not this tree's CodeFleet server."""


def tree_server(start: Path) -> ServerRecord | None:
    """The checked record of the live server of the tree holding `start`, or None (none, or
    another host's by a loopback address); `NotThisTree` when the record cannot be believed."""
    found = nearest_record(start)
    if found is None:
        return None
    tree, record = found
    here = record.host in (None, socket.gethostname())
    if not here and _loopback(record.url):
        return None  # another host's server, recorded by its loopback address
    why = (_names_another(tree, record) if here else None) or _not_codefleet(tree, record)
    if why is not None:
        raise NotThisTree(
            f"the server record {server_file(tree)} names {record.url} (pid {record.pid}), "
            f"but {why}: nothing was sent to it. Stop that process, or pass --server"
        )
    return record


def _names_another(tree: Path, record: ServerRecord) -> str | None:
    try:
        if os.path.samefile(record.workdir, tree):
            return None
    except (OSError, ValueError):
        pass
    return f"it says its tree is {record.workdir!r}, not {str(tree)!r} where it was found"


def _not_codefleet(tree: Path, record: ServerRecord) -> str | None:
    """Why `record.url` is not the CodeFleet server of `tree` (asked without the token)."""
    expected = tree_id_here(tree)
    if not record.url.startswith(("http://", "https://")):
        return "that is not an http(s) address"
    try:
        status, raw = exchange(
            "GET", record.url, "/health", b"", {}, HEALTH_TIMEOUT_S, max_bytes=HEALTH_MAX_BYTES
        )
        health = json.loads(raw)
    except (OSError, ValueError):
        return "it does not answer /health as a CodeFleet server does"
    said = health.get("tree_id") if isinstance(health, dict) else None
    if status != 200 or not isinstance(said, str):
        return f"its /health answer (HTTP {status}) is not a CodeFleet server's"
    if said != expected:
        return f"it serves the tree {said}, not this one ({expected})"
    return None


def _loopback(url: str) -> bool:
    return url.partition("://")[2].rpartition(":")[0].strip("[]") in LOOPBACK
