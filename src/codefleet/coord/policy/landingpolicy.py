"""The landing policy: a merge queue's rounds as pure functions over a frozen `Round`.

A round takes the first tasks of the landing queue (the *candidates*, in the
order they finished) and asks which of them may land on the landed base. Its
steps each check one *prefix*: the round's base plus the first `n` candidates
(`n == 0` is the base alone). `propose` says which steps to run now beside
the ones running (one per free worker), `record` applies one step's verdicts.
The round starts with a batch (`BATCH`); a worker free while it runs checks a
longer prefix ahead (`AHEAD`: the next batch on top of this one). The longest
prefix known to pass (`lo`) lands at once, in order: it was checked on exactly
that base plus exactly those candidates, so the steps still running on longer
prefixes stay valid. A failing prefix (`hi`, the shortest known to fail) is
searched for its first breaker with as many prefixes between `lo` and `hi` at
once as there are free workers (one: halving). Before the candidate at `hi` is
blamed, its prefix runs the failed checks once more (`CONFIRM`): a failure that
does not repeat is a flaky check, nobody is blamed and landing halts; one that
repeats blames it. A step whose answer can no longer matter (a prefix not
between `lo` and `hi`) leaves `running`: its result is ignored.

The landed tree alone (`BASE`, the prefix of what already landed this round)
answers two questions, each once per round: a failing integration check, while
no prefix has passed, is run there (it fails too: nobody is blamed, landing
halts); a check that could not start (exit 126/127, `UNRUNNABLE`) is run there
unless a passing prefix already ran it (it cannot start there either: the
environment lacks its program, landing halts; it starts: the candidates broke
it). docs/landing.md, "Landing"; decisions 0141, 0153 and 0160.

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

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from codefleet.models import AgentKind, CheckVerdict, HaltCause, Workspace

__all__ = [
    "AHEAD",
    "BASE",
    "BATCH",
    "BISECT",
    "CONFIRM",
    "PASSED",
    "UNRUNNABLE",
    "Outcome",
    "Round",
    "Step",
    "checks_for",
    "extend",
    "joining",
    "may_repair",
    "propose",
    "record",
]

BATCH: Final = "batch"  # the round's first batch on the base
AHEAD: Final = "ahead"  # a longer prefix, checked while a shorter one runs (the next batch)
BISECT: Final = "bisect"  # a shorter prefix, to find the first breaker
BASE: Final = "base"  # the landed tree alone: is it broken itself? does the check start?
CONFIRM: Final = "confirm"  # the failing prefix once more, before its last candidate is blamed
PREFIXES: Final = frozenset({BATCH, AHEAD, BISECT})  # steps whose answer moves `lo` or `hi`
# A check's verdict words (a worker's; any other reported word is a failure that ran).
PASSED: Final = CheckVerdict.PASSED
UNRUNNABLE: Final = CheckVerdict.UNRUNNABLE  # its program could not start (exit 126/127)


@dataclass(frozen=True, slots=True)
class Step:
    """One check run the round asks for: the first `prefix` candidates on the base."""

    prefix: int
    purpose: str
    checks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a step decided: these land now (in order), this one is blamed, or landing halts."""

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
    batch: int = 0  # the most candidates a BATCH or AHEAD step adds (0: all of them)
    lo: int = 0  # the longest prefix known to pass (0: the base, assumed until shown not)
    hi: int | None = None  # the shortest prefix known to fail
    landed: int = 0  # the first `landed` candidates have landed (never more than `lo`)
    base_ran: tuple[str, ...] = ()  # the checks the landed tree alone ran this round
    failed: tuple[str, ...] = ()  # the checks that failed at `hi`
    unrunnable: tuple[str, ...] = ()  # those of them that could not start
    running: tuple[Step, ...] = ()  # the steps handed out whose answer still matters
    over: bool = False  # decided: nothing runs and nothing is left to ask


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


