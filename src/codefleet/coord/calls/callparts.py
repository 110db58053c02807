"""The engine's parts, handed by name to the pieces that write through them.

`RunnerCalls` and `OperatorCalls` are thin calls that find the caller's
attempt or batch and write through one part inside the engine's
`transition`; `Ticks`, `Outcomes`, `Arrivals` and `TakeBacks` compose the
transitions that cut across parts. None holds state or the engine. They are
given one `CallParts` value, built once by the engine, instead of a dozen
positional collaborators (docs/decisions/0096-the-engines-surface-is-real-methods.md, "The engine's surface is real
methods").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from codefleet.coord.storage.store import Store
from codefleet.coord.tables.agentregistry import AgentRegistry
from codefleet.coord.tables.checkregistry import CheckRegistry
from codefleet.coord.tables.fleetlimits import FleetLimits
from codefleet.coord.tables.leases import LeaseTable
from codefleet.coord.tables.messages import Messages
from codefleet.coord.tables.preimages import Preimages
from codefleet.coord.tables.questions import Questions
from codefleet.coord.tables.restores import Transition
from codefleet.coord.tables.sequences import Sequences
from codefleet.coord.tables.tasktable import TaskTable
from codefleet.paths import TreeRoot

__all__ = ["CallParts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallParts:
    """One engine's record, tree, clock and parts, and its two callbacks."""

    store: Store
    tree: TreeRoot
    clock: Callable[[], datetime]
    agents: AgentRegistry
    tasks: TaskTable
    leases: LeaseTable
    preimages: Preimages
    checks: CheckRegistry
    limits: FleetLimits
    messages: Messages
    questions: Questions
    sequences: Sequences
    transition: Transition  # one store transaction, restores after the outermost COMMIT
    kick: Callable[[], None]  # ask for a tick soon
