"""Starting the planning session: live (a real model) or offline (the built-in fake model).

Live, the session is the fleet's: the bundled Claude Code CLI through the SDK,
so it honours `ANTHROPIC_BASE_URL` and the key exactly as the agents' sessions
do. Offline, the same session talks to `codefleet.offlinemodels.anthropicapi` playing
`examples/plan-model.yaml` over the demo repository, with the fake's env
(loopback, a fake key, nothing else) and a private HOME under the run
directory, as `demo --offline` does. Either way a JSON record of every
message both ways is left in `run_dir/plans/`. The SDK is imported here only
when a plan runs, so `graph check` never loads it.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codefleet.config import Settings
from codefleet.paths import TreeRoot
from codefleet.planning.planner import FeedbackHook, Plan, PlanFailed, plan_graph, plan_record

if TYPE_CHECKING:
    from codefleet.offlinemodels.anthropicapi import FakeModel

__all__ = ["OFFLINE_SCRIPT", "PlanRun", "run_plan"]

OFFLINE_SCRIPT = "plan"  # the script id in examples/plan-model.yaml


@dataclass(frozen=True, slots=True)
class PlanRun:
    """What `run_plan` needs besides the settings."""

    goal: str
    tree: TreeRoot
    tasks: int | None = None
    runners: int = 3
    model_file: Path | None = None  # offline: the fake model's scripts


async def run_plan(
    settings: Settings, request: PlanRun, on_feedback: FeedbackHook | None = None
) -> tuple[Plan, Path]:
    """Run one planning session; the plan and the path of its record (or `PlanFailed`)."""
    from codefleet.session.readonly import ReadOnlySession, SessionFailed

    stamp = f"plan-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    record = settings.run_dir / "plans" / f"{stamp}.json"
    stderr: list[str] = []
    env, marker, fake = _environment(request, settings.run_dir / "homes" / stamp)
    session = ReadOnlySession(
        request.tree.root,
        model=settings.model,
        max_turns=settings.max_turns,
        max_budget_usd=settings.task_budget_usd,
        timeout=settings.task_timeout,
        env=env,
        stderr=stderr.append,
    )
    try:
        async with session:
            try:
                plan = await plan_graph(
                    session,
                    request.goal,
                    request.tree,
                    tasks=request.tasks,
                    runners=request.runners,
                    marker=marker,
                    on_feedback=on_feedback,
                )
            except PlanFailed as failed:
                _save(
                    record,
                    plan_record(request.goal, failed.exchanges, session.init, failed.cost_usd),
                    stderr,
                )
                raise
    except SessionFailed as err:
        raise PlanFailed(f"the planning session could not start: {err}") from None
    finally:
        if fake is not None:
            fake.close()
    _save(record, plan_record(request.goal, plan.exchanges, session.init, plan.cost_usd), stderr)
    return plan, record


def _environment(
    request: PlanRun, home: Path
) -> tuple[dict[str, str], str | None, FakeModel | None]:
    """Live: nothing added. Offline: the fake model's env, its script marker, the fake."""
    if request.model_file is None:
        return {}, None, None
    from codefleet.offlinemodels.anthropicapi import FakeModel, marker, session_env
    from codefleet.session.offline import BLANKED, load_model_scripts

    fake = FakeModel().start()
    for script_id, turns in load_model_scripts(request.model_file).items():
        fake.add_script(script_id, turns)
    return {**BLANKED, **session_env(fake, home)}, marker(OFFLINE_SCRIPT), fake


def _save(path: Path, record: dict[str, object], stderr: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**record, "stderr_tail": stderr[-50:]}
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
