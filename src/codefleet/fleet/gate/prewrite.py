"""The pre-write path: one function between an agent's write and the disk.

Both executors call it: the scripted executor before every file it writes,
the SDK executor from the `PreToolUse` hook. Given a tool name and its input it
extracts every target path (`file_path`, `notebook_path`, `path`, the
paths of an `edits` list, or every header of a Codex `apply_patch` patch:
`toolcalls.writepaths.tool_paths`), normalizes each against the working tree (symlinks
resolved), refuses locally anything outside the tree or with no path at all,
then asks the server for the leases, all or nothing. With leases by part
(`granularity` part: the task's, the runner's or the server's choice), a
`Write`/`Edit`/`MultiEdit` of a file with parts (`parts.kinds`) asks for the parts it changes
instead of the file (`toolcalls.writeparts.write_keys`: anything it cannot map
is the whole file); a command's change asks for its parts through `acquire`
(`fleet.views.layerapply`). While another part's holder is writing the file
(`busy`), the gate asks again, the parts worked out on the file as it is.

It fails closed: an unreachable server, a timeout, a fenced runner or any
unexpected error is a denial. A denial carries an instruction for the model
("... Do not retry this file or edit around it. Stop now ..."), and the first
path refused because another task holds it is remembered as `blocked_on`,
which the runner reports so the server can widen the task's scope.

With `lease_wait_s` > 0 the request may park on the server while other
fleet tasks hold its paths; it sends what the session last saw of each file
(its own last write, else its last read). A wait that ends with the file
changed is a denial that is not a veto (`reread`): the session reads the
file again and redoes its edit (docs/decisions/0119-waiting-for-a-lease-instead-of-starting-over.md, "Waiting for a lease
instead of starting over").

In a clone of the landed line (`clone`, `fleet.clone`) a grant names the version
of each granted file the server holds; the first grant of a file in the attempt
brings the clone's copy level with it before the write is allowed. A file that
changed there is a denial that is not a veto (`reread`), as after a wait: the
session reads it again (a command runs again) and the file is now its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.errors import StaleEpoch
from codefleet.fleet.gate.readset import ReadRecord
from codefleet.models import GATED_TOOLS, DenyReason, Granularity
from codefleet.paths import PathRejected, TreeRoot, lease_keys
from codefleet.rollback import content_sha256
from codefleet.toolcalls.leasekeys import file_of
from codefleet.toolcalls.writeparts import write_keys
from codefleet.toolcalls.writepaths import no_path_reason, tool_paths

__all__ = ["CloneSync", "Verdict", "WriteGate"]

log = logging.getLogger(__name__)
RECORD_RETRY_S = 30.0
RECORD_RETRY_START_S = 0.1
RECORD_RETRY_MAX_S = 2.0
BUSY_WAIT_S = 10.0  # how long a write waits for another part's holder to finish writing the file
BUSY_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    paths: tuple[str, ...] = ()
    reason: str = ""
    blocked_on: str | None = None
    reread: bool = False  # the file changed while the write waited: read it again, no veto
    busy: bool = False  # another part's holder is writing the file this instant: ask again


class CloneSync(Protocol):
    """A clone of the landed line, as the gate and the reads' validation use it
    (`fleet.clone.AsyncClone`)."""

    async def level(self, path: str, want: str | None) -> bool: ...

    async def catch_up(self, held: Collection[str]) -> list[str]: ...


def stop_instruction(path: str, why: str) -> str:
    return (
        f"{why}. Do not retry this file or edit around it. "
        f"Stop now and report that you are blocked on {path}."
    )


@dataclass
class WriteGate:
    """The pre-write check for one attempt of one task by one runner."""

    client: FleetClient
    tree: TreeRoot
    agent_id: str
    epoch: int
    task_id: str
    grant_trust_s: float | None = None  # an older answer may be stale: refuse the write
    blocked_on: str | None = None
    fenced: bool = False
    written: list[str] = field(default_factory=list)
    last_written: dict[str, str | None] = field(default_factory=dict)  # path -> content hash
    lease_wait_s: float = 0.0  # how long a held path's write may park (0: the veto at once)
    reads: Mapping[str, ReadRecord] = field(default_factory=dict)  # the attempt's latest reads
    granularity: Granularity = Granularity.FILE  # a write's lease: the parts it changes, or files
    clone: CloneSync | None = None  # the runner works in a clone of the landed line
    held: set[str] = field(default_factory=set)  # files granted to this attempt (a clone's)

    async def check(self, tool_name: str, tool_input: Any) -> Verdict:
        """Allow or deny one tool call; never raises (fails closed)."""
        if tool_name not in GATED_TOOLS:
            return Verdict(True)
        try:
            return await self._check(tool_name, tool_input)
        except Exception as err:  # the write path fails closed on anything unexpected
            log.exception("pre-write check failed; denying")
            return Verdict(
                False,
                reason=f"The write could not be checked ({type(err).__name__}); it was refused. Stop now and report the failure.",
            )

    async def _check(self, tool_name: str, tool_input: Any) -> Verdict:
        raw = tool_paths(tool_name, tool_input)
        if not raw:
            why = no_path_reason(tool_name, tool_input)
            return Verdict(False, reason=f"{why}; the write was refused.")
        found = lease_keys(self.tree, raw, first_refusal=True, repeats=True)
        if found.rejected:
            return Verdict(False, reason=_local_refusal(found.rejected[0][1]))
        return await self._ask_until_free(
            tool_name, lambda: self._keys(found.keys, tool_name, tool_input)
        )

    def _keys(self, files: list[str], tool_name: str, tool_input: Any) -> list[str]:
        """The keys `tool_name(tool_input)` takes on canonical `files`: its parts, or files."""
        if self.granularity is not Granularity.PART:
            return files
        return [k for key in files for k in write_keys(self.tree.root, key, tool_name, tool_input)]

    async def _ask_until_free(self, tool_name: str, keys_now: Callable[[], list[str]]) -> Verdict:
        """`_ask` for `keys_now()`, asked again while another part's holder writes the file."""
        deadline = time.monotonic() + BUSY_WAIT_S
        while True:
            verdict = await self._ask(tool_name, keys_now())
            if not verdict.busy or time.monotonic() + BUSY_POLL_S > deadline:
                return verdict
            # its write lands in a moment, and the parts are worked out on the file it leaves
            await asyncio.sleep(BUSY_POLL_S)

    async def acquire(self, tool_name: str, keys: list[str]) -> Verdict:
        """Ask for the leases on canonical `keys` at once, all or nothing; never raises.

        The command tool's door (`fleet.views.layerapply`): its keys (paths, or the parts
        of a file it rewrote) were worked out before, so this is the same question a
        write tool's call asks, asked again while the file is `busy`."""
        try:
            return await self._ask_until_free(tool_name, lambda: keys)
        except Exception as err:  # the write path fails closed on anything unexpected
            log.exception("lease request failed; denying")
            return Verdict(
                False,
                tuple(keys),
                f"The leases could not be checked ({type(err).__name__}); nothing was applied.",
            )

    async def _ask(self, tool_name: str, keys: list[str]) -> Verdict:
        asked = time.monotonic()
        try:
            answer = await self.client.acquire(
                self.agent_id,
                self.epoch,
                self.task_id,
                keys,
                tool_name,
                self.lease_wait_s,
                self._seen(keys) if self.lease_wait_s > 0 else None,
            )
        except StaleEpoch:
            self.fenced = True
            return Verdict(False, tuple(keys), "This runner was fenced by the server; stop now.")
        except Exception as err:  # unreachable server, timeout, bad answer: deny
            return Verdict(
                False,
                tuple(keys),
                f"The coordination server could not grant the lease ({type(err).__name__}). Stop now and report that the write was refused.",
            )
        if answer.get("decision") != "allow":
            return self._denied(keys, answer)
        parked = answer.get("waited") or {}
        if self.clone is not None:
            moved = await self._level(answer.get("versions") or {})
            if isinstance(moved, Verdict):
                return moved
            if moved and parked.get("outcome") != "changed":
                return Verdict(False, tuple(keys), _landed_instruction(moved), reread=True)
        if parked.get("outcome") == "changed":
            return Verdict(False, tuple(keys), _changed_instruction(keys, parked), reread=True)
        waited = time.monotonic() - asked - float(parked.get("waited_s", 0.0))
        if self.grant_trust_s is not None and waited > self.grant_trust_s:
            return Verdict(
                False,
                tuple(keys),
                f"The lease answer took {waited:.1f}s to arrive, too long to trust: the server may "
                "have taken this task back meanwhile. The write was refused. Stop now.",
            )
        return Verdict(True, tuple(keys))

    async def _level(self, versions: Mapping[str, str | None]) -> list[str] | Verdict:
        """Bring each file granted for the first time in this attempt level with the version
        the server holds; the ones that changed here. Whatever the session (or a command)
        made of such a file, it made of an older version: the write is a `reread`. A clone
        that cannot be brought level denies the write (not a veto)."""
        assert self.clone is not None
        moved: list[str] = []
        for path, want in versions.items():
            if path in self.held:
                continue
            try:
                changed = await self.clone.level(path, want)
            except Exception as err:  # the write path fails closed
                log.warning("cannot bring %s level with the landed line: %s", path, err)
                return Verdict(
                    False,
                    (path,),
                    f"The write to {path} was refused: this runner's clone could not fetch the "
                    f"landed version of it ({err}). Stop now and report the failure.",
                )
            self.held.add(path)
            if changed:
                moved.append(path)
        return moved

    def _seen(self, keys: list[str]) -> dict[str, str | None]:
        """What the session last saw of each key's file: its own last write, else its last read."""
        seen: dict[str, str | None] = {}
        for key in keys:
            path = file_of(key)
            if path in self.last_written:
                seen[key] = self.last_written[path]
            elif path in self.reads:
                seen[key] = self.reads[path].sha256
            else:
                seen[key] = None  # never seen: only a still-absent file may be written
        return seen

    def _denied(self, keys: list[str], answer: dict[str, Any]) -> Verdict:
        denied = answer.get("denied") or []
        held = [d for d in denied if d.get("reason") == DenyReason.HELD]
        if held:
            first = held[0]
            path = str(first["path"])
            if self.blocked_on is None:
                self.blocked_on = path
            why = f"{path} is held by {first.get('holder_agent_name')} for task {first.get('holder_task_id')}"
            if first.get("holder_kind") == "interactive":
                why = f"{path} is being edited by {first.get('holder_agent_name')}, a person working in this tree"
            return Verdict(False, tuple(keys), stop_instruction(path, why), blocked_on=path)
        message = answer.get("message") or "the server refused the lease"
        if any(d.get("reason") == DenyReason.BUSY for d in denied):
            return Verdict(
                False,
                tuple(keys),
                f"{message}; the write was refused. Try it again in a moment.",
                busy=True,
            )
        return Verdict(False, tuple(keys), f"The write was refused: {message}. Do not retry it.")

    async def record(self, path: str, tool_name: str) -> None:
        """Ledger row (with the content's hash) for a write that happened; never blocks a write.

        Retried while the server is unreachable, for up to `RECORD_RETRY_S`: the
        hash is the record of what this attempt produced (the invariant checker's
        content oracle), so a row lost to a server restart would blind it.
        """
        try:
            key = self.tree.canonical(path)
        except PathRejected:
            return
        if key not in self.written:
            self.written.append(key)
        digest = content_sha256(self.tree.root / key)
        self.last_written[key] = digest
        deadline = time.monotonic() + RECORD_RETRY_S
        delay = RECORD_RETRY_START_S
        while True:
            try:
                await self.client.record_change(
                    self.agent_id, self.epoch, self.task_id, key, tool_name, digest
                )
                return
            except ServerUnavailable:
                if time.monotonic() + delay > deadline:
                    log.warning("gave up recording the change of %s: server unavailable", key)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECORD_RETRY_MAX_S)
            except StaleEpoch:
                self.fenced = True
                return
            except Exception:  # the ledger is a record, not a gate
                log.warning("could not record change of %s", key, exc_info=True)
                return


def _changed_instruction(keys: list[str], parked: dict[str, Any]) -> str:
    names = ", ".join(dict.fromkeys(file_of(k) for k in keys))  # files: what it reads again
    holder = parked.get("holder_task_id")
    return (
        f"{names} changed while you waited ({holder} finished): Read it again and redo your "
        "edit. The file is now yours; your other edits stand."
    )


def _landed_instruction(paths: list[str]) -> str:
    names = ", ".join(paths)
    return (
        f"{names} changed: another task landed a change to it that this clone did not have. "
        "Read it again and redo your edit. The file is now yours; your other edits stand."
    )


def _local_refusal(err: PathRejected) -> str:
    if err.reason is DenyReason.OUTSIDE_WORKDIR:
        return f"{err.raw} is outside the shared working tree; writes there are refused. Do not retry it."
    return f"The write to {err.raw} was refused: {err.message}. Do not retry it."
