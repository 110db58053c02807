"""What a test needs from the machine: found, skipped with its reason, or (under CI) a failure.

`unavailable` is the one rule every such test goes through: a system tool
(`require_tool`) or the browser tier's Chromium (`tests/browser`).
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def unavailable(message: str) -> NoReturn:
    """Skip the test with the one-line `message`, or fail it when `CI` is set.

    CI installs everything every tier needs, so there a missing one is a failure,
    never a skip into green.
    """
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: CI must run this test)")
    pytest.skip(message)


def require_tool(name: str, why: str, package: str | None = None) -> str:
    """The path of system tool `name`; without it the test is `unavailable`."""
    found = shutil.which(name)
    if found is None:
        unavailable(f"no `{name}` on PATH ({why}; apt-get install {package or name})")
    return found
