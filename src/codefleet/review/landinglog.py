"""Landing, derived from the event log once: the queue, the checks, the landings, the breaks.

Pure functions over events (no I/O, no clock), for every reader of the log: the run
report and `stats` (through `RunFacts.landing`), `codefleet tasks ID`, and the live
terminal dashboard (`landing_of` over the events it has seen). The events are the
landing contract's (docs/landing.md, "Landing"): `landing_queued`, `landing_check_started`
and `_finished`, `landed`, `integration_failed`, `landing_halted`, `landing_resumed`.

Landing order is the order of `task_succeeded` in the log (every success happens at
landing): a `landed` or `task_succeeded` carrying `order` is read as it says, and a run
recorded before landing existed (no `order`, no landing events) has no landings here
at all (`LandingFacts.seen` is False), so every reader shows it as it did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from codefleet.models import CheckVerdict, EventType, RepairCause, from_iso

__all__ = [
    "Break",
    "Halt",
    "Landed",
    "LandingCheck",
    "LandingFacts",
    "Queued",
    "landing_of",
    "landing_orders",
]

Row = Mapping[str, Any]
PASSED: Final = "passed"
# What takes a task out of the landing queue without landing it.
_LEAVES: Final = frozenset(
    {EventType.TASK_REQUEUED, EventType.TASK_FAILED, EventType.TASK_CANCELLED}
)


@dataclass(frozen=True, slots=True)
class Queued:
    """One `landing_queued`: a task's attempt finished well and waits to land."""

    task_id: str
    attempt: int
    at: datetime
    checks: tuple[str, ...]
    position: int | None


@dataclass(frozen=True, slots=True)
class LandingCheck:
    """One landing check: started, and its verdict once finished (None while it runs)."""

    step: int
    check: str
    batch: tuple[str, ...]
    purpose: str  # batch | bisect | base | recheck
    base: int  # tasks landed when it started
    started_at: datetime
    verdict: str | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    output_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED


@dataclass(frozen=True, slots=True)
class Landed:
    """One `landed`: the task's landing order number, when it was queued, and its checks."""

    task_id: str
    order: int
    at: datetime
    queued_at: datetime | None
    checks: tuple[str, ...]
    batch: tuple[str, ...]
    base: int

    @property
    def waited_s(self) -> float | None:
        """From `landing_queued` to `landed`: how long the task waited to land."""
        return (self.at - self.queued_at).total_seconds() if self.queued_at else None


@dataclass(frozen=True, slots=True)
class Break:
    """One `integration_failed`: a task's landing broke `check`; whom it conflicted with."""

    task_id: str
    attempt: int
    at: datetime
    check: str
    blamed: tuple[str, ...]
    conflicts_with: tuple[str, ...]
    output_tail: str
    reworked: bool  # the task landed on a later attempt


@dataclass(frozen=True, slots=True)
class Halt:
    """One `landing_halted` on `check` (`why`: a `models.HaltCause`); resumed, or not yet."""

    at: datetime
    check: str
    last_landed: str
    output_tail: str
    resumed_at: datetime | None = None
    reason: str = ""
    why: str = ""


@dataclass(frozen=True, slots=True)
class LandingFacts:
    queued: tuple[Queued, ...] = ()
    checks: tuple[LandingCheck, ...] = ()
    landed: tuple[Landed, ...] = ()
    breaks: tuple[Break, ...] = ()
    halts: tuple[Halt, ...] = ()
    waiting: tuple[str, ...] = ()  # the queue now: tasks waiting to land, in queue order
    orders: tuple[tuple[str, int], ...] = ()  # (task id, landing order) of every landing
    waits: tuple[tuple[str, float], ...] = ()  # (task id, seconds) of each wait that ended

    @property
    def seen(self) -> bool:
        """Whether the log says anything about landing (a run before landing: False)."""
        return bool(self.queued or self.checks or self.orders or self.halts)

    @property
    def running(self) -> LandingCheck | None:
        """The landing check under way now (started, no verdict yet); the latest started."""
        return next((c for c in reversed(self.checks) if c.verdict is None), None)

    @property
    def running_all(self) -> tuple[LandingCheck, ...]:
        """Every landing check under way now, in the order they started (steps run in
        parallel, decision 0160)."""
        return tuple(c for c in self.checks if c.verdict is None)

    @property
    def halted(self) -> Halt | None:
        """The halt in force now: the last one, unless `landing_resumed` lifted it."""
        last = self.halts[-1] if self.halts else None
        return last if last is not None and last.resumed_at is None else None

    @property
    def last_order(self) -> int:
        return max((order for _, order in self.orders), default=0)

    @property
    def checks_per_landed(self) -> float | None:
        """Landing checks run per task landed (the batching's figure)."""
        finished = sum(c.verdict is not None for c in self.checks)
        return finished / len(self.orders) if self.orders else None

    def order_of(self, task_id: str) -> int | None:
        return dict(self.orders).get(task_id)

    def waited_s(self, task_id: str) -> float:
        """All the time `task_id` spent waiting to land, landed or not (each attempt's wait)."""
        return sum(seconds for task, seconds in self.waits if task == task_id)

    def checks_on(self, task_id: str) -> tuple[LandingCheck, ...]:
        """The landing checks whose batch held `task_id`, in the order they ran."""
        return tuple(c for c in self.checks if task_id in c.batch)


def _at(event: Row) -> datetime:
    return from_iso(str(event["at"]))


