"""Prometheus metrics: what an operator sizes a fleet on, read from the engine at each scrape.

`GET /metrics` answers in Prometheus' text format, written by prometheus-client's
own encoder from one collector that reads the engine when the scrape comes, on
the loop like every other read: nothing is counted twice, so nothing can drift.
prometheus-client loads at the first scrape (a server never scraped, the demo's, skips it).
An autoscaler (a HorizontalPodAutoscaler through an adapter, or KEDA's Prometheus
scaler) sizes the runner Deployment on `codefleet_tasks_ready` and
`codefleet_tasks_in_flight` against `codefleet_runners{status="idle"}`;
docs/hosts-autoscaling.md has the recipe. Behind the same guards as every route: with a token,
the scraper sends it (`authorization` in its scrape config).

- `codefleet_tasks{status}`: tasks by status;
- `codefleet_tasks_ready`: tasks that could be assigned now (the live index's ready set);
- `codefleet_tasks_in_flight`: tasks assigned or running;
- `codefleet_landing_queue`: finished tasks waiting to land; `codefleet_landing_halted`;
- `codefleet_landing_steps`: landing steps in flight (up to `landing_parallel`, decision 0160);
- `codefleet_runners{status}`: registered runners idle, busy, offline (stale counts as offline);
- `codefleet_people`: people's sessions holding the lock (`codefleet join`);
- `codefleet_leases`: leases held (files, parts and named resources);
- `codefleet_fleet_paused`: 1 while a usage limit pauses assignment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from fastapi import FastAPI
from starlette.responses import Response

from codefleet.models import TaskStatus
from codefleet.readmodel.readapi import Reads
from codefleet.transport.routetable import Answer, Args, Route, install_route

if TYPE_CHECKING:
    from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric

__all__ = ["METRICS_ROUTE", "FleetMetrics", "install_metrics"]

RUNNER_STATES = ("idle", "busy", "offline")


class FleetMetrics:
    """The fleet's gauges, collected from `reads` at each scrape."""

    def __init__(self, reads: Reads) -> None:
        self.reads = reads
        self.registry: CollectorRegistry | None = None  # made at the first scrape

    def response(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from prometheus_client.core import CollectorRegistry

        if self.registry is None:
            self.registry = CollectorRegistry(auto_describe=False)
            self.registry.register(self)
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    def collect(self) -> Iterator[Metric]:
        record = self.reads.engine
        counts = record.task_counts()
        tasks = _family("codefleet_tasks", "Tasks by status.", "status")
        for status in TaskStatus:
            tasks.add_metric([status.value], counts.get(status.value, 0))
        yield tasks
        yield _gauge(
            "codefleet_tasks_ready", "Tasks that could be assigned now.", record.ready_count()
        )
        yield _gauge(
            "codefleet_tasks_in_flight", "Tasks assigned or running.", record.in_flight_count()
        )
        landing = record.landing()
        yield _gauge(
            "codefleet_landing_queue", "Finished tasks waiting to land.", len(landing["queue"])
        )
        yield _gauge(
            "codefleet_landing_halted", "1 while landing is halted.", landing["halted"] is not None
        )
        yield _gauge("codefleet_landing_steps", "Landing steps in flight.", len(landing["steps"]))
        yield from self._holders()
        yield _gauge(
            "codefleet_fleet_paused",
            "1 while a usage limit pauses assignment.",
            record.limits_view(record.now())["paused_until"] is not None,
        )

    def _holders(self) -> Iterator[Metric]:
        agents = self.reads.agents()
        runners = _family("codefleet_runners", "Registered runners by status.", "status")
        seen = dict.fromkeys(RUNNER_STATES, 0)
        for agent in agents:
            if agent["kind"] == "runner":
                state = "offline" if agent["stale"] else str(agent["status"])
                seen[state] = seen.get(state, 0) + 1
        for state, n in seen.items():
            runners.add_metric([state], n)
        yield runners
        people = sum(1 for a in agents if a["kind"] != "runner" and a["status"] == "busy")
        yield _gauge("codefleet_people", "People's sessions holding the lock.", people)
        yield _gauge("codefleet_leases", "Leases held.", len(self.reads.engine.lease_rows()))


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, text, value=float(value))


def _family(name: str, text: str, label: str) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, text, labels=[label])


async def _scrape(metrics: FleetMetrics, _: Args) -> Answer:
    return 200, metrics.response()


# over a `FleetMetrics`; it answers Prometheus' text, a `Response` of its own: no answer model
METRICS_ROUTE: Final = Route("scrape", "GET", "/metrics", _scrape)


def install_metrics(app: FastAPI, reads: Reads) -> None:
    """Declare `GET /metrics` to FastAPI from its row, over the fleet's gauges read from `reads`."""
    install_route(app, FleetMetrics(reads), METRICS_ROUTE)
