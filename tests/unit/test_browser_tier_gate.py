"""The browser tier without a browser: skipped with its reason on a laptop, a failure in CI.

Runs the whole of `tests/browser` in a subprocess with `CODEFLEET_CHROMIUM`
pointing at a path that does not exist, with and without `CI` set, and reads
each test's outcome from the JUnit report. Without `CI` no test may fail: every
test that needs Chromium is skipped with the one-line reason. With `CI` set,
exactly those tests fail with the reason, none is skipped. So every test of the
tier, present and future, goes through the one rule (`tool_support.missing`).
"""

from __future__ import annotations

from pathlib import Path

from tool_support import run_tier

TIER = "tests/browser"


def run_browser_tier(tmp_path: Path, **env: str) -> dict[str, tuple[str, str]]:
    """Each test of the tier: its outcome (passed, skipped, failure, error) and message."""
    report = tmp_path / f"tier-{'ci' if env.get('CI') else 'laptop'}.xml"
    missing = {"CODEFLEET_CHROMIUM": str(tmp_path / "no-such-chromium")}
    return run_tier(TIER, report, {**missing, **env})


def test_every_browser_test_is_skipped_with_its_reason_without_chromium_or_fails_under_ci(
    tmp_path: Path,
) -> None:
    laptop = run_browser_tier(tmp_path)
    ci = run_browser_tier(tmp_path, CI="true")

    reason = f"no Chromium at {tmp_path / 'no-such-chromium'}"
    skipped = {name for name, (outcome, _) in laptop.items() if outcome == "skipped"}
    assert skipped, laptop
    assert {o for o, _ in laptop.values()} <= {"passed", "skipped"}, laptop
    assert all(reason in message for o, message in laptop.values() if o == "skipped"), laptop
    assert laptop.keys() == ci.keys()
    failed_in_ci = {name for name, (outcome, _) in ci.items() if outcome != "passed"}
    assert failed_in_ci == skipped, ci
    assert all(ci[name][0] in ("failure", "error") for name in failed_in_ci), ci
    assert all("CI is set" in ci[name][1] for name in failed_in_ci), ci