def joining(waiting: Sequence[str], rnd: Round | None, window: int) -> tuple[str, ...]:
    """The tasks that join a round now, in landing order (`waiting`: the order they finished):
    the queue's head up to `window` for a new round (`rnd` None); for `rnd`, the tasks queued
    since it started, up to the room its window has left (none once a prefix failed)."""
    if rnd is None:
        return tuple(waiting[:window])
    room = window - (len(rnd.candidates) - rnd.landed)
    if rnd.hi is not None or room <= 0:
        return ()
    return tuple(t for t in waiting if t not in rnd.candidates)[:room]


def extend(
    rnd: Round,
    more: tuple[str, ...],
    verify: Mapping[str, str | None],
    verified_on: Mapping[str, int | None],
) -> Round:
    """The round with `more` candidates queued after its own (prefixes it knows stay true)."""
    if not more:
        return rnd
    return replace(
        rnd,
        candidates=rnd.candidates + more,
        verify={**rnd.verify, **{t: verify.get(t) for t in more}},
        verified_on={**rnd.verified_on, **{t: verified_on.get(t) for t in more}},
    )


def propose(rnd: Round, free: int) -> tuple[Round, tuple[Step, ...], Outcome | None]:
    """Up to `free` steps to run now beside the running ones (now `running`), and what
    lands at once: a prefix with nothing to check passes without a worker."""
    steps: list[Step] = []
    landed: list[str] = []
    while len(steps) < free and not rnd.over:
        step = _wanted(rnd)
        if step is None:
            break
        if step.checks:
            rnd = replace(rnd, running=(*rnd.running, step))
            steps.append(step)
            continue
        rnd, outcome = _settled(rnd, rnd.running, lo=step.prefix)  # passed: nothing to run
        landed += outcome.land if outcome else ()
    return (
        rnd,
        tuple(s for s in steps if s in rnd.running),
        Outcome(tuple(landed)) if landed else None,
    )


def record(rnd: Round, step: Step, verdicts: Mapping[str, str]) -> tuple[Round, Outcome | None]:
    """The round after `step`'s `verdicts` (check -> verdict word, for the checks it ran), and
    what it decides now (None: nothing yet). A step no longer `running` changes nothing. A
    step that ran all its checks and failed none passed (the caller checks it ran them all)."""
    if step not in rnd.running:
        return rnd, None
    running = tuple(s for s in rnd.running if s != step)
    ran = tuple(n for n in step.checks if n in verdicts)
    failed = tuple(n for n in ran if verdicts[n] != PASSED)
    unrunnable = tuple(n for n in failed if verdicts[n] == UNRUNNABLE)
    if step.purpose == BASE:
        after = replace(rnd, running=running, base_ran=rnd.base_ran + ran)
        return _after_base(after, failed, unrunnable)
    if step.purpose == CONFIRM:
        return _end(rnd, _after_confirm(rnd, failed))
    if failed:
        return _settled(rnd, running, hi=step.prefix, failed=failed, unrunnable=unrunnable)
    return _settled(rnd, running, lo=step.prefix)


def _settled(rnd: Round, running: tuple[Step, ...], **known: Any) -> tuple[Round, Outcome | None]:
    """The round once a step made `known` true (a longer passing `lo`, or a failing `hi` and
    its checks): land what is known to pass, drop the steps that can no longer matter, say if
    it is over. One new round: a landing with nothing to check takes this path every time."""
    lo, hi = known.get("lo", rnd.lo), known.get("hi", rnd.hi)
    land = rnd.candidates[rnd.landed : lo]
    keep = tuple(s for s in running if _matters(lo, hi, s))
    rnd = replace(rnd, **known, landed=lo, running=keep, over=hi is None and not keep)
    return rnd, Outcome(land) if land else None


def _matters(lo: int, hi: int | None, step: Step) -> bool:
    """Whether `step`'s answer still matters once `lo` passes (and landed) and `hi` fails."""
    if step.purpose == BASE:
        return step.prefix == lo
    if step.purpose == CONFIRM:
        return step.prefix == hi
    return lo < step.prefix and (hi is None or step.prefix < hi)


def _end(rnd: Round, outcome: Outcome) -> tuple[Round, Outcome]:
    return replace(rnd, landed=rnd.lo, running=(), over=True), outcome


