"""`python -m codefleet.cli`: the full command line (no hook fast path)."""

from codefleet.cli.app import app

app()
