"""Which agents a fleet runs: real Claude sessions, the scripted executor, or the offline model.

`codefleet run` and `codefleet runner` pick one from their flags:

- no flag: real Claude Code sessions (needs a key or a `claude` login);
- `--dry-run --script FILE`: the scripted executor plays FILE (no model, no CLI);
- `--offline --model-script FILE`: real Claude Code sessions against CodeFleet's
  built-in scripted model (`codefleet.testing`) playing FILE: no key, no cost.

`--agent codex` makes the sessions Codex ones (`session.codex`), live or offline
(the same model file, its writes played as patches); the scripted executor is
the same for every agent kind.

A scripted choice knows which tasks its file covers, so a run refuses to start
on tasks it has no script for instead of "succeeding" them with no change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.config import Settings
from codefleet.fleet.executor import Executor
from codefleet.models import AgentKind
from codefleet.session.credentials import credentials_problem

__all__ = ["KEYLESS_RUN", "AgentChoice", "AgentSetupError", "Agents", "choose_agents"]

KEYLESS_RUN: Final = (
    "--dry-run --script FILE (scripted agents, no model) or --offline --model-script FILE "
    "(the real Claude Code CLI against CodeFleet's scripted model)"
)


class AgentSetupError(ValueError):
    """Flags or files that cannot make a fleet's agents, with a message for a person."""


@dataclass(frozen=True, slots=True)
class AgentChoice:
    dry_run: bool = False
    script: Path | None = None
    offline: bool = False
    model_script: Path | None = None
    agent: AgentKind = AgentKind.CLAUDE

    @property
    def mode(self) -> str:
        return "dry-run" if self.dry_run else "offline" if self.offline else "live"


@dataclass(frozen=True, slots=True)
class Agents:
    """The executor a fleet's runners share, and which tasks it has a script for."""

    executor: Executor
    mode: str
    covers: Callable[[str], bool]

    def uncovered(self, task_ids: Iterable[str]) -> list[str]:
        return [t for t in task_ids if not self.covers(t)]


def choose_agents(choice: AgentChoice, settings: Settings) -> Agents:
    """The agents the flags ask for, or `AgentSetupError` saying what is missing."""
    if choice.dry_run and choice.offline:
        raise AgentSetupError("--dry-run and --offline exclude each other: pick one")
    if choice.script is not None and not choice.dry_run:
        raise AgentSetupError("--script goes with --dry-run (the scripted agents play it)")
    if choice.model_script is not None and not choice.offline:
        raise AgentSetupError("--model-script goes with --offline (the scripted model plays it)")
    if choice.dry_run:
        return _scripted(choice.script)
    if choice.offline:
        return _offline(choice.model_script, settings, choice.agent)
    if choice.agent is AgentKind.CODEX:
        return _live_codex()
    return _live(settings)


def _scripted(script: Path | None) -> Agents:
    from codefleet.fleet.scripted import (  # on use: only the chosen agent's executor (and its SDK) loads
        ScriptedExecutor,
        ScriptError,
        load_script,
    )

    if script is None:
        raise AgentSetupError(
            "--dry-run needs --script FILE: the steps each task's scripted agent plays "
            "(the format: codefleet run --help); without one no task would change anything"
        )
    try:
        steps = load_script(script)
    except ScriptError as err:
        raise AgentSetupError(str(err)) from None
    return Agents(ScriptedExecutor(steps), "dry-run", steps.__contains__)


def _offline(model_script: Path | None, settings: Settings, agent: AgentKind) -> Agents:
    if model_script is None:
        raise AgentSetupError(
            "--offline needs --model-script FILE: the scripted model's turns per task "
            "(the format: codefleet run --help, under Offline model script)"
        )
    from codefleet.session.offline import (  # on use: only the chosen agent's executor (and its SDK) loads
        ModelFileError,
        offline_executor,
        shared_model,
    )

    try:
        fake, script_ids = shared_model(model_script.resolve())
    except ModelFileError as err:
        raise AgentSetupError(str(err)) from None
    executor: Executor = offline_executor(
        fake, script_ids, max_turns=settings.max_turns, max_budget_usd=settings.task_budget_usd
    )
    if agent is AgentKind.CODEX:
        from codefleet.session.codexagents import (
            offline_codex_executor,  # on use: only the chosen agent's executor (and its SDK) loads
        )

        executor = offline_codex_executor(fake, script_ids)  # the shared model speaks both wires

    def covers(task_id: str) -> bool:
        return task_id in script_ids or any(s.startswith(f"{task_id}-a") for s in script_ids)

    return Agents(executor, "offline", covers)


def _live_codex() -> Agents:
    from codefleet.session.codexagents import (  # on use: only the chosen agent's executor (and its SDK) loads
        MissingCodexKey,
        live_codex_executor,
    )

    try:
        return Agents(live_codex_executor(), "live", lambda _: True)
    except MissingCodexKey as err:
        raise AgentSetupError(str(err)) from None


def _live(settings: Settings) -> Agents:
    problem = credentials_problem(KEYLESS_RUN)
    if problem:
        raise AgentSetupError(problem)
    from codefleet.session.sdk import (
        SessionExecutor,  # on use: only the chosen agent's executor (and its SDK) loads
    )

    executor = SessionExecutor(
        model=settings.model, max_turns=settings.max_turns, max_budget_usd=settings.task_budget_usd
    )
    return Agents(executor, "live", lambda _: True)