def _after_base(
    rnd: Round, failed: tuple[str, ...], unrunnable: tuple[str, ...]
) -> tuple[Round, Outcome | None]:
    """The landed tree alone: a check that cannot start there, or an integration check that
    fails there, halts; a check that started (passing or not) leaves the candidates to answer."""
    land = rnd.candidates[rnd.landed : rnd.lo]
    if unrunnable:
        return _end(rnd, Outcome(land=land, halt=HaltCause.CANNOT_START))
    if rnd.integration is not None and rnd.integration in failed:
        return _end(rnd, Outcome(land=land, halt=HaltCause.FAILS_ALONE))
    return rnd, None


def _after_confirm(rnd: Round, failed: tuple[str, ...]) -> Outcome:
    """The failing prefix ran again: it failed again (blame its last candidate) or passed."""
    land = rnd.candidates[rnd.landed : rnd.lo]
    if not failed:
        return Outcome(land=land, halt=HaltCause.FLAKY)
    assert rnd.hi is not None
    return Outcome(land=land, blamed=rnd.candidates[rnd.hi - 1])


def _wanted(rnd: Round) -> Step | None:
    """The next step the round wants beside the running ones (None: none for now)."""
    if rnd.hi is None:
        return _ahead(rnd)
    purposes = {s.purpose for s in rnd.running}
    base = _base_checks(rnd)
    if base and BASE not in purposes:
        return Step(rnd.landed, BASE, base)
    if rnd.hi - rnd.lo == 1:  # the first breaker is found: confirm it, the base question first
        if base or purposes & {BASE, CONFIRM}:
            return None
        return Step(rnd.hi, CONFIRM, rnd.failed)
    middle = _split(rnd.lo, rnd.hi, [s.prefix for s in rnd.running if s.purpose in PREFIXES])
    return None if middle is None else Step(middle, BISECT, checks_for(rnd, middle))


def _ahead(rnd: Round) -> Step | None:
    """Nothing failed yet: the first batch, or the next one on top of the longest running."""
    tops = [s.prefix for s in rnd.running if s.purpose in PREFIXES]
    top = max(tops, default=rnd.lo)
    if top >= len(rnd.candidates):
        return None
    prefix = min(top + (rnd.batch or len(rnd.candidates)), len(rnd.candidates))
    return Step(prefix, AHEAD if tops else BATCH, checks_for(rnd, prefix))


def _split(lo: int, hi: int, running: list[int]) -> int | None:
    """The middle of the widest gap between `lo`, the running prefixes and `hi` (the lowest
    of equals), so that k prefixes at once cut the range in k + 1 parts; None: no gap left."""
    marks = sorted({lo, hi, *(p for p in running if lo < p < hi)})
    gaps = [(b - a, -a) for a, b in itertools.pairwise(marks) if b - a > 1]
    if not gaps:
        return None
    width, start = max(gaps)
    return -start + width // 2


def _base_checks(rnd: Round) -> tuple[str, ...]:
    """What the landed tree alone must run before the breaker is blamed (module docstring)."""
    wanted: list[str] = []
    if rnd.lo == 0 and rnd.integration is not None and rnd.integration in rnd.failed:
        wanted.append(rnd.integration)
    started = checks_for(rnd, rnd.lo) if rnd.lo else ()  # a passing prefix ran them
    wanted += [n for n in rnd.unrunnable if n not in started and n not in wanted]
    return tuple(n for n in wanted if n not in rnd.base_ran)


def may_repair(
    session_id: str | None,
    repairs: int,
    repair_turns: int,
    agent: str | None,
    workspace: str,
    stacked_on: bool = False,
) -> bool:
    """Whether a blamed task's session repairs its change instead of a rollback and rework:
    there is a session to resume, it has repair turns left, its agent can resume it on the
    tree where the change is (a Claude Code session of a runner in the shared tree; a clone
    holds the line, not the change), and no task has stacked on its files (their holders
    are undone and the task reworked: a repair would need those files back as it left
    them, decisions 0159 and 0161)."""
    return (
        bool(session_id)
        and repairs < repair_turns
        and agent in (None, AgentKind.CLAUDE)
        and workspace == Workspace.TREE
        and not stacked_on
    )
