"""The lease rule: what one write's request gets, at either door, decided in one place.

Both doors ask `decide`: a runner's task (`coord.calls.runnercalls.RunnerCalls.acquire`,
the pre-write gate's call) and a person's session (`coord.tables.persons`, the
`codefleet hook` call). The lease table says what it sees (`Request`); the answer is one
`Verdict`, taken in this order, the first that applies:

1. `REFUSE`: a path that can never be leased (outside the tree, protected, unusable);
2. `BUSY`: another task is writing parts of the file this instant (`leases.busy`): ask
   again once its write is in;
3. `OURS`: the requester holds every key already: a grant that writes nothing;
4. `STACK`: the keys others hold are whole files of tasks waiting to land, and the
   requester may build on them (`policy.stacks`): it takes them over;
5. `DENY`: another holder has a key it excludes (`toolcalls.leasekeys.excludes`): a veto
   naming the holder;
6. `TAKE`: the keys are free: granted.

Where the doors differ, they differ here only: a person's session never stacks (its
edits are not rolled back, so nothing could be undone with the task under it), and a
person's write is never `BUSY` (it is whole, so it meets a task's parts as `DENY`).
What a `TAKE` writes differs too, in the lease table: a fleet task's first key on a file
captures its pre-image, a person's does not. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from codefleet.coord.policy.answers import Denial

__all__ = [
    "ALL_FREE",
    "FLEET",
    "HOLDS_ALL",
    "OURS",
    "REFUSED",
    "TAKE",
    "Door",
    "Request",
    "Verdict",
    "decide",
]

Held = tuple[tuple[str, tuple[str, str]], ...]  # (held key, (its agent, its task))


class Door(StrEnum):
    FLEET = "fleet"  # a runner's task, through its pre-write gate
    PERSON = "person"  # a person's own session, through `codefleet hook`


class Verdict(StrEnum):
    REFUSE = "refuse"
    BUSY = "busy"
    OURS = "ours"
    STACK = "stack"
    DENY = "deny"
    TAKE = "take"


# The members every request meets, as module names: on Python 3.11 a member read off its
# class (`Verdict.OURS`) is a look-up through the enum's metaclass, about 70 ns, ten times a
# module name's; `decide` and both its callers meet these on every write (bench/lease_path.py).
FLEET: Final = Door.FLEET
OURS: Final = Verdict.OURS
TAKE: Final = Verdict.TAKE
REFUSED: Final = frozenset({Verdict.REFUSE, Verdict.BUSY})  # answered by the refusal alone


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ sets each field through
class Request:  # object.__setattr__, and one Request is built per lease request (the hot path)
    """One write's keys at one door, and what the lease table sees of them now."""

    door: Door
    rejected: tuple[Denial, ...] = ()  # paths that can never be leased
    busy: tuple[Denial, ...] = ()  # files another task is writing parts of this instant
    ours: bool = False  # the requester holds (or covers) every key
    held: Held = ()  # keys others hold that the request's keys exclude
    stackable: bool = False  # every one of `held` may be stacked on by this requester


# What a re-ask for keys the requester holds already sees (nothing refused, nothing busy),
# and what an ask for keys nobody holds sees, at each door: the steady state's every
# request and most first grants, built once each and shared, so never changed.
HOLDS_ALL: Final[dict[Door, Request]] = {door: Request(door, ours=True) for door in Door}
ALL_FREE: Final[dict[Door, Request]] = {door: Request(door) for door in Door}


def decide(request: Request) -> Verdict:
    """The one answer to `request` (see the module docstring for the order)."""
    if request.rejected:
        return Verdict.REFUSE
    if request.busy and request.door is FLEET:
        return Verdict.BUSY
    if request.ours:
        return OURS
    if request.held:
        stacks = request.door is Door.FLEET and request.stackable
        return Verdict.STACK if stacks else Verdict.DENY
    return TAKE
