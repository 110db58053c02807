"""The landing policy: a merge queue's rounds as one pure function per step.

A round takes the first tasks of the landing queue (the *candidates*, in the
order they finished) and asks which of them may land on the landed base. Its
steps each check one *prefix*: the landed base plus the first `n` candidates
(`n == 0` is the base alone). The round starts with the whole batch; a
failing prefix is bisected (prefixes only, so whatever lands, lands in
order) down to the first candidate whose prefix fails. Before that candidate
is blamed, its failing prefix runs the failed checks once more (`CONFIRM`): a
failure that does not repeat is a flaky check, nobody is blamed and landing
halts; one that repeats blames it, everything before it lands, everything
after it stays queued for the next round on the new base.

The base alone (`BASE`) answers two questions, each once per round: a failing
integration check, while no prefix has passed, is run on the base (the base
fails too: nobody is blamed, landing halts); a check that could not start
(exit 126/127, `UNRUNNABLE`) is run on the base unless a passing prefix
already ran it (it cannot start there either: the environment lacks its
program, landing halts; it starts: the candidates broke it, which is theirs
to answer for). docs/checks.md, "Landing"; decisions 0141 and 0153.

Which checks a prefix runs: the integration check (if any), plus the `verify`
check of each candidate in it, each name once. A lone candidate whose verify
already passed on this very base (the runner's check at the end of its
session) does not run it again. A step's verdicts are the checks it ran, by
name (a worker stops at the first that does not pass). No I/O, no clock, no
database.

A blamed task is *repaired* before it is reworked (`may_repair`): the session
that made its change is resumed, told the failure, while the change stays on
the tree (decision 0161).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from codefleet.models import AgentKind, HaltCause, Workspace

__all__ = [
    "BASE",
    "BATCH",
    "BISECT",
    "CONFIRM",
    "PASSED",
    "UNRUNNABLE",
    "Outcome",
    "Round",
    "Step",
    "advance",
    "checks_for",
    "first_step",
    "may_repair",
]

BATCH: Final = "batch"  # the whole batch on the base
BISECT: Final = "bisect"  # a shorter prefix, to find the first breaker
BASE: Final = "base"  # the base alone: is the landed tree itself broken? does the check start?
CONFIRM: Final = "confirm"  # the failing prefix once more, before its last candidate is blamed
# A check's verdict words (a worker's; any other reported word is a failure that ran).
PASSED: Final = "passed"
UNRUNNABLE: Final = "unrunnable"  # its program could not start (exit 126/127)


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
    halt: HaltCause | None = None


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
    base_ran: tuple[str, ...] = ()  # the checks the base alone ran this round
    failed: tuple[str, ...] = ()  # the checks that failed at `hi`
    unrunnable: tuple[str, ...] = ()  # those of them that could not start


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


def advance(rnd: Round, step: Step, verdicts: Mapping[str, str]) -> tuple[Round, Step | Outcome]:
    """The round after `step`'s `verdicts` (check -> verdict word, for the checks it ran), and
    what comes next: another step or the outcome. A step that ran all its checks and
    failed none passed; one with no failure must have run them all (the caller's to check)."""
    ran = tuple(n for n in step.checks if n in verdicts)
    failed = tuple(n for n in ran if verdicts[n] != PASSED)
    unrunnable = tuple(n for n in failed if verdicts[n] == UNRUNNABLE)
    if step.purpose == BASE:
        return _after_base(replace(rnd, base_ran=rnd.base_ran + ran), failed, unrunnable)
    if step.purpose == CONFIRM:
        return rnd, _after_confirm(rnd, failed)
    if failed:
        rnd = replace(rnd, hi=step.prefix, failed=failed, unrunnable=unrunnable)
    else:
        rnd = replace(rnd, lo=step.prefix)
    return rnd, _next(rnd)


def _after_base(
    rnd: Round, failed: tuple[str, ...], unrunnable: tuple[str, ...]
) -> tuple[Round, Step | Outcome]:
    """The base alone: a check that cannot start there, or an integration check that fails
    there, halts; a check that started (passing or not) leaves the candidates to answer."""
    if unrunnable:
        return rnd, Outcome(land=rnd.candidates[: rnd.lo], halt=HaltCause.CANNOT_START)
    if rnd.integration is not None and rnd.integration in failed:
        return rnd, Outcome(land=rnd.candidates[: rnd.lo], halt=HaltCause.FAILS_ALONE)
    return rnd, _next(rnd)


def _after_confirm(rnd: Round, failed: tuple[str, ...]) -> Outcome:
    """The failing prefix ran again: it failed again (blame its last candidate) or passed."""
    land = rnd.candidates[: rnd.lo]
    if not failed:
        return Outcome(land=land, halt=HaltCause.FLAKY)
    assert rnd.hi is not None
    return Outcome(land=land, blamed=rnd.candidates[rnd.hi - 1])


def _next(rnd: Round) -> Step | Outcome:
    if rnd.hi is None:  # nothing failed: the longest prefix checked passed
        return Outcome(land=rnd.candidates[: rnd.lo])
    base = _base_checks(rnd)
    if base:
        return Step(0, BASE, base)
    if rnd.hi - rnd.lo == 1:
        return Step(rnd.hi, CONFIRM, rnd.failed)
    middle = (rnd.lo + rnd.hi) // 2
    return Step(middle, BISECT, checks_for(rnd, middle))


def _base_checks(rnd: Round) -> tuple[str, ...]:
    """What the base alone must run before bisecting on (see the module docstring)."""
    wanted: list[str] = []
    if rnd.lo == 0 and rnd.integration is not None and rnd.integration in rnd.failed:
        wanted.append(rnd.integration)
    started = checks_for(rnd, rnd.lo) if rnd.lo else ()  # a passing prefix ran them
    wanted += [n for n in rnd.unrunnable if n not in started and n not in wanted]
    return tuple(n for n in wanted if n not in rnd.base_ran)


def may_repair(
    session_id: str | None, repairs: int, repair_turns: int, agent: str | None, workspace: str
) -> bool:
    """Whether a blamed task's session repairs its change instead of a rollback and rework:
    there is a session to resume, it has repair turns left, and its agent can resume it on
    the tree where the change is (a Claude Code session of a runner in the shared tree; a
    clone holds the line, not the change)."""
    return (
        bool(session_id)
        and repairs < repair_turns
        and agent in (None, AgentKind.CLAUDE)
        and workspace == Workspace.TREE
    )