def _ids(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def landing_orders(events: Iterable[Row]) -> dict[str, int]:
    """Each landed task's landing order: `landed`'s (or `task_succeeded`'s) `order`.

    Only tasks whose events carry an order: a run recorded before landing has none.
    """
    found: dict[str, int] = {}
    for e in events:
        if e["type"] in (EventType.LANDED, EventType.TASK_SUCCEEDED) and e.get("task_id"):
            order = (e.get("payload") or {}).get("order")
            if isinstance(order, int):
                found.setdefault(str(e["task_id"]), order)
    return found


class _Fold:
    """The landing fold's working state: one pass over the events, in log order."""

    def __init__(self) -> None:
        self.queued: list[Queued] = []
        self.waiting: dict[str, Queued] = {}
        self.checks: list[LandingCheck] = []
        self.landed: list[Landed] = []
        self.breaks: list[dict[str, Any]] = []
        self.halts: list[Halt] = []
        self.waits: list[tuple[str, float]] = []

    def leave(self, task: str, at: datetime) -> Queued | None:
        """`task` leaves the queue at `at` (landed, or not): its wait is counted."""
        queued = self.waiting.pop(task, None)
        if queued is not None:
            self.waits.append((task, (at - queued.at).total_seconds()))
        return queued

    def take(self, e: Row) -> None:
        kind, task, body = e["type"], str(e.get("task_id") or ""), e.get("payload") or {}
        if kind == EventType.LANDING_QUEUED:
            position = _int(body.get("position")) or None
            q = Queued(task, _int(body.get("attempt")), _at(e), _ids(body.get("checks")), position)
            self.queued.append(q)
            self.waiting[task] = q
        elif kind == EventType.LANDING_CHECK_STARTED:
            self._start(e, body)
        elif kind == EventType.LANDING_CHECK_FINISHED:
            self._finish(e, body)
        elif kind == EventType.LANDED:
            self._land(e, task, body)
        elif kind == EventType.INTEGRATION_FAILED:
            self.leave(task, _at(e))
            self.breaks.append({"task": task, "at": _at(e), "body": body})
        elif kind in _LEAVES:
            self.leave(task, _at(e))
        elif kind == EventType.REPAIR_STARTED and body.get("cause") == RepairCause.INTEGRATION:
            self.leave(task, _at(e))  # its session repairs it; it queues again when done
        elif kind == EventType.LANDING_HALTED:
            self.halts.append(
                Halt(
                    _at(e),
                    str(body.get("check") or ""),
                    str(body.get("last_landed") or ""),
                    str(body.get("output_tail") or ""),
                    why=str(body.get("why") or ""),
                )
            )
        elif kind == EventType.LANDING_RESUMED and self.halts and self.halts[-1].resumed_at is None:
            h = self.halts[-1]
            reason = str(body.get("reason") or "")
            self.halts[-1] = replace(h, resumed_at=_at(e), reason=reason)

    @staticmethod
    def _check(e: Row, body: Mapping[str, Any]) -> LandingCheck:
        return LandingCheck(
            step=_int(body.get("step")),
            check=str(body.get("check") or ""),
            batch=_ids(body.get("batch")),
            purpose=str(body.get("purpose") or "batch"),
            base=_int(body.get("base")),
            started_at=_at(e),
        )

    def _open(self, check: LandingCheck) -> int | None:
        """Where the unfinished check of the same step, check and batch is, if any."""
        key = (check.step, check.check, check.batch)
        return next(
            (
                i
                for i in range(len(self.checks) - 1, -1, -1)
                if self.checks[i].verdict is None
                and (self.checks[i].step, self.checks[i].check, self.checks[i].batch) == key
            ),
            None,
        )

    def _start(self, e: Row, body: Mapping[str, Any]) -> None:
        """A check starts; one of the same key never finished (a restart runs it again): dropped."""
        check = self._check(e, body)
        at = self._open(check)
        if at is not None:
            del self.checks[at]
        self.checks.append(check)

    def _finish(self, e: Row, body: Mapping[str, Any]) -> None:
        started = self._check(e, body)
        at = self._open(started)
        duration = body.get("duration_ms")
        done = replace(
            self.checks[at] if at is not None else started,
            verdict=str(body.get("verdict") or CheckVerdict.DID_NOT_RUN),
            finished_at=_at(e),
            duration_ms=int(duration) if isinstance(duration, int | float) else None,
            output_tail=str(body.get("output_tail") or ""),
        )
        if at is None:
            self.checks.append(done)
        else:
            self.checks[at] = done

    def _land(self, e: Row, task: str, body: Mapping[str, Any]) -> None:
        queued = self.leave(task, _at(e))
        self.landed.append(
            Landed(
                task,
                _int(body.get("order")),
                _at(e),
                queued.at if queued else None,
                _ids(body.get("checks")),
                _ids(body.get("batch")),
                _int(body.get("base")),
            )
        )

    def facts(self, orders: dict[str, int]) -> LandingFacts:
        landed_after: dict[str, datetime] = {x.task_id: x.at for x in self.landed}
        breaks = tuple(
            Break(
                b["task"],
                _int(b["body"].get("attempt")),
                b["at"],
                str(b["body"].get("check") or ""),
                _ids(b["body"].get("blamed")),
                _ids(b["body"].get("conflicts_with")),
                str(b["body"].get("output_tail") or ""),
                reworked=b["task"] in landed_after and landed_after[b["task"]] > b["at"],
            )
            for b in self.breaks
        )
        return LandingFacts(
            queued=tuple(self.queued),
            checks=tuple(self.checks),
            landed=tuple(self.landed),
            breaks=breaks,
            halts=tuple(self.halts),
            waiting=tuple(self.waiting),
            orders=tuple(sorted(orders.items(), key=lambda kv: kv[1])),
            waits=tuple(self.waits),
        )


def landing_of(events: Iterable[Row]) -> LandingFacts:
    """Everything the log says about landing, in one pass (see `LandingFacts`)."""
    fold = _Fold()
    seen = list(events)
    for e in seen:
        fold.take(e)
    return fold.facts(landing_orders(seen))
