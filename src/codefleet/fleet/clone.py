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
  so a stale read is found as in the tree (`fleet.gate.stale`); first it waits
  (up to `level_wait_s`) until the line holds every task that succeeded so far,
  as it commits each a moment after `task_succeeded` (`AsyncClone.catch_up`).
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
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from codefleet.models import EventType
from codefleet.rollback import current_state, state_sha256
from codefleet.statedir import STATE_DIR

if TYPE_CHECKING:
    from codefleet.api.client import FleetClient

__all__ = ["LINE_PATH", "AsyncClone", "Clone", "CloneError"]

LINE_PATH: Final = "/git/landed.git"  # where the server serves its line (`server.landed_routes`)
REMOTE: Final = "codefleet"
BRANCH: Final = "landed"  # the line's branch (`review.landedline.BRANCH`)
TRACKING: Final = f"refs/remotes/{REMOTE}/{BRANCH}"
BASE: Final = "refs/codefleet/base"  # the line's commit the clone was last brought level with
TREE_KEY: Final = "codefleet.tree"  # the served tree's identity, kept in the clone's config
LEVEL_WAIT_S: Final = 30.0
LEVEL_POLL_S: Final = 0.1
GIT_TIMEOUT_S: Final = 300.0


class CloneError(Exception):
    """The clone cannot be used or brought level: one line saying what and what to do."""


@dataclass
class Clone:
    """One runner's clone of the line at `url`; see the module docstring."""

    root: Path
    url: str  # the server's base URL; the line is at `url + LINE_PATH`
    token: str | None = None
    level_wait_s: float = LEVEL_WAIT_S
    fetches: int = 0  # git fetches made (the cost table counts them)
    levelled: int = 0  # files taken from the line at a grant

    # -- opening -----------------------------------------------------------------------

    def open(self, tree_id: str) -> str:
        """Clone the line into an absent or empty `root` (its `.codefleet/` aside), or reuse
        CodeFleet's own clone of the same tree there; the tip. Anything else is `CloneError`
        naming what to do."""
        if shutil.which("git") is None:
            raise CloneError("git is not installed on this host: a clone runner needs it")
        root = self.root
        if root.exists() and not root.is_dir():
            raise CloneError(f"--clone {root} is a file: give an absent or empty directory")
        root.mkdir(parents=True, exist_ok=True)
        if any(entry.name != STATE_DIR for entry in root.iterdir()):
            self._check_own(tree_id)
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
        """A new clone in `root` (which may hold our `.codefleet/`): whole, or nothing left."""
        try:
            self._git("init", "--quiet")
            self._git("remote", "add", REMOTE, self.line_url)
            self._git("config", TREE_KEY, tree_id)
            self.fetch()
        except CloneError:
            shutil.rmtree(self.root / ".git", ignore_errors=True)
            raise

    def _check_own(self, tree_id: str) -> None:
        """A non-empty `root` must be CodeFleet's clone of this tree's line."""
        if not (self.root / ".git").is_dir():
            raise CloneError(
                f"--clone {self.root} is not empty and not a clone CodeFleet made: give an "
                "absent or empty directory"
            )
        done = self._run("config", "--get", TREE_KEY, check=False)
        theirs = done.stdout.decode(errors="replace").strip()
        if not theirs:
            raise CloneError(
                f"--clone {self.root} is a git repository CodeFleet did not clone: give an "
                "absent or empty directory"
            )
        if theirs != tree_id:
            raise CloneError(
                f"--clone {self.root} is a clone of another tree's line ({theirs}), not of "
                f"this server's ({tree_id}): give an absent or empty directory"
            )

    @property
    def line_url(self) -> str:
        return f"{self.url.rstrip('/')}{LINE_PATH}"

    # -- the line ----------------------------------------------------------------------

    def fetch(self) -> str:
        """Fetch the line; its tip."""
        self.fetches += 1
        done = self._run("fetch", "--quiet", "--no-tags", REMOTE, check=False)
        if done.returncode != 0:
            raise CloneError(f"cannot fetch the landed line {self.line_url}: {_said(done)}")
        return self._git("rev-parse", "--verify", f"{TRACKING}^{{commit}}").strip()

    def reset(self, forget: Iterable[str]) -> str:
        """The clone as the line's tip, before an attempt: tracked files as the tip has them,
        untracked ones gone, and `forget` (what the last attempt wrote) gone unless the tip
        has it. The tip."""
        tip = self.fetch()
        self._git("checkout", "--quiet", "--force", "-B", BRANCH, tip)
        self._git("clean", "-ffdq")
        tracked = set(self._git("ls-tree", "-r", "--name-only", "-z", tip).split("\0"))
        for path in forget:
            if path not in tracked:
                _remove(self.root / path)
        self._git("update-ref", BASE, tip)
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
        while True:
            tip = self.fetch()
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

    def catch_up(self, held: Collection[str]) -> list[str]:
        """Take every file the line changed since `base` that is not in `held`; those paths."""
        tip = self.fetch()
        base = self.base
        if tip == base:
            return []
        out = self._git("diff", "--name-only", "--no-renames", "-z", base, tip)
        taken = [p for p in out.split("\0") if p and p not in held]
        for path in taken:
            self._take(tip, path)
        self._git("update-ref", BASE, tip)
        return taken

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
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        if self.token:
            count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
            env[f"GIT_CONFIG_KEY_{count}"] = "http.extraHeader"
            env[f"GIT_CONFIG_VALUE_{count}"] = f"Authorization: Bearer {self.token}"
            env["GIT_CONFIG_COUNT"] = str(count + 1)
        return env

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            ["git", *args],
            cwd=self.root,
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
    """The clone as the runner's loop uses it: each git step in a thread; `client` asks the
    server how far its line has followed the landings."""

    def __init__(self, clone: Clone, client: FleetClient) -> None:
        self.clone, self.client = clone, client

    async def level(self, path: str, want: str | None) -> bool:
        return await asyncio.to_thread(self.clone.level, path, want)

    async def catch_up(self, held: Collection[str]) -> list[str]:
        """`Clone.catch_up` once the line holds every task that succeeded before this call:
        a file another task landed meanwhile is then taken, and a read of it is stale."""
        await self._line_followed()
        return await asyncio.to_thread(self.clone.catch_up, held)

    async def _line_followed(self) -> None:
        """Until the line's cursor is past the last `task_succeeded` of now; `CloneError`
        after `level_wait_s` (the clone never guesses)."""
        cursor = int((await self.client.landed())["cursor"])
        succeeded = await self.client.events(since=cursor, type_=EventType.TASK_SUCCEEDED)
        if not succeeded:
            return
        target = int(succeeded[-1]["id"])
        deadline = time.monotonic() + self.clone.level_wait_s
        while int((await self.client.landed())["cursor"]) < target:
            if time.monotonic() > deadline:
                raise CloneError(
                    f"the landed line has not committed every landed task after "
                    f"{self.clone.level_wait_s:g}s (GET /landed says why it lags)"
                )
            await asyncio.sleep(LEVEL_POLL_S)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or path.is_file():
            path.unlink()


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    text = (done.stderr or done.stdout).decode(errors="replace").strip()
    return text.splitlines()[-1] if text else f"exit {done.returncode}"
