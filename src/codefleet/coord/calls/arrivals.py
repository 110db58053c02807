"""A runner's arrival and departure: `register` and `leave`.

A registration is refused (`WrongTree`, `NameInUse`, see `registration`)
before anything is written. Once admitted, it either enrolls a new agent or
replaces the name's previous incarnation: that incarnation's task and leases
are taken back and its epoch bumped, and the bump is exactly one whatever it
takes back, so the old process is fenced. A graceful leave marks the agent
offline and requeues its attempt; an operator's interrupt does not charge it.
Each call is one `transition`, then a `kick`. It owns no state; it is handed
the engine's parts and the take-back steps (`takebacks`).
"""

from __future__ import annotations

from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.takebacks import TakeBacks
from codefleet.coord.policy.answers import Registered
from codefleet.coord.policy.registration import check_tree
from codefleet.models import AgentStatus, ReleaseReason
from codefleet.statedir import TreeClaim

__all__ = ["Arrivals"]


class Arrivals:
    """One engine's registrations and leaves; on its thread."""

    def __init__(
        self, parts: CallParts, take_backs: TakeBacks, *, tree_id: str | None, stale_after: float
    ) -> None:
        self.tree = parts.tree
        self.clock = parts.clock
        self.agents = parts.agents
        self.transition = parts.transition
        self.kick = parts.kick
        self.take_backs = take_backs
        self.tree_id = tree_id  # the tree's identity (`statedir`); None: runners match by path
        self.stale_after = stale_after

    def register(
        self,
        name: str,
        workdir: str,
        pid: int | None,
        host: str | None = None,
        replace: bool = False,
        agent_kind: str = "claude",
        tree_id: str | None = None,
        probe: str | None = None,
        workspace: str = "tree",
    ) -> Registered:
        """Upsert by name; a previous incarnation's task and leases are taken back.

        Refused (`WrongTree`, `NameInUse`) before anything is written; see `registration`.
        A runner in a clone of the landed line (`workspace` clone) names the server's tree
        by its identity and writes no probe: its clone is not the tree, by design.
        One registration is exactly one epoch bump, whatever it takes back.
        """
        now = self.clock()
        runner = TreeClaim(workdir, tree_id, probe)
        check_tree(runner, TreeClaim(str(self.tree.root), self.tree_id))
        known = self.agents.admit(name, host, pid, replace, now, self.stale_after)
        with self.transition():
            if known is None:
                agent = self.agents.enroll(name, workdir, pid, host, now)
            else:
                agent = known
                was_offline = agent.status is AgentStatus.OFFLINE
                epoch = agent.epoch + 1  # the take-back's own fence is this same bump
                self.take_backs.take_back_current(agent, ReleaseReason.AGENT_REREGISTERED, now)
                self.agents.reincarnate(agent, epoch, was_offline, workdir, pid, host, now)
            self.agents.drives(agent, agent_kind, workspace)
        self.kick()
        return Registered(agent.id, agent.epoch, agent.status)

    def leave(self, agent_id: str, epoch: int, interrupted: bool = False) -> None:
        """A graceful leave; `interrupted`: the operator stopped the runner, whose attempt
        is then not charged (docs/decisions/0082-an-attempt-is-charged-only-for-its-own-failure.md, "An attempt is charged only for its own
        failure")."""
        self.agents.check_epoch(agent_id, epoch)
        reason = ReleaseReason.INTERRUPTED if interrupted else ReleaseReason.AGENT_LEFT
        with self.transition():
            self.take_backs.mark_offline(agent_id, reason, self.clock())
        self.kick()
