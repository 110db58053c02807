"""The write latch: a file whose parts were just granted is its writer's, until it records.

Two tasks holding different parts of one file still write the whole file (a tool
reads it, changes its part, writes it all back), so a grant of parts latches the
file to the task until its write is recorded (`unlatch`, from the change ledger)
or `WRITE_LATCH_S` passes (the tool failed); meanwhile another task's request
for the file (whole or parts) is refused as `busy` (the gate asks again, with
its parts worked out on the file as it then is), and a restore by part waits for
it (`written_by_other`). The latch owns `writing` (file -> (task, until)) and
nothing else: the lease table (`coord.tables.leases`) keeps one and asks it; the
file as its writer found it is kept by the files part, through the `hold_still`
and `let_go` it is handed. No I/O of its own; the clock is handed in.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from codefleet.coord.policy.answers import Denial
from codefleet.models import DenyReason
from codefleet.toolcalls.leasekeys import PART_SEPARATOR, file_of, split_part_key

__all__ = ["WRITE_LATCH_S", "WriteLatch"]

WRITE_LATCH_S: Final = 5.0  # a write of parts not recorded by then (the tool failed) frees it


class WriteLatch:
    """Which files are being written by a task holding parts of them; see the module docstring."""

    def __init__(
        self,
        clock: Callable[[], datetime],
        hold_still: Callable[[str, datetime], None],
        let_go: Callable[[str], None],
    ) -> None:
        self.clock = clock
        self.hold_still = hold_still  # keep the file as its writer finds it, until then
        self.let_go = let_go  # the file's write is over
        self.writing: dict[str, tuple[str, datetime]] = {}  # file -> (task writing parts, until)

    def busy(self, keys: list[str], task_id: str) -> list[Denial]:
        """A `busy` refusal per file `keys` asks for (whole or parts) while another task writes
        parts of it. A whole-file request too: the gate maps a write to parts on the file as
        it reads it, and a file caught mid-write does not parse, so its request is the whole
        file; asked again once the write is in, it is mapped to its parts."""
        if not self.writing:
            return []  # nobody is writing parts: the whole-file path pays one test
        now = self.clock()
        refused: list[Denial] = []
        for path in sorted({file_of(k) for k in keys}):
            writer, until = self.writing.get(path, ("", now))
            if writer and writer != task_id and until > now:
                message = f"{path} is being written by task {writer} (another part of it) right now"
                refused.append(Denial(path, DenyReason.BUSY, message))
        return refused

    def written_by_other(self, path: str, task_id: str) -> bool:
        """Is a task other than `task_id` writing parts of `path` this instant?"""
        writer, until = self.writing.get(path, ("", self.clock()))
        return bool(writer) and writer != task_id and until > self.clock()

    def latch(self, keys: list[str], task_id: str) -> None:
        """The files whose parts were just granted are the task's to write, until it records."""
        parted = [k for k in keys if PART_SEPARATOR in k]
        if not parted:
            return
        now = self.clock()
        until = now + timedelta(seconds=WRITE_LATCH_S)
        for key in parted:
            path, name = split_part_key(key)
            if name is not None:
                writer, latched_until = self.writing.get(path, ("", now))
                if writer != task_id or latched_until <= now:  # a new write moment
                    self.hold_still(path, until)  # the file as its writer finds it
                self.writing[path] = (task_id, until)

    def unlatch(self, task_id: str, path: str | None = None) -> None:
        """The task's write of `path` (None: of every file) is over."""
        if not self.writing:
            return
        for held, (writer, _) in list(self.writing.items()):
            if writer == task_id and path in (None, held):
                del self.writing[held]
                self.let_go(held)
