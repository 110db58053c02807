"""The landing worker's records on the wire: a step and a check run, said and read back.

`api.landingrecords` makes each record's JSON in one place and reads it in one place;
the server's request body (`api.wire.LandingCheckResult`) must accept what a worker says.
"""

from __future__ import annotations

from codefleet.api.landingrecords import CheckRun, LandingStep, StepCheck
from codefleet.api.wire import LandingResultBody
from codefleet.models import CheckVerdict


def test_a_step_reads_back_from_its_json_as_the_claim_said_it() -> None:
    step = LandingStep(7, "batch", ("T1", "T2"), 3, (StepCheck("test", "pytest -q"),), 2.5)

    wire = step.to_wire()

    assert wire == {
        "step": 7,
        "purpose": "batch",
        "batch": ["T1", "T2"],
        "base": 3,
        "checks": [{"name": "test", "command": "pytest -q"}],
        "beat_s": 2.5,
    }
    assert LandingStep.from_wire(wire) == step


def test_a_run_says_its_optional_fields_only_when_set() -> None:
    ran = CheckRun("test", CheckVerdict.FAILED, exit_code=1, output="boom", output_tail="boom")
    not_run = CheckRun("test", CheckVerdict.DID_NOT_RUN, error="no view")

    assert ran.to_wire() == {
        "check": "test",
        "verdict": "failed",
        "exit_code": 1,
        "output": "boom",
        "output_tail": "boom",
    }
    assert not_run.to_wire() == {
        "check": "test",
        "verdict": "did_not_run",
        "error": "no view",
        "output": "",
        "output_tail": "",
    }


def test_what_a_worker_says_the_server_body_accepts_and_reads_back_the_same() -> None:
    run = CheckRun(
        "test", CheckVerdict.PASSED, 0, 1200, 30, "layer", None, "ok", "ok", "a" * 64, "skipped"
    )

    body = LandingResultBody.model_validate({"results": [run.to_wire()]})

    assert [CheckRun.from_wire(r.model_dump()) for r in body.results] == [run]
