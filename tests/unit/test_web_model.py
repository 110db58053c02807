"""The web dashboard's model keeps a bounded window of raw events, and its folds stay right.

model.js has no DOM, so node runs it as the browser would; a tiny window (5)
shows what a long run does at the real one (`MAX_EVENTS`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tool_support import require_tool

WEB = Path(__file__).resolve().parents[2] / "src" / "codefleet" / "server" / "web"

SCRIPT = """
const { Model } = await import(process.argv[1]);
const at = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const ev = (id, type, task_id, payload = {}) => ({ id, at: at(id), type, task_id, agent_id: "a_1", payload });
const model = new Model({ maxEvents: 5 });
const report = {};
// before any snapshot nothing is dropped: a first /state must see every later event
for (let i = 1; i <= 8; i++) model.add([ev(i, "task_created", `T${i}`, { title: `t${i}` })]);
report.beforeSnapshot = model.events.length;
const early = [1, 2, 3].map((i) => ({ id: `T${i}`, title: `t${i}`, status: "pending" }));
model.setSnapshot({ tasks: early, agents: [], leases: [], last_event_id: 3 });
report.afterSnapshot = model.events.map((e) => e.id);
let id = 8;
for (let i = 1; i <= 8; i++) {
  model.add([ev(++id, "task_assigned", `T${i}`, { attempt: 1, agent_name: "r" })]);
  model.add([ev(++id, "task_succeeded", `T${i}`, { cost_usd: 0.5 })]);
}
report.unseenKept = model.events.map((e) => e.id);
model.setSnapshot({ tasks: [...model.live.tasks.values()], agents: [], leases: [], last_event_id: id });
report.kept = model.events.map((e) => e.id);
report.count = model.eventCount;
report.types = Object.fromEntries(model.history.typeCounts);
report.succeeded = model.history.attempts.filter((a) => a.outcome === "succeeded").length;
report.statuses = [...model.live.tasks.values()].map((t) => t.status);
process.stdout.write(JSON.stringify(report));
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = require_tool("node", "runs the page's model.js", package="nodejs")
    module = tmp_path_factory.mktemp("web") / "model.mjs"
    module.write_text((WEB / "model.js").read_text())
    ran = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, module.as_uri()],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(ran.stdout)
    return loaded


def test_nothing_is_dropped_before_a_snapshot_and_nothing_after_it(report: dict[str, Any]) -> None:
    assert report["beforeSnapshot"] == 8
    assert report["afterSnapshot"] == [4, 5, 6, 7, 8], "only events the snapshot has seen go"
    assert report["unseenKept"][0] == 4, "events newer than the snapshot are all kept"


def test_the_window_holds_the_newest_events_once_a_snapshot_has_seen_them(
    report: dict[str, Any],
) -> None:
    assert report["kept"] == [20, 21, 22, 23, 24]


def test_counters_and_folds_count_every_event_not_only_the_window(report: dict[str, Any]) -> None:
    assert report["count"] == 24
    assert report["types"] == {"task_created": 8, "task_assigned": 8, "task_succeeded": 8}
    assert report["succeeded"] == 8
    assert report["statuses"] == ["succeeded"] * 8


STALE_SCRIPT = """
const { Model } = await import(process.argv[1]);
const at = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const ev = (id, type, payload = {}) => ({ id, at: at(id), type, task_id: "T3", agent_id: "a_1", payload });
const model = new Model({});
model.add([
  ev(1, "task_assigned", { attempt: 1, agent_name: "r" }),
  ev(2, "stale_read", { attempt: 1, paths: [{ path: "models.py", changed_by: ["T1"], read_sha256: "a", now_sha256: "b" }] }),
  ev(3, "reconciled", { attempt: 1, rounds: 1, outcome: "clean", cost_usd: 0 }),
  ev(4, "task_succeeded", { cost_usd: 0 }),
]);
process.stdout.write(JSON.stringify(model.history.attempts[0].stale));
"""


def test_a_stale_read_is_a_mark_on_its_attempts_bar_with_how_it_was_reconciled(
    tmp_path: Path,
) -> None:
    node = require_tool("node", "runs the page's model.js", package="nodejs")
    module = tmp_path / "model.mjs"
    module.write_text((WEB / "model.js").read_text())
    ran = subprocess.run(
        [node, "--input-type=module", "-e", STALE_SCRIPT, module.as_uri()],
        capture_output=True,
        text=True,
        check=True,
    )
    [mark] = json.loads(ran.stdout)
    assert mark["paths"] == [{"path": "models.py", "by": ["T1"], "gone": False}]
    assert mark["outcome"] == "clean"


WAIT_SCRIPT = """
const { Model } = await import(process.argv[1]);
const at = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const ev = (id, type, payload = {}) => ({ id, at: at(id), type, task_id: "T4", agent_id: "a_1", payload });
const model = new Model({});
model.add([
  { id: 1, at: at(1), type: "task_assigned", task_id: "T3", agent_id: "a_2", payload: { attempt: 1, agent_name: "h" } },
  ev(2, "task_assigned", { attempt: 1, agent_name: "r" }),
  ev(3, "lease_waiting", { path: "api.py", holder_task_id: "T3", queue_position: 1 }),
  { id: 4, at: at(4), type: "task_succeeded", task_id: "T3", agent_id: "a_2", payload: { cost_usd: 0 } },
  ev(5, "lease_waited", { path: "api.py", waited_s: 3, outcome: "granted", holder_task_id: "T3" }),
  ev(6, "task_succeeded", { cost_usd: 0 }),
]);
const [w] = model.history.attempts[1].waits;
process.stdout.write(JSON.stringify({ ...w, from: w.from - Date.UTC(2026, 0, 1), to: w.to - Date.UTC(2026, 0, 1) }));
"""


def test_a_wait_for_a_lease_is_a_segment_of_its_attempts_bar_naming_the_holder_and_its_lane(
    tmp_path: Path,
) -> None:
    node = require_tool("node", "runs the page's model.js", package="nodejs")
    module = tmp_path / "model.mjs"
    module.write_text((WEB / "model.js").read_text())
    ran = subprocess.run(
        [node, "--input-type=module", "-e", WAIT_SCRIPT, module.as_uri()],
        capture_output=True,
        text=True,
        check=True,
    )
    wait = json.loads(ran.stdout)
    assert wait == {
        "from": 2000,
        "to": 5000,
        "path": "api.py",
        "holder": "T3",
        "holderAgent": "a_2",  # the holder's lane, for the arrow; T3 ended before the grant
        "outcome": "granted",
    }
