"""The cyclic garbage collector's policy: off during bulk work, a settled heap in the server.

CPython's collector walks every tracked object at a full collection, and a young
collection every 700 allocations. Two kinds of work pay for that and gain nothing:
imports and bulk loads (everything they make lives on), and a loaded server (its
modules, app and live index are alive for the process's life). Decision: "The
server's garbage collector".
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "collector_off", "settle"]

YOUNG_THRESHOLD: Final = 10_000  # allocations between young collections (CPython's default: 700)


@contextmanager
def collector_off(*, freeze: bool = False) -> Iterator[None]:
    """Run a synchronous block with the cyclic collector off; `freeze` what it left alive.

    Reference counting still frees what the block drops. A collector that was off
    stays off. Frozen objects are never walked again (they move to the permanent
    generation): for imports, whose modules and classes live as long as the process.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def settle() -> None:
    """Once, as a server starts answering: collect, freeze what is alive, young GC rarer.

    Only the `serve` process calls it: an in-process server (the demo, tests) lives in
    a program whose heap is not the server's to freeze.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
