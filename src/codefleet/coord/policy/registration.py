"""Who may register under a name, and from which tree: the refusals of `register`.

Two rules, both checked before anything is written:

- **One tree.** The runner's tree must be the server's tree. A runner says
  which by the identity it read in its own mount (`.codefleet/tree-id`,
  `statedir`), so the same tree mounted at another path on another host is
  accepted and a copy or another checkout is refused. A runner that sends no
  identity (an older one) is held to the old rule: its `workdir`, resolved on
  the server, must be the server's path. Pre-images, restores and patches
  happen in the server's tree; a runner editing another one would have its
  edits never rolled back and its patches empty. `WrongTree` names both
  paths and both identities.
- **One live holder per name.** A name whose holder is live (not offline and
  heard from within the stale window) belongs to that process, identified by
  `(host, pid)`. Another process gets `NameInUse` naming the holder, unless it
  asked to `replace` it; the same process registering again (after a fence)
  is a re-registration. Without this, two `codefleet run`s naming runners
  alike take the names from each other for ever (docs/decisions/0013-runner-names-are-held-by-a-live-process.md, "Runner
  names are held by a live process").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from codefleet.errors import NameInUse, WrongTree
from codefleet.models import AgentStatus, to_iso
from codefleet.statedir import TreeClaim, tree_mismatch

__all__ = ["NameHolder", "check_name", "check_tree"]


@dataclass(frozen=True, slots=True)
class NameHolder:
    """What the server knows about the process that holds a name."""

    agent_id: str
    name: str
    status: AgentStatus
    host: str | None
    pid: int | None
    last_heartbeat_at: datetime


def check_tree(runner: TreeClaim, server: TreeClaim) -> None:
    """Refuse a runner whose tree is not the server's (`statedir.tree_mismatch`)."""
    problem = tree_mismatch(runner, server)
    if problem is not None:
        raise WrongTree(
            problem,
            {
                "runner_workdir": runner.workdir,
                "server_workdir": server.workdir,
                "runner_tree_id": runner.tree_id,
                "server_tree_id": server.tree_id,
            },
        )


def check_name(
    holder: NameHolder,
    host: str | None,
    pid: int | None,
    replace: bool,
    now: datetime,
    stale_after: float,
) -> None:
    """Refuse taking `holder`'s name from another live process unless `replace` says so."""
    if replace or holder.status is AgentStatus.OFFLINE or (holder.host, holder.pid) == (host, pid):
        return
    silent_s = (now - holder.last_heartbeat_at).total_seconds()
    if silent_s > stale_after:
        return
    where = f"pid {holder.pid}" + (f" on {holder.host}" if holder.host else "")
    raise NameInUse(
        f"runner name {holder.name} is in use by {where} (last heard from {silent_s:.1f}s ago); "
        "choose another --name, stop that runner, or take the name over with --replace",
        {
            "name": holder.name,
            "holder_agent_id": holder.agent_id,
            "holder_pid": holder.pid,
            "holder_host": holder.host,
            "last_heartbeat_at": to_iso(holder.last_heartbeat_at),
        },
    )
