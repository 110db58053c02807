"""CodeFleet: one shared working tree, many Claude Code agents, a per-file write lock."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("codefleet")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0.0.0+unknown"
