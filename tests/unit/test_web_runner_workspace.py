"""The web dashboard's runners say where each works: a clone of the landed line, and its head.

node runs the page's own panels.js over a model with one runner in the tree and
one in a clone; a minimal document (elements with text and children, nothing
more) stands in for the browser's, so the text the page would show is read back.
"""

from __future__ import annotations

import json
import subprocess

from dom_support import WEB, minimal_dom
from tool_support import require_tool

SCRIPT = (
    minimal_dom(" ")
    + """
const dir = process.argv[1];
const { Model } = await import(`${dir}/model.js`);
const { renderCost } = await import(`${dir}/panels.js`);
const model = new Model();
const runner = (id, name, more) => ({ id, name, kind: "runner", status: "idle", cost_usd: 0, ...more });
model.setSnapshot({
  tasks: [],
  agents: [runner("a_1", "runner-1", { workspace: "tree" }), runner("a_2", "pod-2", { workspace: "clone", head: "3f2a9c1d" + "0".repeat(32) })],
  leases: [],
  last_event_id: 0,
});
const container = new Node("div");
renderCost(container, { model, now: 0 });
const rows = [];
const walk = (node) => { if (node.attrs?.["data-runner"]) rows.push([node.attrs["data-runner"], node.text]); node.children?.forEach((c) => c instanceof Node && walk(c)); };
walk(container);
process.stdout.write(JSON.stringify(rows));
"""
)


def test_a_clone_runner_shows_its_landed_head_and_a_tree_runner_nothing_more() -> None:
    node = require_tool("node", "the web page's panels run under node", "nodejs")
    done = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, str(WEB)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = dict(json.loads(done.stdout))
    assert "clone@3f2a9c1d" in rows["pod-2"]
    assert "clone" not in rows["runner-1"]
