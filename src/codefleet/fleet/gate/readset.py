"""What one attempt read: each file's path, the SHA-256 of the bytes it saw, and when.

Recorded in process, with no server call on the read path: the SDK session's
`PostToolUse` for `Read` (and `NotebookRead`, where a CLI has it) and the
scripted executor's `read` step call `ReadLog.record`, which reads the file
right after the tool did (the window between the two reads is what an agent
might not have seen; docs/decisions/0075-what-counts-as-a-read.md, "What counts as a read"). A Codex
session's `read_file` tool (`session.tools`) has no such window: it keeps the
record it shows (`look`, then `ReadLog.keep`). `Grep` and `Glob` (and Codex's
`list_files`) do not count. A later read of the same path replaces the earlier one:
what the agent saw last is what it works from.

Each read is stamped in the server's time (`ReadLog.skew_s`, measured by the
runner at registration): the server compares it with its own ledger's times
to find the other tasks' writes since, so a runner on another host whose clock
runs ahead would otherwise miss the writes of those seconds.

The log keeps each file's size and mtime (so the validation at the end hashes
only what moved) and, up to `KEEP_BYTES`, its bytes (for the reconcile turn's
diff). The rows not yet sent go with the attempt's one `POST /tasks/{id}/reads`
at the end of the session (`fleet.reconcile`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from codefleet.models import READ_RECORDED_TOOLS, to_iso, utcnow
from codefleet.paths import PathRejected, TreeRoot
from codefleet.toolcalls.writepaths import extract_paths

__all__ = [
    "KEEP_BYTES",
    "READ_RECORDED_TOOLS",
    "FileStamp",
    "ReadLog",
    "ReadRecord",
    "look",
    "observe",
]

KEEP_BYTES: Final = 1024 * 1024  # a file read is kept for the diff up to this size


@dataclass(frozen=True, slots=True)
class FileStamp:
    """A file's content hash, size and mtime (all None: no regular file there)."""

    sha256: str | None
    size: int | None
    mtime_ns: int | None


@dataclass(frozen=True, slots=True)
class ReadRecord:
    path: str  # canonical, relative to the tree
    tool: str
    at: str  # ISO-8601 UTC, when the read was recorded
    stamp: FileStamp
    content: bytes | None  # the bytes read, when at most KEEP_BYTES

    @property
    def sha256(self) -> str | None:
        return self.stamp.sha256

    def to_wire(self) -> dict[str, Any]:
        """The `read` ledger row (`POST /tasks/{id}/reads`)."""
        return {"path": self.path, "tool": self.tool, "at": self.at, "sha256": self.sha256}


def stamp_of(target: Path) -> FileStamp:
    """Size and mtime only (no hash): the cheap test of whether a file moved."""
    try:
        st = target.stat()
    except OSError:
        return FileStamp(None, None, None)
    if not target.is_file():
        return FileStamp(None, None, None)
    return FileStamp(None, st.st_size, st.st_mtime_ns)


def observe(target: Path) -> tuple[FileStamp, bytes | None]:
    """The file's stamp with its hash, and its bytes when small enough to keep."""
    try:
        st = target.stat()
        if not target.is_file():
            return FileStamp(None, None, None), None
        if st.st_size > KEEP_BYTES:  # hashed in chunks, not kept
            return FileStamp(_digest(target), st.st_size, st.st_mtime_ns), None
        data = target.read_bytes()
    except OSError:
        return FileStamp(None, None, None), None
    return FileStamp(hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns), data


def _digest(target: Path) -> str:
    digest = hashlib.sha256()
    with target.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def look(root: Path, key: str, tool: str, skew_s: float = 0.0) -> ReadRecord:
    """The file `key` as it is now, as a read by `tool` (nothing recorded), stamped in the
    server's time: this host's plus `skew_s`."""
    stamp, content = observe(root / key)
    return ReadRecord(key, tool, to_iso(utcnow() + timedelta(seconds=skew_s)), stamp, content)


@dataclass
class ReadLog:
    """One attempt's reads: the latest per path, and the rows not yet sent."""

    latest: dict[str, ReadRecord] = field(default_factory=dict)
    unsent: list[ReadRecord] = field(default_factory=list)
    skew_s: float = 0.0  # the server's clock minus this host's (`models.read_clock_skew_s`)

    def record(self, tree: TreeRoot, tool: str, tool_input: Any) -> None:
        """Note a read tool call that happened; anything but a file in the tree is ignored."""
        if tool not in READ_RECORDED_TOOLS:
            return
        for raw in extract_paths(tool_input):
            try:
                key = tree.canonical(raw)
            except PathRejected:
                continue
            self.keep(look(tree.root, key, tool, self.skew_s))

    def keep(self, record: ReadRecord) -> None:
        """`record` is what the agent has now seen of its file."""
        self.latest[record.path] = record
        self.unsent.append(record)

    def take_unsent(self) -> list[ReadRecord]:
        taken, self.unsent = self.unsent, []
        return taken
