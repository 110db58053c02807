"""Mapped texts kept by their text: the same texts are mapped again and again.

A put-back by part (a restore, a check's view, a landed task's patch ends) maps the
current text of a file, each holder's pre-image and its result, and the next view of
that file maps the same texts again: the demo's five tasks mapped 169 texts, most of
them a few already seen. `KeptIndexes` keeps the last texts mapped, whatever their
size, up to `KEEP_BYTES` of text and `KEEP_TEXTS` texts in all (the one asked for
longest ago leaves first), so a text is mapped once while it is in use. One store per
mapper (`parts.python`, `parts.treesitter`), safe across threads (the engine's thread
and a runner's gate share a process in `run` and `demo`). A kept `Index` is shared:
its readers never change it. docs/decisions/0171-every-mapped-text-is-kept.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

from codefleet.parts.model import Index

__all__ = ["KEEP_BYTES", "KEEP_TEXTS", "KeptIndexes"]

# At most this much text (characters or bytes, as the mapper measures it) is kept mapped,
# about 16 of the largest modules parts are mapped for (decision 0154's bound), and at
# most this many texts (an index is a few objects a line: many tiny texts cost too).
KEEP_BYTES: Final = 1_000_000
KEEP_TEXTS: Final = 256

K = TypeVar("K", bound=Hashable)


class KeptIndexes(Generic[K]):
    """The last texts mapped, by a key that holds the text, and their `Index` (or None)."""

    def __init__(self, budget: int = KEEP_BYTES, texts: int = KEEP_TEXTS) -> None:
        self.budget = budget
        self.texts = texts
        self._lock = threading.Lock()
        self._kept: OrderedDict[K, tuple[int, Index | None]] = OrderedDict()
        self._size = 0

    def get(self, key: K) -> tuple[bool, Index | None]:
        """(True, its index) when `key`'s text is kept (it is then the last to leave)."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return False, None
            self._kept.move_to_end(key)
            return True, found[1]

    def keep(self, key: K, size: int, index: Index | None) -> None:
        """Keep `index` for `key` (a text of `size`), dropping the oldest past the bounds."""
        if size > self.budget:
            return
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = (size, index)
            self._size += size
            while self._size > self.budget or len(self._kept) > self.texts:
                _, (dropped, _) = self._kept.popitem(last=False)
                self._size -= dropped

    def __len__(self) -> int:
        return len(self._kept)
