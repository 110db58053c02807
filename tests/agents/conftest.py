"""Fixtures for the agents tier: other vendors' real CLIs, installed from the lock beside this file.

`package.json` pins each CLI exactly and `package-lock.json` pins everything under it.
The first test of a run that needs them installs them with `npm ci --ignore-scripts`
into a cache folder named after the two files' hash (`$CODEFLEET_AGENT_CLIS`, default
`~/.cache/codefleet/agent-clis/<hash>`), so a later run, or a later session on the same
machine, reuses it and a changed pin installs afresh. Without `node` or `npm` the tier
is skipped with its reason, and fails when `CI` is set (`tool_support.unavailable`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents_support import AgentClis
from tool_support import require_tool, unavailable

from codefleet.offlinemodels.anthropicapi import FakeModel

HERE = Path(__file__).parent
PINNED = ("package.json", "package-lock.json")
CACHE_ENV = "CODEFLEET_AGENT_CLIS"
INSTALL_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def agent_clis() -> AgentClis:
    """The pinned CLIs, installed once per lock (see the module docstring)."""
    require_tool("node", "the agent CLIs run on node", "nodejs")
    npm = require_tool("npm", "the agent CLIs are installed with npm ci")
    root = _cache_root() / _lock_hash()
    if not _complete(root):
        with _install_lock(root):  # xdist workers (or other runs) install one at a time
            if not _complete(root):
                _install(npm, root)
    bin_dir = root / "node_modules" / ".bin"
    return AgentClis(bin_dir / "gemini", bin_dir / "copilot", root / "copilot-pkg")


@contextlib.contextmanager
def _install_lock(root: Path) -> Iterator[None]:
    """An exclusive `flock` beside `root`: one `npm ci` per lock, the others wait for it."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def _complete(root: Path) -> bool:
    return all((root / "node_modules" / ".bin" / cli).exists() for cli in ("gemini", "copilot"))


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """A started fake Anthropic model (Copilot CLI's own provider speaks to it), closed after."""
    with FakeModel() as fm:
        yield fm


def _cache_root() -> Path:
    given = os.environ.get(CACHE_ENV)
    return Path(given) if given else Path.home() / ".cache" / "codefleet" / "agent-clis"


def _lock_hash() -> str:
    digest = hashlib.sha256()
    for name in PINNED:
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def _install(npm: str, root: Path) -> None:
    """`npm ci` into a fresh folder beside `root`, then move it into place whole."""
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=root.parent))
    for name in PINNED:
        shutil.copy2(HERE / name, staging / name)
    done = subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=staging,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        unavailable(f"`npm ci` of tests/agents failed: {done.stderr.strip()[-500:]}")
    if root.exists() and not _complete(root):  # an install cut short: replace it
        shutil.rmtree(root, ignore_errors=True)
    try:
        staging.rename(root)
    except OSError:  # another run installed the same lock meanwhile: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
