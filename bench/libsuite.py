"""A real library's test suite as a check's target: fetched, locked and synced at bench time.

`prepare(base)` puts the source distribution of `LIBRARY` (pure Python, its
tests shipped in the sdist: boltons, 519 tests, about 2 s bare) into
`base/LIBRARY-VERSION`, fetched from the package registry with `pip download`
run by `uvx` (`fetch`; never a registry host named here), makes it a git
repository (a check's content identity needs one), syncs its environment with
uv (its own `dev` group holds pytest) and commits the lock, or leaves it out
as the sdist does (then every `uv run` in a throwaway view resolves). `SUITE` is the check a task of
the benchmarks runs: the library's suite through `uv run`, as docs/checks.md
tells operators to name a check.

Used by `bench.checkstart` (what a check start costs) and `bench.checkspertask`
(checks per landed task).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Final

__all__ = ["LIBRARY", "SUITE", "VERSION", "fetch", "prepare", "uv_env"]

LIBRARY: Final = "boltons"
VERSION: Final = "26.2.0"
SUITE: Final = "uv run --project . pytest -q -p no:cacheprovider"
GIT: Final = ("git", "-c", "user.email=bench@example.com", "-c", "user.name=bench")


def uv_env() -> dict[str, str]:
    """This environment without CodeFleet's own virtualenv (uv would warn, or use it)."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT")}


def fetch(base: Path) -> Path:
    """The library's source distribution, downloaded into `base`; its path."""
    subprocess.run(
        ["uvx", "--from", "pip", "pip", "download", "--quiet", "--no-deps", "--no-binary",
         ":all:", "--dest", str(base), f"{LIBRARY}=={VERSION}"],
        check=True, env=uv_env(),
    )  # fmt: skip
    return next(base.glob("*.tar.gz"))


def prepare(base: Path, archive: Path | None = None, *, lock: bool = True) -> Path:
    """The library's tree under `base`: synced, committed, and its `uv.lock` committed too
    (`lock`) or left out, as the sdist ships (each `uv run` then resolves); its path."""
    archive = archive or fetch(base / "sdist")
    with tarfile.open(archive) as sdist:
        sdist.extractall(base, filter="data")
    tree = base / f"{LIBRARY}-{VERSION}"
    (tree / ".python-version").write_text("3.11\n")
    (tree / ".gitignore").write_text(
        ".venv/\n__pycache__/\n.codefleet/\n" + ("" if lock else "uv.lock\n")
    )
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["uv", "sync", "--quiet"], cwd=tree, check=True, env=uv_env())
    if not lock:
        (tree / "uv.lock").unlink()
    subprocess.run([*GIT, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*GIT, "commit", "-qm", LIBRARY], cwd=tree, check=True)
    return tree
