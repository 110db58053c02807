"""The web dashboard names a resource's lease `resource db`, as `watch` does, never `/resource:db`.

node runs the page's own panels.js and describe.js over a model that holds a file
and a resource and saw a veto on the resource; a minimal document (elements with
text and children, nothing more) stands in for the browser's, so the text the
page would show is read back exactly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from dom_support import WEB, minimal_dom
from tool_support import require_tool

SCRIPT = (
    minimal_dom(" ")
    + """
const dir = process.argv[1];
const { Model } = await import(`${dir}/model.js`);
const { renderContention, renderLeases, vetoSentence } = await import(`${dir}/panels.js`);
const { describeVeto, describeAttempt } = await import(`${dir}/describe.js`);
const at = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const ev = (id, type, task_id, agent_id, payload = {}) => ({ id, at: at(id), type, task_id, agent_id, payload });
const model = new Model();
model.add([
  ev(1, "task_assigned", "T1", "a_1", { attempt: 1, agent_name: "runner-1" }),
  ev(2, "task_assigned", "T2", "a_2", { attempt: 1, agent_name: "runner-2" }),
  ev(3, "lease_acquired", "T1", "a_1", { path: "/resource:db", tool: "acquire_resource" }),
  ev(4, "lease_acquired", "T1", "a_1", { path: "api.py", tool: "Edit" }),
  ev(5, "lease_denied", "T2", "a_2", { path: "/resource:db", holder_task_id: "T1", holder_agent_name: "runner-1" }),
]);
const lease = (path) => ({ path, task_id: "T1", agent_id: "a_1", acquired_at: at(3) });
model.setSnapshot({ tasks: [], agents: [], leases: [lease("/resource:db"), lease("api.py")], last_event_id: 5 });
const container = new Node("div");
renderLeases(container, { model, now: Date.parse(at(9)) });
const veto = model.history.vetoes[0];
const stats = new Node("div");
const fleet = { runners: 2, busy_mean: 1, parallelism: 0.5, makespan_s: 4, critical_path: [], critical_path_s: 1, stretch: 4, veto_lost_s: 1, rollback_lost_s: 0, pauses: 0 };
renderContention(stats, { fleet, files: [], tasks: [{ id: "T1" }], resources: [{ name: "db", vetoes: 1, tasks: ["T1", "T2"], veto_lost_s: 1 }] });
const cells = (node) => (node.attrs.class === "path" ? [node.text] : node.children.filter((c) => c instanceof Node).flatMap(cells));
process.stdout.write(JSON.stringify({
  paths: cells(container),
  map: container.text,
  contention: cells(stats),
  contentionText: stats.text,
  veto: [...describeVeto(model, veto, 0), ...vetoSentence(model, veto).map((p) => (p instanceof Node ? p.text : p))].join(" "),
  attempt: describeAttempt(model, veto.attempt ?? model.history.attempts[0], 0).join(" "),
  holder: describeAttempt(model, model.history.attempts[0], 0).join(" "),
}));
"""
)


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = require_tool("node", "runs the page's panels.js and describe.js", package="nodejs")
    web = tmp_path_factory.mktemp("web")
    for module in WEB.glob("*.js"):
        shutil.copy(module, web)
    (web / "package.json").write_text('{"type": "module"}')  # the page's modules are ES modules
    ran = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, web.as_uri()],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(ran.stdout)
    return loaded


def test_the_lease_map_shows_a_held_resource_as_resource_and_its_name(
    shown: dict[str, Any],
) -> None:
    # held now (sorted by key), then the run's tiles, most contested first
    assert shown["paths"] == ["resource db", "api.py", "resource db", "api.py"]
    assert "/resource:" not in shown["map"]


def test_a_veto_on_a_resource_reads_resource_db_in_the_timeline_and_the_story(
    shown: dict[str, Any],
) -> None:
    assert "was refused resource db" in shown["veto"]
    assert "tried to write resource db while runner-1 (T1) held it" in shown["veto"]
    assert "refused resource db: held by runner-1 (T1)" in shown["attempt"]
    assert "leased: resource db, api.py" in shown["holder"]
    assert "/resource:" not in shown["veto"] + shown["attempt"] + shown["holder"]


def test_the_contention_panel_lists_resources_from_stats_apart_from_files(
    shown: dict[str, Any],
) -> None:
    assert shown["contention"] == ["resource db"]
    assert "T1, T2" in shown["contentionText"]
