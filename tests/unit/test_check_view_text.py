"""What a check's answer and its log line say about the view it ran in."""

from __future__ import annotations

from typing import Any

from codefleet.fleet.tools.attemptchecks import CheckResult
from codefleet.fleet.views.runinview import ViewKind
from codefleet.models import CheckPurpose
from codefleet.wording import phrase


def result(**fields: Any) -> CheckResult:
    return CheckResult("test", CheckPurpose.TOOL, "pytest -q", exit_code=0, **fields)


def test_the_agent_is_told_whether_it_ran_in_an_overlay_or_a_copy_and_why_it_ran_twice() -> None:
    layer = result(view=ViewKind.LAYER, isolated=("a.py",)).render()
    rerun = result(view=ViewKind.COPY, disturbed=("b.py", "c.py")).render()

    assert "a private view (an overlay of the tree)" in layer
    assert "1 file(s) other agents are still editing were reset" in layer
    assert "a private view (a copy of the tree)" in rerun
    assert "it ran a second time because other agents began editing 2 file(s)" in rerun


def test_the_event_and_its_log_line_name_the_view_and_the_files_that_disturbed_it() -> None:
    event = result(view=ViewKind.COPY, disturbed=("b.py",)).finished_event(1)
    line = phrase("check_finished", event)
    quiet = phrase("check_finished", result(view=ViewKind.LAYER).finished_event(1))

    assert event["view"] == "copy" and event["disturbed"] == ["b.py"]
    assert (
        line == "check test (tool): passed (exit 0) in 0 ms in a copy (run again: files "
        "leased while it ran, b.py)"
    )
    assert quiet == "check test (tool): passed (exit 0) in 0 ms"
