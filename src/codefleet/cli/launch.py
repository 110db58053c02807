"""The `codefleet` executable: `codefleet hook ...` on a fast path, everything else via Typer.

`codefleet hook` runs on every write of a person's Claude Code session, so it
must not pay for importing Typer, Rich, pydantic or FastAPI: this launcher
hands it straight to the standard-library `codefleet.hook.command` and imports the
full command line only for the other commands, with the cyclic garbage
collector off while it does (`heap.collector_off`).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """Entry point of the `codefleet` console script (and `python -m codefleet`)."""
    if sys.argv[1:2] == ["hook"] and "--help" not in sys.argv:
        from codefleet.hook.command import main as hook_main

        return hook_main(sys.argv[2:])
    from codefleet.heap import collector_off

    with collector_off(freeze=True):  # imports live as long as the process
        from codefleet.cli.app import app

    app()
    return 0
