"""The web dashboard's model folds landing from the events as review/landinglog.py does.

model.js has no DOM, so node runs it over the landing run of `landing_log`, at the halt
and at the end, and its folds are compared with the Python facts of the same events.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from landing_log import CHECKING, EVENTS, HALTED
from tool_support import require_tool

from codefleet.review.facts import attempts_of
from codefleet.review.landinglog import landing_of

WEB = Path(__file__).resolve().parents[2] / "src" / "codefleet" / "server" / "web"

SCRIPT = """
const { Model, landingNow } = await import(process.argv[1]);
const events = JSON.parse(process.argv[2]);
const cut = Number(process.argv[3]);
const fold = (upto) => {
  const model = new Model();
  model.setSnapshot({ tasks: [], agents: [], leases: [], last_event_id: 0 });
  model.add(events.slice(0, upto));
  const l = model.history.landing;
  const now = landingNow(model);
  return {
    queue: [...l.queue.keys()],
    orders: Object.fromEntries(l.orders),
    checks: l.checks.filter((c) => c.verdict !== null).length,
    open: l.checks.filter((c) => c.verdict === null).length,
    breaks: l.breaks.map((b) => [b.task, b.conflictsWith]),
    halted: now.halted ? now.halted.lastLanded : null,
    lastOrder: now.lastOrder,
    running: now.runningAll.map((c) => c.purpose),
    statuses: Object.fromEntries([...model.live.tasks.values()].map((t) => [t.id, t.status])),
    outcomes: model.history.attempts.map((a) => [a.task, a.n, a.outcome]),
    run: model.runState(),
  };
};
process.stdout.write(JSON.stringify({ halted: fold(cut), end: fold(events.length) }));
"""


def fold_in_node(tmp: Path, events: list[dict[str, Any]], cut: int) -> dict[str, Any]:
    """model.js's landing fold of `events[:cut]` and of all of `events`, run by node."""
    node = require_tool("node", "runs the page's model.js", package="nodejs")
    module = tmp / "model.mjs"
    module.write_text((WEB / "model.js").read_text())
    ran = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, module.as_uri(), json.dumps(events), str(cut)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(ran.stdout)
    return loaded


@pytest.fixture(scope="module")
def folded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return fold_in_node(tmp_path_factory.mktemp("web"), EVENTS, HALTED)


def test_while_landing_is_halted_the_page_and_the_report_agree_on_the_queue_and_the_halt(
    folded: dict[str, Any],
) -> None:
    halted, facts = folded["halted"], landing_of(EVENTS[:HALTED])

    assert halted["queue"] == list(facts.waiting) == ["T3"]
    assert halted["halted"] == "T2"
    assert halted["statuses"] == {"T1": "succeeded", "T2": "succeeded", "T3": "landing"}
    assert halted["run"] == "running"  # a task waiting to land keeps the run going


def test_at_the_end_the_page_has_every_landing_order_the_checks_and_the_break(
    folded: dict[str, Any],
) -> None:
    end, facts = folded["end"], landing_of(EVENTS)

    assert end["orders"] == dict(facts.orders) == {"T1": 1, "T2": 2, "T3": 3}
    assert end["lastOrder"] == 3 and end["halted"] is None and end["queue"] == []
    assert end["checks"] == len(facts.checks)
    assert end["breaks"] == [["T2", ["T1"]]]


def test_the_pages_attempts_end_where_the_reports_do_when_a_task_waits_to_land(
    folded: dict[str, Any],
) -> None:
    names = {"integration_failed": "requeued"}  # the page's word for a requeue of any kind
    report = [[a.task_id, a.number, names.get(a.outcome, a.outcome)] for a in attempts_of(EVENTS)]

    assert folded["end"]["outcomes"] == report


def test_a_check_a_restart_interrupted_and_ran_again_is_not_left_running_on_the_page(
    tmp_path: Path,
) -> None:
    again = {**EVENTS[CHECKING - 1], "id": 100, "at": EVENTS[CHECKING]["at"]}
    events = [*EVENTS[:CHECKING], again, *EVENTS[CHECKING:]]
    events = [{**e, "id": n} for n, e in enumerate(events, 1)]  # the page reads ids in order

    end = fold_in_node(tmp_path, events, CHECKING)["end"]

    assert (end["checks"], end["open"]) == (len(landing_of(events).checks), 0)


def test_the_page_shows_every_check_under_way_when_steps_run_in_parallel(
    tmp_path: Path,
) -> None:
    ahead = {**EVENTS[CHECKING - 1], "id": CHECKING + 1, "payload": {
        **EVENTS[CHECKING - 1]["payload"], "step": 99, "batch": ["T1", "T2", "T3"],
        "purpose": "ahead"}}  # fmt: skip
    events = [*EVENTS[:CHECKING], ahead]

    shown = fold_in_node(tmp_path, events, len(events))["end"]

    assert shown["open"] == len(landing_of(events).running_all) == 2
    assert shown["running"] == ["batch", "ahead"]  # what the landing panel lists
