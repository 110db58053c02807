"""What a test needs from the machine: found, skipped with its reason, or (under CI) a failure.

`unavailable` is the one rule every such test goes through: a system tool
(`require_tool`) or the browser tier's Chromium (`tests/browser`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
# For an agent's command (`run_command`): the interpreter itself, not the entry point in
# CodeFleet's venv, which a command does not see when the checkout sits under /tmp (a CI
# clone), behind the sandbox's private /tmp.
COMMAND_PYTHON = os.path.realpath(sys.executable)


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


def run_tier(tier: str, report: Path, env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Run the tests under `tier` in a subprocess with `env` over this one's (less `CI`):
    each test's outcome (passed, skipped, failure, error) and message, from its JUnit report.

    `-n 0`: the tier runs in that one process, not in the project's parallel workers."""
    base = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            tier,
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
        ],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        found = [c for c in case if c.tag in ("skipped", "failure", "error")]
        outcomes[name] = (found[0].tag, found[0].get("message") or "") if found else ("passed", "")
    return outcomes
