"""CodeFleet: one shared working tree, many Claude Code agents, a per-file write lock.

`__version__` is read from the installed package metadata on first use, not at
import: `codefleet hook` imports this package on every write of a person's
Claude Code session, and `importlib.metadata` alone costs tens of milliseconds.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module 'codefleet' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("codefleet")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
