"""The options `run` and `runner` share, declared once: `FleetFlags` and `with_fleet_flags`.

Both commands start runners, so both take where the fleet works (server, tree, run
directory), which agents it runs (`--dry-run`, `--offline`, `--agent`, their scripts),
each attempt's limits and checks, and the shell. `FleetFlags` declares each of those
options once, as a field whose type carries its `typer.Option`; `with_fleet_flags`
gives a command a parameter `flags: FleetFlags` that Typer sees as those options, in
the field order, and that the command receives filled in. A field named like a setting
is that setting's flag (`cli.common.settings_of` reads it from `ctx.params`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from codefleet.cli.common import (
    AgentOpt,
    BudgetOpt,
    CheckDirOpt,
    CheckTimeoutOpt,
    DryRunOpt,
    LeaseGranularityOpt,
    MaxTurnsOpt,
    ModelOpt,
    ModelScriptOpt,
    OfflineOpt,
    ProtectedOpt,
    ReconcileRoundsOpt,
    RepairTurnsOpt,
    ResourceWaitOpt,
    RunDirOpt,
    ScriptOpt,
    ServerOpt,
    TimeoutOpt,
    TokenOpt,
    UvLockCacheOpt,
    WorkdirOpt,
)
from codefleet.cli.run.agentchoice import AgentChoice
from codefleet.cli.run.shellopts import (
    ShellMaxBytesOpt,
    ShellMaxFilesOpt,
    ShellNetworkOpt,
    ShellOpt,
    ShellUnsandboxedOpt,
)
from codefleet.models import AgentKind

__all__ = ["FleetFlags", "with_fleet_flags"]


@dataclass(frozen=True, slots=True)
class FleetFlags:
    """The flags of `run` and `runner`, in the order their help lists them."""

    dry_run: DryRunOpt = False
    script: ScriptOpt = None
    offline: OfflineOpt = False
    model_script: ModelScriptOpt = None
    agent: AgentOpt = AgentKind.CLAUDE
    server: ServerOpt = None
    workdir: WorkdirOpt = None
    run_dir: RunDirOpt = None
    task_timeout: TimeoutOpt = None
    check_timeout: CheckTimeoutOpt = None
    check_dir: CheckDirOpt = None
    uv_lock_cache: UvLockCacheOpt = None
    reconcile_rounds: ReconcileRoundsOpt = None
    repair_turns: RepairTurnsOpt = None
    lease_granularity: LeaseGranularityOpt = None
    resource_wait: ResourceWaitOpt = None
    protected_paths: ProtectedOpt = None
    token: TokenOpt = None
    model: ModelOpt = None
    max_turns: MaxTurnsOpt = None
    task_budget_usd: BudgetOpt = None
    shell: ShellOpt = None
    shell_network: ShellNetworkOpt = None
    shell_unsandboxed: ShellUnsandboxedOpt = None
    shell_max_files: ShellMaxFilesOpt = None
    shell_max_bytes: ShellMaxBytesOpt = None

    def agents(self) -> AgentChoice:
        """Which agents the flags choose (`cli.run.agentchoice`)."""
        return AgentChoice(self.dry_run, self.script, self.offline, self.model_script, self.agent)


def _shared_parameters() -> list[inspect.Parameter]:
    """The fields of `FleetFlags` as keyword parameters, each typed with its option."""
    hints = typing.get_type_hints(FleetFlags, include_extras=True)
    return [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]
        )
        for f in fields(FleetFlags)
    ]


def with_fleet_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command(..., flags: FleetFlags, ...)` as Typer sees it: the fields of `FleetFlags` as
    options where `flags` stands, gathered into one `FleetFlags` when the command runs."""
    own = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    for param in own.parameters.values():
        if param.name == "flags":
            params += _shared_parameters()
        else:
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    names = [f.name for f in fields(FleetFlags)]

    @functools.wraps(command)
    def gathered(**given: Any) -> Any:
        flags = FleetFlags(**{name: given.pop(name) for name in names})
        return command(flags=flags, **given)

    gathered.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
    gathered.__annotations__ = {p.name: p.annotation for p in params}
    return gathered
