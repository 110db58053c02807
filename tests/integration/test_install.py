"""Install once, use anywhere: the wheel as a uv tool puts `codefleet` on PATH.

Builds the wheel from this checkout and installs it with `uv tool install`
into temporary tool and bin directories (from uv's cache: `--offline`, no
network), then runs the installed `codefleet` from inside another repository:
`--version`, `init` and `doctor`. Nothing is created in that repository but
what `init` writes (no `.venv`). `plan --offline` works from the installed
tool (uv installs its files as hard links) and writes nothing into the
installation. The wheel is built and installed once for the module.
`.ci/run` also runs the demo from the installed tool.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from codefleet import __version__

ROOT = Path(__file__).resolve().parents[2]


def uv(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["uv", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass(frozen=True)
class Installed:
    codefleet: Path
    tools: Path  # where uv put the tool's environment
    env: dict[str, str]

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.codefleet), *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert shutil.which("uv"), "uv is needed to install CodeFleet as a tool"
    tmp_path = tmp_path_factory.mktemp("install")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CODEFLEET_", "VIRTUAL_ENV", "UV_PROJECT"))
    }
    env |= {"UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin")}
    # Python's own bytecode cache is not the tool writing into itself: keep it out whatever
    # the outer environment says (CI lets the suite's processes share compiled modules).
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    uv("build", "--wheel", "--offline", "-q", "-o", str(tmp_path / "dist"), env=env)
    (wheel,) = (tmp_path / "dist").glob("codefleet-*.whl")
    # Not --offline: resolving a tool's dependencies reads the package index, which a fresh
    # machine's uv cache holds only after a first online resolution (`uv sync --locked`
    # installs from the lock's URLs and never fills it).
    uv("tool", "install", "-q", str(wheel), env=env)
    return Installed(tmp_path / "bin" / "codefleet", tmp_path / "tools", env)


def test_the_wheel_installs_as_a_uv_tool_and_works_from_another_repository(
    installed: Installed, tmp_path: Path
) -> None:
    repo = tmp_path / "someone-elses-repo"
    repo.mkdir()
    (repo / "README.md").write_text("# theirs\n")

    version = installed.run("--version", cwd=repo)
    init = installed.run("init", cwd=repo)
    doctor = installed.run("doctor", "--json", cwd=repo)

    assert version.returncode == 0 and version.stdout.strip() == f"codefleet {__version__}"
    assert init.returncode == 0, init.stderr
    assert (repo / "codefleet.yaml").is_file()
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["workdir"]["ok"] and str(repo) in checks["workdir"]["detail"]
    assert checks["graph"]["ok"], checks["graph"]
    assert checks["claude-cli"]["ok"], checks["claude-cli"]
    assert sorted(p.name for p in repo.iterdir()) == ["README.md", "codefleet.yaml"]


def test_the_installed_tool_plans_offline_in_a_copy_and_writes_nothing_into_itself(
    installed: Installed, tmp_path: Path
) -> None:
    before = sorted(installed.tools.rglob("*"))
    repo = tmp_path / "mine"
    repo.mkdir()

    plan = installed.run("plan", "--offline", "Add a feature", "-o", "tasks.yaml", cwd=repo)

    assert plan.returncode == 0, plan.stdout + plan.stderr
    said = " ".join(plan.stdout.split())
    assert "simulated, nothing spent" in said
    header = [line for line in (repo / "tasks.yaml").read_text().splitlines() if "cost:" in line]
    assert len(header) == 1 and "simulated, nothing spent" in header[0]
    assert sorted(installed.tools.rglob("*")) == before
