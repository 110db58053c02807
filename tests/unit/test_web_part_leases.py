"""The web dashboard shows a part lease as its file, then its part, and gathers parts by file.

node runs the page's own model.js and panels.js over a model that saw part leases of
`api.py` (two tasks refused `api.py::handle`, one refused `api.py::route`) and a whole
lease of `models.py`, and renders the contention table from the figures `GET /stats`
gives for the literal run of tests/unit/test_part_contention.py. A minimal document
(elements with text, attributes and children) stands in for the browser's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from dom_support import WEB, minimal_dom
from test_part_contention import record
from tool_support import require_tool

from codefleet.review.collisionstats import fleet_stats
from codefleet.review.facts import run_facts
from codefleet.review.statsjson import stats_json

SCRIPT = (
    minimal_dom("")
    + """
const [dir, statsJson] = process.argv.slice(1);
const { Model } = await import(`${dir}/model.js`);
const { renderContention, renderLeases } = await import(`${dir}/panels.js`);
const { splitLeaseKey } = await import(`${dir}/util.js`);
const at = (i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const ev = (id, type, task_id, agent_id, payload = {}) => ({ id, at: at(id), type, task_id, agent_id, payload });
const denied = (id, task, agent, path, holder) => ev(id, "lease_denied", task, agent, { path, holder_task_id: holder, holder_agent_name: "runner-1" });
const model = new Model();
model.add([
  ev(1, "task_assigned", "T1", "a_1", { attempt: 1, agent_name: "runner-1" }),
  ev(2, "task_assigned", "T2", "a_2", { attempt: 1, agent_name: "runner-2" }),
  ev(3, "task_assigned", "T3", "a_3", { attempt: 1, agent_name: "runner-3" }),
  ev(4, "lease_acquired", "T1", "a_1", { path: "api.py::handle", tool: "Edit" }),
  ev(5, "lease_acquired", "T2", "a_2", { path: "api.py::route", tool: "Edit" }),
  ev(6, "lease_acquired", "T1", "a_1", { path: "models.py", tool: "Edit" }),
  denied(7, "T3", "a_3", "api.py::handle", "T1"),
  denied(8, "T3", "a_3", "api.py::handle", "T1"),
  denied(9, "T3", "a_3", "api.py::route", "T2"),
]);
const lease = (path, task_id, agent_id) => ({ path, task_id, agent_id, acquired_at: at(4) });
model.setSnapshot({ tasks: [], agents: [], leases: [lease("models.py", "T1", "a_1"), lease("api.py::route", "T2", "a_2"), lease("api.py::handle", "T1", "a_1")], last_event_id: 9 });
const leases = new Node("div");
renderLeases(leases, { model, now: Date.parse(at(9)) });
const stats = new Node("div");
renderContention(stats, JSON.parse(statsJson));
const all = (node, pick) => [...(pick(node) ? [node] : []), ...node.children.filter((c) => c instanceof Node).flatMap((c) => all(c, pick))];
process.stdout.write(JSON.stringify({
  split: ["api.py::handle", "api.py", "/resource:db", "a::b::c"].map(splitLeaseKey),
  held: all(leases, (n) => n.tag === "tr" && n.attrs["data-lease"]).map((n) => [n.attrs["data-file"], n.children[0].text]),
  heldParts: all(leases, (n) => n.tag === "tr" && n.attrs["data-lease"]).map((n) => all(n, (c) => c.attrs.class === "part").map((c) => c.text)),
  tiles: all(leases, (n) => n.tag === "li").map((n) => ({ file: n.attrs["data-file"], denials: n.attrs["data-denials"], held: n.attrs.class.includes("held"), parts: all(n, (c) => c.attrs.class === "part").map((c) => c.text) })),
  rows: all(stats, (n) => n.tag === "tr" && (n.attrs["data-file"] || n.attrs["data-part-of"])).map((n) => n.children.slice(0, 3).map((c) => c.text)),
}));
"""
)


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = require_tool("node", "runs the page's model.js and panels.js", package="nodejs")
    web = tmp_path_factory.mktemp("web")
    for module in WEB.glob("*.js"):
        shutil.copy(module, web)
    (web / "package.json").write_text('{"type": "module"}')  # the page's modules are ES modules
    figures = json.dumps(stats_json(fleet_stats(run_facts(record()))))  # what GET /stats says
    ran = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, web.as_uri(), figures],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(ran.stdout)
    return loaded


def test_a_lease_key_splits_into_its_file_and_its_part_as_the_python_helper_does(
    shown: dict[str, Any],
) -> None:
    assert shown["split"] == [
        {"file": "api.py", "part": "handle"},
        {"file": "api.py", "part": None},
        {"file": "/resource:db", "part": None},
        {"file": "a", "part": "b::c"},  # the first `::` splits, as toolcalls.leasekeys
    ]


def test_the_leases_held_now_read_file_then_part_in_the_order_of_their_file(
    shown: dict[str, Any],
) -> None:
    assert shown["held"] == [
        ["api.py", "api.py::handle"],
        ["api.py", "api.py::route"],
        ["models.py", "models.py"],
    ]
    assert shown["heldParts"] == [["::handle"], ["::route"], []]  # the part in its own span


def test_the_files_of_the_run_gather_a_files_parts_in_one_tile_with_the_files_total(
    shown: dict[str, Any],
) -> None:
    assert shown["tiles"] == [
        {
            "file": "api.py",
            "denials": "3",
            "held": True,
            "parts": ["::handle · 2 vetoes", "::route · 1 veto"],
        },
        {"file": "models.py", "denials": "0", "held": True, "parts": []},
    ]


def test_the_contention_table_puts_each_part_beneath_its_files_total(
    shown: dict[str, Any],
) -> None:
    assert shown["rows"] == [
        ["api.py", "4", "T1, T2, T3, T4"],
        ["::handle", "2", "T1, T2, T3"],
        ["(whole file)", "1", "T1, T4"],
        ["::route", "1", "T2, T3"],
        ["models.py", "1", "T1, T5"],
    ]
