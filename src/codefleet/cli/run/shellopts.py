"""The command-line side of `run_command`: the `--shell*` flags and what a fleet gets.

`run --shell` (CODEFLEET_SHELL) gives every task the `run_command` tool unless
its own `shell:` says otherwise; a graph's or task's `shell: true` gives it
to that task alone. Commands run in an overlay layer (`fleet.views.layer`), under
bubblewrap when it works here. Without bubblewrap `run --shell` refuses to
start unless `--shell-unsandboxed` accepts commands that are not confined
(docs/security-commands.md, "Commands").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from codefleet.cli.common import fail
from codefleet.cli.settingopts import option
from codefleet.fleet.tools.commandtool import host_shell
from codefleet.fleet.views.layer import shell_support
from codefleet.fleet.views.layerapply import ShellLimits

if TYPE_CHECKING:
    from codefleet.config import Settings

__all__ = [
    "ShellMaxBytesOpt",
    "ShellMaxFilesOpt",
    "ShellNetworkOpt",
    "ShellOpt",
    "ShellUnsandboxedOpt",
    "fleet_shell",
]

ShellOpt = Annotated[bool | None, option("shell")]
ShellNetworkOpt = Annotated[bool | None, option("shell_network")]
ShellUnsandboxedOpt = Annotated[bool | None, option("shell_unsandboxed")]
ShellMaxFilesOpt = Annotated[int | None, option("shell_max_files")]
ShellMaxBytesOpt = Annotated[int | None, option("shell_max_bytes")]


def fleet_shell(settings: Settings) -> dict[str, Any]:
    """`run_fleet`'s shell keywords for these settings; refuses `--shell` with no sandbox."""
    limits = ShellLimits(settings.shell_max_files, settings.shell_max_bytes)
    config = host_shell(limits, settings.shell_unsandboxed, settings.check_dir)
    if settings.shell and config is None:
        support = shell_support()
        why = support.describe
        if support.problem is None:
            why += "; give --shell-unsandboxed to run commands without a sandbox"
        raise fail(f"--shell: {why}")
    return {
        "shell_default": settings.shell,
        "shell_network": settings.shell_network,
        "shell_config": config,
    }
