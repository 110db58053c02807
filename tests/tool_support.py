"""A system tool a test needs: found, skipped with its reason, or (under CI) a failure."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, why: str, package: str | None = None) -> str:
    """The path of system tool `name`; without it skip with a one-line reason, or fail under CI.

    CI (`CI` set) installs every tool a tier needs, so there a missing one is a failure,
    never a skip into green.
    """
    found = shutil.which(name)
    if found is None:
        message = f"no `{name}` on PATH ({why}; apt-get install {package or name})"
        if os.environ.get("CI"):
            pytest.fail(message + ": CI must run this test")
        pytest.skip(message)
    return found
