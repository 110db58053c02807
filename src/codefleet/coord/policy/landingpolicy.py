"""The landing policy: a merge queue's rounds as one pure function per step.

A round takes the first tasks of the landing queue (the *candidates*, in the
order they finished) and asks which of them may land on the landed base. Its
steps each check one *prefix*: the landed base plus the first `n` candidates
(`n == 0` is the base alone). The round starts with the whole batch; a
failing prefix is bisected (prefixes only, so whatever lands, lands in
order); the first candidate whose prefix fails is blamed, everything before
it lands, everything after it stays queued for the next round on the new
base. A failing integration check is first run on the base alone: if the base
fails too, nobody is blamed and landing halts (docs/checks.md, "Landing").

Which checks a prefix runs: the integration check (if any), plus the `verify`
check of each candidate in it, each name once. A lone candidate whose verify
already passed on this very base (the runner's check at the end of its
session) does not run it again. No I/O, no clock, no database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

__all__ = [
    "BASE",
    "BATCH",
    "BISECT",
    "Outcome",
    "Round",
    "Step",
    "advance",
    "checks_for",
    "first_step",
]

BATCH: Final = "batch"  # the whole batch on the base
BISECT: Final = "bisect"  # a shorter prefix, to find the first breaker
BASE: Final = "base"  # the base alone: is the landed tree itself broken?


@dataclass(frozen=True, slots=True)
class Step:
    """One check run the round asks for: the first `prefix` candidates on the base."""

    prefix: int
    purpose: str
    checks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a round decided: these land (in order), this one is blamed, or landing halts."""

    land: tuple[str, ...] = ()
    blamed: str | None = None
    halt: bool = False


@dataclass(frozen=True, slots=True)
class Round:
    """A round over `candidates` on a base of `base` landed tasks; `lo` passes, `hi` fails."""

    candidates: tuple[str, ...]
    base: int
    integration: str | None
    verify: Mapping[str, str | None]  # candidate -> its verify check
    verified_on: Mapping[str, int | None]  # candidate -> the base its own verify passed on
    lo: int = 0  # the longest prefix known to pass (0: the base, assumed until shown not)
    hi: int | None = None  # the shortest prefix known to fail
    base_checked: bool = False
    failed: tuple[str, ...] = ()  # the checks that failed at `hi`


def checks_for(rnd: Round, prefix: int) -> tuple[str, ...]:
    """The check names prefix `prefix` must pass (see the module docstring)."""
    names: list[str] = [rnd.integration] if rnd.integration else []
    if prefix == 0:
        return tuple(names)
    for position, task_id in enumerate(rnd.candidates[:prefix]):
        name = rnd.verify.get(task_id)
        fresh = prefix == 1 and position == 0 and rnd.verified_on.get(task_id) == rnd.base
        if name and not fresh and name not in names:
            names.append(name)
    return tuple(names)


def first_step(rnd: Round) -> Step | Outcome:
    """The batch check, or at once an outcome when the whole batch has nothing to check."""
    whole = len(rnd.candidates)
    checks = checks_for(rnd, whole)
    if not checks:
        return Outcome(land=rnd.candidates)
    return Step(whole, BATCH, checks)


def advance(
    rnd: Round, step: Step, passed: bool, failed: Sequence[str] = ()
) -> tuple[Round, Step | Outcome]:
    """The round after `step`'s verdict, and what comes next: another step or the outcome."""
    if step.prefix == 0:
        if not passed:
            return rnd, Outcome(land=rnd.candidates[: rnd.lo], halt=True)
        rnd = replace(rnd, base_checked=True)
    elif passed:
        rnd = replace(rnd, lo=step.prefix)
    else:
        rnd = replace(rnd, hi=step.prefix, failed=tuple(failed))
        if rnd.lo == 0 and not rnd.base_checked and rnd.integration in rnd.failed:
            return rnd, Step(0, BASE, (rnd.integration,))
    return rnd, _next(rnd)


def _next(rnd: Round) -> Step | Outcome:
    if rnd.hi is None:  # nothing failed: the longest prefix checked passed
        return Outcome(land=rnd.candidates[: rnd.lo])
    if rnd.hi - rnd.lo == 1:
        return Outcome(land=rnd.candidates[: rnd.lo], blamed=rnd.candidates[rnd.hi - 1])
    middle = (rnd.lo + rnd.hi) // 2
    return Step(middle, BISECT, checks_for(rnd, middle))
