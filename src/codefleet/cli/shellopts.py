"""The command-line side of `run_command`: the `--shell*` flags and what a fleet gets.

`run --shell` (CODEFLEET_SHELL) gives every task the `run_command` tool unless
its own `shell:` says otherwise; a graph's or task's `shell: true` gives it
to that task alone. Commands run in an overlay layer (`fleet.layer`), under
bubblewrap when it works here. Without bubblewrap `run --shell` refuses to
start unless `--shell-unsandboxed` accepts commands that are not confined
(docs/security.md, "Commands"). Imports stay inside the functions: `--help`
must stay cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from codefleet.cli.common import fail

if TYPE_CHECKING:
    from codefleet.config import Settings

__all__ = [
    "ShellMaxBytesOpt",
    "ShellMaxFilesOpt",
    "ShellNetworkOpt",
    "ShellOpt",
    "ShellUnsandboxedOpt",
    "fleet_shell",
    "shell_settings",
]

ShellOpt = Annotated[
    bool | None,
    typer.Option(
        "--shell/--no-shell",
        help="Give every task the run_command tool (a command in a throwaway layer whose "
        "changes land only through the leases), unless its shell: key says otherwise "
        "[CODEFLEET_SHELL].",
    ),
]
ShellNetworkOpt = Annotated[
    bool | None,
    typer.Option(
        "--shell-network/--no-shell-network",
        help="Let commands use the network (off by default) [CODEFLEET_SHELL_NETWORK].",
    ),
]
ShellUnsandboxedOpt = Annotated[
    bool | None,
    typer.Option(
        "--shell-unsandboxed/--no-shell-unsandboxed",
        help="Without bubblewrap, run commands anyway, NOT sandboxed (the layer still keeps "
        "their writes out of the tree) [CODEFLEET_SHELL_UNSANDBOXED].",
    ),
]
ShellMaxFilesOpt = Annotated[
    int | None,
    typer.Option(
        "--shell-max-files",
        help="Most files one command may change; over it nothing is applied "
        "[CODEFLEET_SHELL_MAX_FILES].",
    ),
]
ShellMaxBytesOpt = Annotated[
    int | None,
    typer.Option(
        "--shell-max-bytes",
        help="Most bytes one command may apply; over it nothing is applied "
        "[CODEFLEET_SHELL_MAX_BYTES].",
    ),
]


def shell_settings(
    on: bool | None,
    network: bool | None,
    unsandboxed: bool | None,
    max_files: int | None,
    max_bytes: int | None,
) -> dict[str, Any]:
    """The `--shell*` flags as `settings_from` overrides (None: not given)."""
    return {
        "shell": on, "shell_network": network, "shell_unsandboxed": unsandboxed,
        "shell_max_files": max_files, "shell_max_bytes": max_bytes,
    }  # fmt: skip


def fleet_shell(settings: Settings) -> dict[str, Any]:
    """`run_fleet`'s shell keywords for these settings; refuses `--shell` with no sandbox."""
    from codefleet.fleet.apply import ShellLimits
    from codefleet.fleet.commands import host_shell
    from codefleet.fleet.layer import shell_support

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
