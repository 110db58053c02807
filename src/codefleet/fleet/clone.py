"""A runner's own clone of the landed line: where its agents work when it shares no disk.

A runner started with `--clone DIR` works in DIR, a git clone of the server's
landed line (`review.landedline`: one commit per landed task, fetched with plain
git over the server's port and token, `server.gitbackend`), instead of a mount
of the shared tree. What keeps the lock's promises there:

- **Before each attempt** the clone is reset to the line's tip: `git reset
  --hard`, untracked files removed (ignored ones kept: caches, virtual
  environments), and whatever the last attempt wrote that the line does not
  have removed too (`reset`).
- **At each grant** the server names the version of every granted file it
  holds: the SHA-256 of its content in the server's tree, which is the file as
  its previous holders landed it (`coord.calls.runnercalls.RunnerCalls.versions`).
  A clone whose file differs fetches the line until its tip has that version
  and takes the file from it before the write is allowed (`level`): a task never
  edits a file its previous holder changed without seeing that change. A line
  that has not caught up within `level_wait_s` is a denial, never a guess.
- **Before its reads are validated** the clone takes every file the line
  changed since the attempt began that the attempt does not hold (`catch_up`),
  once the server says its line holds every landing so far (`AsyncClone`), so a
  stale read is found as in the tree (`fleet.gate.stale`).
- **At a successful end** the files the attempt holds are handed to the server as
  they are here (`delivered`, `POST /tasks/{id}/delivery`), which writes them into
  its tree; landing, patches and the line go on from there as for a runner in the
  tree. A failed attempt delivers nothing: the next reset is its rollback.

The token reaches git through the environment (`GIT_CONFIG_*`), never the
clone's config or a process's arguments. git runs in a thread
(`asyncio.to_thread`), never on the runner's loop; one attempt uses the clone
at a time (docs/decisions/0156-how-clones-sync.md).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.review.landedline import BRANCH
from codefleet.rollback import current_state, state_sha256
from codefleet.statedir import STATE_DIR

__all__ = [
    "LINE_PATH",
    "AsyncClone",
    "Clone",
    "CloneError",
    "CloneRefused",
    "dir_problem",
    "git_env",
]

LINE_PATH: Final = "/git/landed.git"  # where the server serves its line (`server.landed_routes`)
REMOTE: Final = "codefleet"
TRACKING: Final = f"refs/remotes/{REMOTE}/{BRANCH}"
BASE: Final = "refs/codefleet/base"  # the line's commit the clone was last brought level with
TREE_KEY: Final = "codefleet.tree"  # the served tree's identity, kept in the clone's config
LEVEL_WAIT_S: Final = 30.0
LEVEL_POLL_S: Final = 0.1
GIT_TIMEOUT_S: Final = 300.0


class CloneError(Exception):
    """The clone cannot be used or brought level: one line saying what and what to do."""


class CloneRefused(CloneError):
    """The directory or the host cannot hold a clone at all (not a fetch that may work later)."""


@dataclass
class Clone:
    """One runner's clone of the line at `url`; see the module docstring."""

    root: Path
    url: str  # the server's base URL; the line is at `url + LINE_PATH`
    token: str | None = None  # the server's, sent only to the server
    line: str | None = None  # fetch the line from this remote instead (`serve --line-remote`)
    level_wait_s: float = LEVEL_WAIT_S
    fetches: int = 0  # git fetches made (the cost table counts them)
    levelled: int = 0  # files taken from the line at a grant
    head: str | None = None  # the line's commit the clone was last reset or caught up to

    # -- opening -----------------------------------------------------------------------

    def open(self, tree_id: str) -> str:
        """Clone the line into an absent or empty `root` (its `.codefleet/` aside), or reuse
        CodeFleet's own clone of the same tree there; the tip. Anything else is `CloneError`
        naming what to do."""
        if shutil.which("git") is None:
            raise CloneRefused("git is not installed on this host: a clone runner needs it")
        root = self.root
        problem = dir_problem(root, tree_id)
        if problem is not None:
            raise CloneRefused(problem)
        root.mkdir(parents=True, exist_ok=True)
        if (root / ".git").is_dir():
            self._git("remote", "set-url", REMOTE, self.line_url)
        else:
            self._clone(tree_id)
        exclude = root / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        kept = exclude.read_text() if exclude.is_file() else ""
        if f"/{STATE_DIR}/" not in kept.splitlines():
            exclude.write_text(f"{kept.rstrip()}\n/{STATE_DIR}/\n".lstrip())
        return self.reset(())

    def _clone(self, tree_id: str) -> None:
        """A new repository in `root` (which may hold our `.codefleet/`), whole or not at all:
        made and marked as this tree's aside, then moved into place in one rename, so a
        runner killed meanwhile leaves nothing a restart would refuse. Its first fetch may
        fail (the server away): the repository stays, and the next open fetches again."""
        aside = self.root / STATE_DIR / f"clone-new-{os.getpid()}"
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        try:
            for args in (
                ("init", "--quiet"),
                ("remote", "add", REMOTE, self.line_url),
                ("config", TREE_KEY, tree_id),
            ):
                self._run(*args, cwd=aside)
            (aside / ".git").rename(self.root / ".git")
        finally:
            shutil.rmtree(aside, ignore_errors=True)

    @property
    def line_url(self) -> str:
        return self.line or f"{self.url.rstrip('/')}{LINE_PATH}"

    # -- the line ----------------------------------------------------------------------

    def fetch(self, known: str | None = None) -> str:
        """Fetch the line; its tip. With `known` (the tip the server says the line is at)
        already here, no fetch: the line has not moved since."""
        if known is not None and self._has(known) and self.tracked() == known:
            return known
        self.fetches += 1
        refspec = f"+refs/heads/{BRANCH}:{TRACKING}"  # from the URL given, whatever the config says
        done = self._run("fetch", "--quiet", "--no-tags", self.line_url, refspec, check=False)
        if done.returncode != 0:
            raise CloneError(f"cannot fetch the landed line {self.line_url}: {_said(done)}")
        return self._git("rev-parse", "--verify", f"{TRACKING}^{{commit}}").strip()

    def tracked(self) -> str | None:
        """The line's tip as last fetched (None: never)."""
        done = self._run("rev-parse", "--verify", "--quiet", f"{TRACKING}^{{commit}}", check=False)
        return done.stdout.decode().strip() or None if done.returncode == 0 else None

    def _has(self, commit: str) -> bool:
        return self._run("cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0

    def reset(self, forget: Iterable[str], known: str | None = None) -> str:
        """The clone as the line's tip, before an attempt: tracked files as the tip has them,
        untracked ones gone, and `forget` (what the last attempt wrote) gone unless the tip
        has it. The tip (`known`: see `fetch`)."""
        tip = self.fetch(known)
        self._git("checkout", "--quiet", "--force", "-B", BRANCH, tip)
        self._git("clean", "-ffdq")
        forget = list(forget)
        if forget:  # the last attempt's files the line does not have (ignored ones included)
            tracked = set(self._git("ls-tree", "-r", "--name-only", "-z", tip).split("\0"))
            for path in forget:
                if path not in tracked:
                    _remove(self.root / path)
        self._git("update-ref", BASE, tip)
        self.head = tip
        return tip

    @property
    def base(self) -> str:
        """The line's commit the clone's files not granted since are level with."""
        return self._git("rev-parse", "--verify", BASE).strip()

    def level(self, path: str, want: str | None) -> bool:
        """Make `path` the version the server holds (`want`: its SHA-256, None: absent),
        fetching the line until its tip has it; True when the file changed here."""
        if state_sha256(current_state(self.root, path)) == want:
            return False
        deadline = time.monotonic() + self.level_wait_s
        tip = self.tracked()  # the last fetch may have it already
        while True:
            if tip is None or self._version(tip, path) != want:
                tip = self.fetch()  # a fetch that fails is `CloneError` at once: no guess
            if self._version(tip, path) == want:
                self._take(tip, path)
                self.levelled += 1
                return True
            if time.monotonic() > deadline:
                raise CloneError(
                    f"the landed line does not have {path} as the server holds it after "
                    f"{self.level_wait_s:g}s (GET /landed says why it lags)"
                )
            time.sleep(LEVEL_POLL_S)

    def catch_up(self, held: Collection[str], known: str | None = None) -> list[str]:
        """Take every file the line changed since `base` that is not in `held`; those paths.
        A few git processes however many files landed: one diff, one checkout, one `rm`
        (`known`: see `fetch`)."""
        tip = self.fetch(known)
        base = self.base
        if tip == base:
            return []
        out = self._git("diff", "--name-status", "--no-renames", "-z", base, tip).split("\0")
        pairs = [(status, path) for status, path in zip(out[::2], out[1::2], strict=False) if path]
        taken = [(status, path) for status, path in pairs if path not in held]
        changed = [path for status, path in taken if status != "D"]
        gone = [path for status, path in taken if status == "D"]
        if changed:
            listed = "".join(f"{path}\0" for path in changed).encode(errors="surrogateescape")
            self._run(
                "checkout", "--quiet", tip, "--pathspec-from-file=-", "--pathspec-file-nul",
                stdin=listed,
            )  # fmt: skip
        if gone:
            for path in gone:
                _remove(self.root / path)
            self._run("rm", "--cached", "--quiet", "--ignore-unmatch", "--", *gone, check=False)
        self._git("update-ref", BASE, tip)
        self.head = tip
        return [path for _, path in taken]

    def _version(self, tip: str, path: str) -> str | None:
        done = self._run("cat-file", "blob", f"{tip}:{path}", check=False)
        if done.returncode != 0:
            return None
        return hashlib.sha256(done.stdout).hexdigest()

    def _take(self, tip: str, path: str) -> None:
        """`path` as `tip` has it (absent there: removed here)."""
        if self._run("cat-file", "-e", f"{tip}:{path}", check=False).returncode != 0:
            _remove(self.root / path)
            self._run("rm", "--cached", "--quiet", "--ignore-unmatch", "--", path, check=False)
            return
        self._git("checkout", "--quiet", tip, "--", path)

    # -- delivery ----------------------------------------------------------------------

    def delivered(self, paths: Iterable[str]) -> list[dict[str, Any]]:
        """`DeliveryBody`'s rows: each path as the clone has it now."""
        rows: list[dict[str, Any]] = []
        for path in sorted(set(paths)):
            state = current_state(self.root, path)
            rows.append(
                {
                    "path": path,
                    "existed": state.existed,
                    "content": base64.b64encode(state.content).decode("ascii"),
                    "mode": state.mode,
                }
            )
        return rows

    # -- git ---------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return git_env(None if self.line else self.token)  # another remote: git's own credentials

    def _run(
        self, *args: str, check: bool = True, stdin: bytes | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.root,
            input=stdin,
            capture_output=True,
            env=self._env(),
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
        if check and done.returncode != 0:
            raise CloneError(f"git {args[0]} in {self.root}: {_said(done)}")
        return done

    def _git(self, *args: str) -> str:
        return self._run(*args).stdout.decode(errors="surrogateescape")


class AsyncClone:
    """The clone as the runner's loop uses it: each git step in a thread.

    `current` asks the server whether its line holds every task that has landed,
    and at which tip (`GET /landed`'s `current` and `tip`): the line commits a
    landing just after it, so a runner that must see everything landed so far (a
    reset, the reads' validation) waits for that first, up to the clone's
    `level_wait_s`, and does not fetch when it has that tip already."""

    def __init__(
        self, clone: Clone, current: Callable[[], Awaitable[tuple[bool, str | None]]] | None = None
    ) -> None:
        self.clone = clone
        self.current = current

    async def caught_up(self) -> str | None:
        """The line's tip once it holds every landing so far (`CloneError` past the bound);
        None when there is no server to ask."""
        if self.current is None:
            return None
        deadline = time.monotonic() + self.clone.level_wait_s
        while True:
            now, tip = await self.current()
            if now:
                return tip
            if time.monotonic() > deadline:
                raise CloneError(
                    f"the landed line is behind what landed after {self.clone.level_wait_s:g}s "
                    "(GET /landed says why)"
                )
            await asyncio.sleep(LEVEL_POLL_S)

    async def reset(self, forget: Iterable[str]) -> str:
        known = await self.caught_up()
        return await asyncio.to_thread(self.clone.reset, forget, known)

    async def level(self, path: str, want: str | None) -> bool:
        return await asyncio.to_thread(self.clone.level, path, want)

    async def catch_up(self, held: Collection[str]) -> list[str]:
        known = await self.caught_up()
        return await asyncio.to_thread(self.clone.catch_up, held, known)


def git_env(token: str | None) -> dict[str, str]:
    """git's environment for the line: no prompt, and the token as an extra header given
    through `GIT_CONFIG_*` (never argv, where any process could read it, nor a config)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    if token:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
        env[f"GIT_CONFIG_KEY_{count}"] = "http.extraHeader"
        env[f"GIT_CONFIG_VALUE_{count}"] = f"Authorization: Bearer {token}"
        env["GIT_CONFIG_COUNT"] = str(count + 1)
    return env


def dir_problem(root: Path, tree_id: str) -> str | None:
    """Why `root` cannot hold this tree's clone (one line, with what to do); None when it
    can: absent, empty (its `.codefleet/` aside), or CodeFleet's clone of `tree_id`."""
    if root.exists() and not root.is_dir():
        return f"--clone {root} is a file: give an absent or empty directory"
    if not root.is_dir() or not any(e.name != STATE_DIR for e in root.iterdir()):
        return None
    if not (root / ".git").is_dir():
        return (
            f"--clone {root} is not empty and not a clone CodeFleet made: give an absent or "
            "empty directory"
        )
    done = subprocess.run(
        ["git", "config", "--get", TREE_KEY],
        cwd=root,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},
        check=False,
    )
    theirs = done.stdout.decode(errors="replace").strip()
    if not theirs:
        return (
            f"--clone {root} is a git repository CodeFleet did not clone: give an absent or "
            "empty directory"
        )
    if theirs != tree_id:
        return (
            f"--clone {root} is a clone of another tree's line ({theirs}), not of this "
            f"server's ({tree_id}): give an absent or empty directory"
        )
    return None


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or path.is_file():
            path.unlink()


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    text = (done.stderr or done.stdout).decode(errors="replace").strip()
    return text.splitlines()[-1] if text else f"exit {done.returncode}"
