"""The `codefleet` executable: `hook` and the fleet-time commands on fast paths, the rest via Typer.

`codefleet hook` runs on every write of a person's Claude Code session, so it
must not pay for importing Typer, Rich, pydantic or FastAPI: this launcher
hands it straight to the standard-library `codefleet.hook.command`. The
commands a person types while a fleet runs (`tasks`, `say`, `answer`,
`questions`, `hold`, `release`) go to the standard-library `cli.operate.quick` first,
which hands back what it does not take exactly as Typer would (`--help`
among it), and `--version` is printed here. The full command line is imported only for the rest, with the
cyclic garbage collector off while it does (`gcpolicy.collector_off`); a part mapper's grammar
that does not load stops a command with one line naming its package (`parts.grammars`).
"""

from __future__ import annotations

import sys

__all__ = ["QUICK_COMMANDS", "main"]

# The commands a person types while a fleet runs: `cli.operate.quick` takes them without Typer
# (tests/unit/test_quick_commands.py holds the two lists to the same names).
QUICK_COMMANDS = frozenset({"tasks", "say", "answer", "questions", "hold", "release"})


def main() -> int:
    """Entry point of the `codefleet` console script (and `python -m codefleet`)."""
    if sys.argv[1:2] == ["hook"] and "--help" not in sys.argv:
        from codefleet.hook.command import main as hook_main

        return hook_main(sys.argv[2:])
    if sys.argv[1:] == ["--version"]:  # `cli.app`'s --version, without Typer
        import codefleet

        sys.stdout.write(f"codefleet {codefleet.__version__}\n")
        return 0
    if sys.argv[1:2] and sys.argv[1] in QUICK_COMMANDS:
        import os

        from codefleet.cli.operate.quick import run

        code = run(sys.argv[1:], os.environ)
        if code is not None:
            return code
    from codefleet.gcpolicy import collector_off
    from codefleet.parts.grammars import GrammarMissing

    with collector_off(freeze=True):  # imports live as long as the process
        from codefleet.cli.app import app

    try:
        app()
    except GrammarMissing as err:  # a broken install, found as a command starts: one line
        sys.stderr.write(f"codefleet: {err}\n")
        return 1
    return 0
