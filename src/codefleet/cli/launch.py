"""The `codefleet` executable: `codefleet hook ...` on a fast path, everything else via Typer.

`codefleet hook` runs on every write of a person's Claude Code session, so it
must not pay for importing Typer, Rich, pydantic or FastAPI: this launcher
hands it straight to the standard-library `codefleet.hook.command` and imports the
full command line only for the other commands, with the cyclic garbage
collector off while it does (`quiet_gc`).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["main", "quiet_gc"]


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Run a block of imports with the cyclic collector off, then freeze what they made.

    Imports allocate tens of thousands of objects that live as long as the process
    (modules, classes, functions, validators): collecting while they run frees
    nothing, and frozen they are not scanned again by later collections.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def main() -> int:
    """Entry point of the `codefleet` console script (and `python -m codefleet`)."""
    if sys.argv[1:2] == ["hook"] and "--help" not in sys.argv:
        from codefleet.hook.command import main as hook_main

        return hook_main(sys.argv[2:])
    with quiet_gc():
        from codefleet.cli.app import app

    app()
    return 0
