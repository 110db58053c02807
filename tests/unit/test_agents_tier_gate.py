"""The agents tier without node: skipped with its reason on a laptop, a failure in CI.

Runs the whole of `tests/agents` in a subprocess whose PATH holds neither `node` nor
`npm`, with and without `CI` set (`tool_support.run_tier`). Without `CI` every test is
skipped with the one-line reason; with `CI` set, each fails with it, none is skipped:
the pinned CLIs cannot quietly drop out of CI's run.
"""

from __future__ import annotations

from pathlib import Path

from tool_support import run_tier

TIER = "tests/agents"


def test_every_agents_test_is_skipped_with_its_reason_without_node_or_fails_under_ci(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    laptop = run_tier(TIER, tmp_path / "laptop.xml", {"PATH": str(empty)})
    ci = run_tier(TIER, tmp_path / "ci.xml", {"PATH": str(empty), "CI": "true"})

    assert laptop and {o for o, _ in laptop.values()} == {"skipped"}, laptop
    assert all("no `node` on PATH" in message for _, message in laptop.values()), laptop
    assert laptop.keys() == ci.keys()
    assert {o for o, _ in ci.values()} <= {"failure", "error"}, ci
    assert all("CI is set" in message for _, message in ci.values()), ci
