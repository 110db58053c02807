"""CodeFleet: one shared working tree, many Claude Code agents, a per-file write lock."""

__version__ = "0.1.0"
