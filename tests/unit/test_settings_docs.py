"""A setting is declared once: `Settings` (type, default, bounds) and its `FLAGS` row (help).

Everything else is derived or checked here (DESIGN §6; docs/decisions/0128-a-setting-is-declared-once.md, "A
setting is declared once"): its `CODEFLEET_*` line in `.env.example` with the
default, its flag on some command, its `--no-` form when it is a switch, and
the engine's configuration field of the same name.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup

from codefleet.cli.app import app
from codefleet.cli.settingopts import FLAGS, env_var
from codefleet.config import Settings
from codefleet.coord.policy.engineconfig import DERIVED, EngineConfig

ROOT = Path(__file__).resolve().parents[2]
FIELDS = sorted(Settings.model_fields)
# Parameters named like a setting that are not it: each command's own meaning of the word.
NOT_THE_SETTING = {
    ("demo", "runners"),  # the demo's fleet size
    ("graph check", "runners"),  # the fleet size to predict parallelism for
    ("plan", "runners"),
    ("commit", "workdir"),  # the tree to commit (default: the server's)
    ("join", "workdir"),  # the tree whose sessions join (default: here)
    ("leave", "workdir"),
    ("land", "workdir"),  # a directory of the repository
}
# Setting flags on a parameter of another name (the command passes it to `settings_from`).
RENAMED = {("plan", "max_budget_usd"): "task_budget_usd"}


def all_params() -> list[tuple[str, Any]]:
    """Every option of every command, as (command path, click parameter)."""

    def walk(command: Any, path: str) -> list[tuple[str, Any]]:
        found = [(path, param) for param in getattr(command, "params", [])]
        if isinstance(command, TyperGroup):  # the root loads its commands on use (cli.app)
            ctx = typer.Context(command)
            for name in command.list_commands(ctx):
                found += walk(command.get_command(ctx, name), f"{path} {name}".strip())
        return found

    return walk(typer.main.get_command(app), "")


def flag_of(field: str) -> str:
    decls = FLAGS[field].decls
    return decls[0].split("/")[0] if decls else "--" + field.replace("_", "-")


def test_every_setting_has_exactly_one_row_of_flag_help() -> None:
    assert sorted(FLAGS) == FIELDS


@pytest.mark.parametrize("field", FIELDS)
def test_every_setting_is_listed_in_env_example(field: str) -> None:
    text = (ROOT / ".env.example").read_text()
    assert f"{env_var(field)}=" in text


def defaults(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings as the code defaults them: no `CODEFLEET_*` variable, no `.env`."""
    for name in [n for n in os.environ if n.startswith("CODEFLEET_")]:
        monkeypatch.delenv(name)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_env_example_states_every_default(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = defaults(monkeypatch)
    assert Settings(_env_file=ROOT / ".env.example") == expected  # type: ignore[call-arg]


@pytest.mark.parametrize("field", FIELDS)
def test_every_setting_is_a_flag_on_some_command(field: str) -> None:
    flags = {opt for _, param in all_params() for opt in param.opts}
    assert flag_of(field) in flags


@pytest.mark.parametrize(
    "field", [f for f in FIELDS if Settings.model_fields[f].annotation is bool]
)
def test_a_switch_setting_can_be_turned_off_on_the_command_line(field: str) -> None:
    """`CODEFLEET_SHELL=1` in `.env` is overridden by `--no-shell`, so each switch has its pair."""
    params = [p for _, p in all_params() if flag_of(field) in p.opts]
    assert params
    assert all(p.secondary_opts for p in params), f"{flag_of(field)} has no --no- form"


def test_a_parameter_named_like_a_setting_is_that_settings_flag() -> None:
    """`settings_of(ctx.params)` takes every parameter named like a setting as that setting."""
    wrong = [
        f"codefleet {path} {param.name}: help {param.help!r}"
        for path, param in all_params()
        if param.name in FLAGS
        and (path, param.name) not in NOT_THE_SETTING
        and FLAGS[param.name].names_env
        and not (param.help or "").endswith(f"[{env_var(param.name)}].")
    ]
    assert wrong == [], "build it with cli.settingopts.option, or list it in NOT_THE_SETTING"


def test_a_setting_flag_sits_on_the_parameter_of_the_settings_name() -> None:
    """The other way round: a flag that names `[CODEFLEET_X]` is on a parameter named x."""
    wrong = []
    for path, param in all_params():
        field = RENAMED.get((path, param.name), param.name)
        named = [f for f in FLAGS if f"[{env_var(f)}]." in (param.help or "")]
        if named and named != [field]:
            wrong.append(f"codefleet {path} {param.name}: names {named}")
    assert wrong == []


def test_every_engine_config_field_comes_from_the_setting_of_its_name_or_is_derived() -> None:
    names = [field.name for field in dataclasses.fields(EngineConfig)]
    assert [n for n in names if n not in Settings.model_fields and n not in DERIVED] == []
    assert [n for n in DERIVED if n in Settings.model_fields or n not in names] == []


def test_the_engine_and_the_settings_share_each_default(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = defaults(monkeypatch)
    for field in dataclasses.fields(EngineConfig):
        if field.name not in DERIVED:
            assert field.default == getattr(settings, field.name), field.name
