"""Helpers for the commit tests: a real git repository, the person's state, the CLI.

Everything runs the real `git` binary. `person_state` is what `codefleet
commit` must never change: HEAD, the checked-out branch, `git status` and the
index file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from codefleet.statedir import STATE_DIR

IDENTITY = {"user.name": "Test Person", "user.email": "person@example.invalid"}


def git(tree: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent), "LC_ALL": "C"}
    done = subprocess.run(
        ["git", *args], cwd=tree, capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def make_repository(tree: Path) -> str:
    """`git init` the tree as it is, with a local identity; returns the first commit."""
    git(tree, "init", "--quiet", "--initial-branch=main")
    for key, value in IDENTITY.items():
        git(tree, "config", key, value)
    git(tree, "add", "--all")
    git(tree, "commit", "--quiet", "-m", "start")
    return git(tree, "rev-parse", "HEAD").strip()


def person_state(tree: Path) -> dict[str, str]:
    index = tree / ".git" / "index"
    return {
        "head": git(tree, "rev-parse", "HEAD").strip(),
        "branch": git(tree, "symbolic-ref", "HEAD").strip(),
        "status": git(tree, "status", "--porcelain", "--untracked-files=all"),
        "index": hashlib.sha256(index.read_bytes()).hexdigest(),
    }


def commits_on(tree: Path, branch: str) -> list[dict[str, Any]]:
    """The branch's commits past main, oldest first: sha, trailers, files touched."""
    shas = git(tree, "rev-list", "--reverse", f"main..{branch}").split()
    found = []
    for sha in shas:
        body = git(tree, "log", "-1", "--format=%B", sha)
        trailers = dict(
            line.split(": ", 1) for line in body.splitlines() if line.startswith("CodeFleet-")
        )
        files = git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split()
        found.append({"sha": sha, "body": body, "trailers": trailers, "files": sorted(files)})
    return found


def codefleet(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `codefleet` command line, as a subprocess (`env` added to ours)."""
    return subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def commit_json(url: str, *args: str) -> dict[str, Any]:
    done = codefleet("commit", "--server", url, "--json", *args)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def tree_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` but `.git`, caches and CodeFleet's own (git-ignored) state
    directory, with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file()
        and not {".git", STATE_DIR} & set(p.relative_to(root).parts)
        and "__pycache__" not in p.parts
    }


def checkout_to(tree: Path, commit: str, into: Path) -> Path:
    """The files of `commit`, written to `into` by `git archive` (the tree is not touched)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", commit], cwd=tree, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
