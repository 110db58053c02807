"""The browser tier without a browser: skipped with its reason on a laptop, a failure in CI.

Runs pytest on one browser test in a subprocess with `CODEFLEET_CHROMIUM`
pointing at a path that does not exist, with and without `CI` set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONE_TEST = (
    "tests/browser/test_web_dashboard.py::test_without_its_token_the_page_asks_for_it_then_connects"
)


def run_browser_tier(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    missing = tmp_path / "no-such-chromium"
    return subprocess.run(
        [sys.executable, "-m", "pytest", ONE_TEST, "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**base, "CODEFLEET_CHROMIUM": str(missing), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_chromium_the_browser_tier_is_skipped_with_a_one_line_reason(
    tmp_path: Path,
) -> None:
    result = run_browser_tier(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons, result.stdout
    assert all(f"no Chromium at {tmp_path / 'no-such-chromium'}" in line for line in reasons)
    assert "failed" not in result.stdout and "error" not in result.stdout.lower()


def test_without_chromium_the_browser_tier_fails_when_ci_is_set(tmp_path: Path) -> None:
    result = run_browser_tier(tmp_path, CI="true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "CI is set: the browser tier must run there" in result.stdout
    assert "skipped" not in result.stdout
