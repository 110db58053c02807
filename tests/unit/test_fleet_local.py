"""`fleet.local.FleetOptions`: every runner takes the fleet's runner options whole, under its own
name and agent kind; the landing worker takes the tree's protection and the check settings."""

from __future__ import annotations

from pathlib import Path

from codefleet.fleet.local import FleetOptions
from codefleet.fleet.runner import RunnerOptions


def test_each_runner_takes_the_fleets_options_under_its_own_name_and_kind(tmp_path: Path) -> None:
    shared = RunnerOptions(
        "runner", tmp_path, tmp_path / "runs", task_timeout=30.0, check_timeout=7.0,
        protected=(tmp_path / "db",), no_questions=True, reconcile_rounds=2,
    )  # fmt: skip
    fleet = FleetOptions(
        shared,
        runners=3,
        name_suffix=".host.7",
        agent_for=lambda n: "codex" if n == 3 else "claude",
    )

    options = [fleet.runner_options(n) for n in (1, 2, 3)]

    assert [(o.name, o.agent) for o in options] == [
        ("runner-1.host.7", "claude"),
        ("runner-2.host.7", "claude"),
        ("codex-3.host.7", "codex"),
    ]
    for o in options:
        assert (o.task_timeout, o.check_timeout, o.protected) == (30.0, 7.0, (tmp_path / "db",))
        assert (o.no_questions, o.reconcile_rounds, o.workdir) == (True, 2, tmp_path)


def test_without_agent_for_every_runner_is_claude_and_the_landing_worker_follows_the_suffix(
    tmp_path: Path,
) -> None:
    shared = RunnerOptions(
        "runner", tmp_path, tmp_path / "runs", check_timeout=9.0, check_dir=tmp_path / "views",
        protected=(tmp_path / "db",),
    )  # fmt: skip
    fleet = FleetOptions(shared, runners=2, name_suffix="-x")

    assert [fleet.runner_options(n).name for n in (1, 2)] == ["runner-1-x", "runner-2-x"]
    assert {fleet.runner_options(n).agent for n in (1, 2)} == {"claude"}
    lander = fleet.landing()
    assert (lander.name, lander.check_timeout) == ("landing-x", 9.0)
    assert fleet.landing(2).name == "landing-2-x"  # one beside each runner
    assert (lander.exclude, lander.view_dir) == ((tmp_path / "db",), tmp_path / "views")


def test_every_runner_and_landing_worker_of_a_fleet_share_one_map_of_the_tasks_passes(
    tmp_path: Path,
) -> None:
    fleet = FleetOptions(RunnerOptions("runner", tmp_path, tmp_path / "runs"), runners=2)

    passes = {id(fleet.runner_options(n).check_passes) for n in (1, 2)}
    passes |= {id(fleet.landing(n).attempt_passes) for n in (1, 2)}
    assert passes == {id(fleet.attempt_passes)}  # what a runner keeps, every worker reads
