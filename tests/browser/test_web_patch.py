"""The web dashboard's patch view and task graph labels, in headless Chromium.

A small scripted fleet changes files in the demo tree; clicking a task's node
shows its recorded patch (the files it touched, the diff) as the server has it,
and a task with no change says so. Long ids and titles, a waiting status and a
retried task's "2 tries" never run into each other inside a node.
"""

from __future__ import annotations

from playwright.async_api import expect
from web_support import TOKEN, Browser

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

LONG_ID = "a-rather-long-task-identifier-0001"
SCRIPT = {
    "docs": [
        {"append": {"path": "README.md", "text": "\nPatched by the docs task.\n"}},
        {"write": {"path": "NOTES.md", "content": "one\ntwo\n"}},
    ],
    LONG_ID: [{"fail": "not on the first attempt", "attempt": 1}],
    "after": [],
}
TASKS = [
    {
        "id": "docs",
        "title": "Document the service",
        "description": "do it",
        "file_scope": ["README.md", "NOTES.md"],
    },
    {
        "id": LONG_ID,
        "title": "A title far too long to fit on one line of a node box",
        "description": "do it",
    },
    {
        "id": "after",
        "title": "Waits for the long one",
        "description": "do it",
        "depends_on": [LONG_ID],
    },
]
# For every node: do any two of its labels overlap, and does any leave the node's box?
LABEL_CLASHES = """() => {
  const clashes = [];
  for (const node of document.querySelectorAll("[data-node]")) {
    const box = node.querySelector(".node-box").getBoundingClientRect();
    const labels = [...node.querySelectorAll("text")].map((t) => [t.getAttribute("class"), t.getBoundingClientRect()]);
    for (const [name, r] of labels) {
      if (r.left < box.left || r.right > box.right || r.top < box.top || r.bottom > box.bottom) {
        clashes.push(`${node.dataset.node}: ${name} leaves the box`);
      }
    }
    labels.forEach(([a, ra], i) => labels.slice(i + 1).forEach(([b, rb]) => {
      const apart = ra.right <= rb.left || rb.right <= ra.left || ra.bottom <= rb.top || rb.bottom <= ra.top;
      if (!apart) clashes.push(`${node.dataset.node}: ${a} overlaps ${b}`);
    }));
  }
  return clashes;
}"""


async def test_clicking_a_task_shows_its_patch_and_node_labels_never_collide(
    demo_server: ServerThread, browser: Browser
) -> None:
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks(TASKS)
        page = await browser.open(f"{demo_server.url}/?token={TOKEN}")
        await expect(page.locator('[data-node="after"]')).to_have_attribute(
            "data-status", "pending"
        )
        waiting = await page.evaluate(LABEL_CLASHES)  # before the run: "waiting" and "queued"

        settings = demo_server.settings
        executor = ScriptedExecutor(parse_script(SCRIPT))
        result = await run_fleet(
            demo_server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", settings.workdir, settings.run_dir), runners=2),
            token=TOKEN,
        )
        assert result.ok
        patch = await client.patch("docs")

    await expect(page.locator("body")).to_have_attribute("data-run", "finished")
    await expect(page.locator(f'[data-node="{LONG_ID}"] .node-tries')).to_have_text("2 tries")
    assert waiting == [] and await page.evaluate(LABEL_CLASHES) == []

    view = page.locator("#patch-view")
    await expect(view).to_contain_text("Select a task")
    await page.locator('[data-node="docs"]').click()
    await expect(view).to_have_attribute("data-task", "docs")
    await expect(view.locator("h3")).to_have_text("docs · Document the service")
    paths = sorted(f["path"] for f in patch["files"])
    assert paths == ["NOTES.md", "README.md"]
    await expect(view.locator(".patch-files li code")).to_have_text(paths)
    await expect(view.locator(".patch-sum")).to_contain_text(f"+{patch['added']}")
    readme = view.locator('.patch-file[data-path="README.md"]')
    await expect(readme.locator(".d-add")).to_have_text(["+", "+Patched by the docs task."])
    await expect(view.locator('.patch-file[data-path="NOTES.md"] .d-add')).to_have_text(
        ["+one", "+two"]
    )

    await page.locator('[data-node="after"]').click()
    await expect(view).to_have_attribute("data-task", "after")
    await expect(view).to_contain_text("No recorded change: it succeeded without changing a file.")
    assert browser.errors == []
