"""Checks and verify commands run in the target's environment, not CodeFleet's own virtualenv."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from codefleet.fleet.local import run_verify
from codefleet.fleet.views.shell import check_env

OWN = "/opt/codefleet/.venv"


def test_the_check_environment_drops_codefleets_virtualenv_and_uv_run_variables() -> None:
    base = {
        "PATH": f"{OWN}/bin:/home/me/.local/bin:/usr/bin",
        "VIRTUAL_ENV": OWN,
        "PYTHONPATH": "/opt/codefleet/src",
        "PYTHONHOME": "/opt/python",
        "UV": "/usr/bin/uv",
        "UV_RUN_RECURSION_DEPTH": "1",
        "UV_PROJECT_ENVIRONMENT": f"{OWN}",
        "UV_CACHE_DIR": "/cache/uv",
        "UV_OFFLINE": "1",
        "CODEFLEET_TOKEN": "secret",
        "ANTHROPIC_API_KEY": "sk-secret",
        "HOME": "/home/me",
    }

    env = check_env(Path("/tmp/view"), base, own_prefix=OWN)

    assert env == {
        "PATH": "/home/me/.local/bin:/usr/bin",
        "UV_CACHE_DIR": "/cache/uv",
        "UV_OFFLINE": "1",
        "HOME": "/home/me",
        "PWD": "/tmp/view",
    }


def test_the_virtualenv_named_by_virtual_env_is_dropped_from_path_even_when_codefleet_runs_elsewhere() -> (
    None
):
    base = {"PATH": "/work/.venv/bin/:/usr/bin", "VIRTUAL_ENV": "/work/.venv"}

    assert check_env(Path("/v"), base, own_prefix="")["PATH"] == "/usr/bin"


async def test_verify_runs_in_the_tree_without_codefleets_virtualenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_bin = os.path.join(sys.prefix, "bin")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)  # as under `uv run codefleet run ...`
    monkeypatch.setenv("PATH", own_bin + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))

    result = await run_verify(
        'echo "venv=${VIRTUAL_ENV:-none} pythonpath=${PYTHONPATH:-none} cwd=$(pwd)"; echo "$PATH"',
        tmp_path,
    )

    first, path = result.output.splitlines()[:2]
    assert first == f"venv=none pythonpath=none cwd={tmp_path.resolve()}"
    assert own_bin not in path.split(os.pathsep)
