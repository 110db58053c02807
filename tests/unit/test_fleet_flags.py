"""`run` and `runner` share one declaration of their flags; the transport knobs are hidden, not gone.

`cli.run.fleetopts.FleetFlags` declares the options both commands take; each command
parses them into one `FleetFlags` and, for the settings among them, `ctx.params`. A
transport knob (`cli.settingopts`, `transport=True`) is left out of its command's option
list and named after it, and still reaches the settings from its flag and from its
`CODEFLEET_*` variable (decision 0169).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.cli.common import settings_of
from codefleet.cli.run.fleetopts import FleetFlags
from codefleet.cli.settingopts import FLAGS, env_var

TRANSPORT = sorted(name for name, flag in FLAGS.items() if flag.transport)
# a value each knob accepts, as typed on the command line, and as the settings read it
VALUES: dict[str, tuple[str, Any]] = {
    "backoff_base": ("2.5", 2.5),
    "backoff_cap": ("9", 9.0),
    "shell_max_files": ("7", 7),
    "shell_max_bytes": ("4096", 4096),
    "tls_cert": ("cert.pem", Path("cert.pem")),
    "tls_key": ("key.pem", Path("key.pem")),
    "read_timeout": ("7.5", 7.5),
    "keep_alive_timeout": ("3", 3.0),
    "max_connections": ("64", 64),
    "max_streams": ("9", 9),
}


def command(name: str) -> typer.core.TyperCommand:
    root = typer.main.get_command(app)
    found = root.get_command(typer.Context(root), name)  # type: ignore[attr-defined]
    assert found is not None
    return found


def parsed(name: str, argv: list[str]) -> typer.Context:
    """The context `codefleet NAME ARGV` parses into (the command is not run)."""
    return command(name).make_context(name, argv)


def commands_with(flag: str) -> list[str]:
    return [c for c in ("serve", "run", "runner") if any(p.name == flag for p in command(c).params)]


def test_every_transport_knob_has_a_value_here_and_a_command() -> None:
    assert sorted(VALUES) == TRANSPORT
    assert all(commands_with(name) for name in TRANSPORT)


@pytest.mark.parametrize("name", TRANSPORT)
def test_a_transport_knob_is_hidden_from_the_options_and_named_after_them(name: str) -> None:
    flag = "--" + name.replace("_", "-")
    for cmd in commands_with(name):
        text = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "200"}).output
        options, _, after = text.partition("Transport knobs, not listed above")
        assert f"  {flag} " not in options, f"`codefleet {cmd} --help` lists {flag}"
        assert flag in after.partition("\n\n")[0], f"`codefleet {cmd} --help` does not name {flag}"


@pytest.mark.parametrize("name", TRANSPORT)
def test_a_transport_knob_reaches_the_settings_by_flag_and_by_environment(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    typed, value = VALUES[name]
    for cmd in commands_with(name):
        monkeypatch.delenv(env_var(name), raising=False)
        by_flag = settings_of(
            parsed(cmd, _needed(cmd, "--" + name.replace("_", "-"), typed)).params
        )
        assert getattr(by_flag, name) == value, f"codefleet {cmd} --{name}"
        monkeypatch.setenv(env_var(name), typed)
        by_env = settings_of(parsed(cmd, _needed(cmd)).params, find_server=False)
        assert getattr(by_env, name) == value, f"{env_var(name)} for codefleet {cmd}"


def _needed(cmd: str, *argv: str) -> list[str]:
    """`argv` with what the command requires (`runner --name`), and a server address so the
    settings do not go looking for this tree's server."""
    if cmd == "serve":  # it is the server (`settings_of(..., find_server=False)`)
        return list(argv)
    return [*(["--name", "r1"] if cmd == "runner" else []), "--server", "http://127.0.0.1:9", *argv]


def test_run_and_runner_take_the_same_declaration_of_the_shared_flags() -> None:
    shared = [f.name for f in dataclasses.fields(FleetFlags)]
    for cmd in ("run", "runner"):
        params = {p.name: p for p in command(cmd).params}
        assert set(shared) <= set(params), f"codefleet {cmd} lacks {set(shared) - set(params)}"
    run, runner = ({p.name: p for p in command(c).params} for c in ("run", "runner"))
    for name in shared:
        assert (run[name].opts, run[name].help, run[name].default) == (
            runner[name].opts,
            runner[name].help,
            runner[name].default,
        )


@pytest.mark.parametrize("cmd", ["run", "runner"])
@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--dry-run"], "--dry-run needs --script FILE"),
        (["--offline"], "--offline needs --model-script FILE"),
        (["--dry-run", "--script", "absent.yaml"], "absent.yaml"),
    ],
)
def test_the_shared_flags_reach_the_agent_choice(
    cmd: str, given: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command reads its agents from the one `FleetFlags` it was given."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [cmd, *_needed(cmd, *given)], env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert said in " ".join(result.output.split())
