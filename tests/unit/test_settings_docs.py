"""Every setting is an env var in `.env.example` and a flag on some command (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from codefleet.cli.app import app
from codefleet.config import Settings

ROOT = Path(__file__).resolve().parents[2]
FLAG_NAMES = {"server_url": "--server"}  # the one flag whose name is not the field's


def all_flags() -> set[str]:
    group = typer.main.get_command(app)
    flags: set[str] = set()
    for command in group.commands.values():  # type: ignore[attr-defined]
        for param in command.params:
            flags.update(param.opts)
            flags.update(getattr(param, "secondary_opts", []))
    return flags


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_listed_in_env_example(field: str) -> None:
    text = (ROOT / ".env.example").read_text()
    assert f"CODEFLEET_{field.upper()}=" in text


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_a_flag_on_some_command(field: str) -> None:
    flag = FLAG_NAMES.get(field, "--" + field.replace("_", "-"))
    assert flag in all_flags()
