"""The web dashboard in a real headless Chromium, against a real server and a scripted fleet.

The fleet is the demo: five tasks, three runners, leases by part, one staged veto on
`api.py::<header>`. "Live" is proven, not timed: T4's first attempt does not start until
the lease map shows api.py's module docstring held for T3, its retry not until the page shows the
veto marker, and T5's agent waits until the page shows T5 running, so the run
cannot finish unless the page follows it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from playwright.async_api import Page, Route, expect
from typer.testing import CliRunner
from web_support import (
    FAST,
    NARROW,
    TOKEN,
    Browser,
    attempt_outcomes,
    load_demo_graph,
    run_demo_fleet,
    server_view,
)

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.cli.app import app as cli
from codefleet.fleet.executor import Attempt
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.hook.command import HookArgs, run
from codefleet.models import ErrorKind, from_iso, to_iso
from codefleet.review.facts import run_facts
from codefleet.review.fetch import fetch_record
from codefleet.review.report.reportblocks import seconds
from codefleet.server.sse import frame
from codefleet.server.thread import ServerThread

SCREENSHOT_COPY = "CODEFLEET_DASHBOARD_PNG"  # set it to refresh docs/dashboard.png from a run
# Read in one go: the page redraws whenever the server has news.
MARKER_IN_LANE = """([eventId, runner]) => {
  const cut = document.querySelector(`g.veto[data-key="veto-${eventId}"] .veto-cut`)
    .getBoundingClientRect();
  const lane = document.querySelector(`.tl-label[data-lane="${runner}"]`).getBoundingClientRect();
  const middle = cut.top + cut.height / 2;
  return lane.top <= middle && middle <= lane.bottom;
}"""


async def bars(page: Page) -> list[list[str]]:
    return await page.locator(".bar").evaluate_all(
        "els => els.map(e => [e.dataset.task, e.dataset.outcome, e.dataset.lane])"
    )


async def open_dashboard(browser: Browser, server: ServerThread, **kwargs: Any) -> Page:
    page = await browser.open(f"{server.url}/?token={TOKEN}", **kwargs)
    await expect(page.locator("body")).to_have_attribute("data-conn", "live")
    return page


async def assert_vetoes_and_rollbacks_sit_where_they_happened(
    page: Page, server: dict[str, Any]
) -> None:
    conflicts = server["conflicts"]
    assert conflicts and {c["path"] for c in conflicts} >= {"api.py::<header>"}

    # every veto sits on the lane of the runner that was refused, and names the file
    await expect(page.locator("g.veto")).to_have_count(len(conflicts))
    for conflict in conflicts:
        marker = page.locator(f'g.veto[data-key="veto-{conflict["event_id"]}"]')
        await expect(marker).to_have_attribute("data-lane", conflict["agent_name"])
        await expect(marker).to_have_attribute("data-path", conflict["path"])
        assert await page.evaluate(MARKER_IN_LANE, [conflict["event_id"], conflict["agent_name"]])
        vetoed = page.locator(
            f'.bar[data-task="{conflict["task_id"]}"][data-outcome="vetoed"]'
            f'[data-lane="{conflict["agent_name"]}"]'
        )
        await expect(vetoed).to_have_count(1)
    assert Counter(outcome for _, outcome, _ in await bars(page)) == attempt_outcomes(
        server["events"]
    )
    restored = {e["task_id"] for e in server["events"] if e["type"] == "file_restored"}
    rollbacks = await page.locator("g.rollback").evaluate_all("gs => gs.map(g => g.dataset.task)")
    assert set(rollbacks) == restored


async def assert_leases_conflicts_cost_and_story_match_the_server(
    page: Page, server: dict[str, Any]
) -> None:
    conflicts = server["conflicts"]
    assert server["state"]["leases"] == []
    await expect(page.locator('#leases-view [data-held="0"]')).to_have_text(
        "No file is leased right now."
    )
    await expect(page.locator('#leases-view [data-file="api.py"]')).to_contain_text("veto")
    for conflict in conflicts:
        row = page.locator(f'[data-conflict="{conflict["event_id"]}"]')
        await expect(row).to_contain_text(conflict["path"])
        await expect(row.locator("td").last).to_have_text(
            f"✓ {conflict['task_id']} succeeded later"
        )

    for agent in server["state"]["agents"]:
        row = page.locator(f'[data-runner="{agent["name"]}"]')
        await expect(row).to_contain_text(f"${agent['cost_usd']:.4f}")
    total = sum(t["cost_usd"] for t in server["state"]["tasks"])
    await expect(page.locator(".stat", has_text="Cost")).to_contain_text(f"${total:.4f}")
    story = page.locator("#story")
    first = conflicts[0]
    await expect(story).to_contain_text(
        f"{first['agent_name']} ({first['task_id']}) tried to write {first['path']}"
    )
    await expect(story).to_contain_text("All 5 tasks succeeded.")


async def test_the_page_follows_a_demo_run_live_and_a_new_page_replays_it_the_same(
    demo_server: ServerThread, browser: Browser, tmp_path: Path
) -> None:
    await load_demo_graph(demo_server)
    page = await open_dashboard(browser, demo_server)
    assert "token" not in page.url  # the token left the address bar for this tab's storage
    await expect(page.locator('[data-node][data-status="pending"]')).to_have_count(5)

    async def lease_of_t3_shown(_: Attempt) -> None:  # T3 keeps its parts until T4 is refused
        await expect(page.locator('[data-lease="api.py::<header>"]')).to_contain_text("T3")

    async def veto_marker_shown(_: Attempt) -> None:
        await expect(page.locator("g.veto").first).to_be_visible()
        await expect(page.locator('.bar[data-task="T4"][data-outcome="vetoed"]')).to_be_visible()

    async def t5_shown_running(_: Attempt) -> None:
        await expect(page.locator('[data-node="T5"]')).to_have_attribute("data-status", "running")

    result = await run_demo_fleet(
        demo_server,
        {("T4", 1): lease_of_t3_shown, ("T4", 2): veto_marker_shown, ("T5", 1): t5_shown_running},
    )
    assert result.ok

    await expect(page.locator("body")).to_have_attribute("data-run", "finished")
    await expect(page.locator('[data-node][data-status="succeeded"]')).to_have_count(5)
    # graph check's analysis, live: the veto folded api.py into T4's scope, so T3 and T4
    # now overlap there (GET /graph, re-read after the requeue).
    analysis = page.locator("#graph-analysis")
    await expect(analysis).to_contain_text("graph check: width 3 · critical path T1 → T2 → T5")
    await expect(analysis).to_contain_text("1 overlapping pair")
    await expect(analysis).to_contain_text("T3 + T4: api.py")
    # contention analytics (GET /stats, `codefleet stats`' figures): api.py cost T4 a veto
    contended = page.locator('#contention-view tr[data-file="api.py"]')
    await expect(contended).to_contain_text("T3, T4")
    await expect(contended.locator("td").nth(1)).to_have_text("1")
    await expect(page.locator("#contention-view")).to_contain_text("busy on average")
    server = await server_view(demo_server)
    await assert_vetoes_and_rollbacks_sit_where_they_happened(page, server)
    await assert_leases_conflicts_cost_and_story_match_the_server(page, server)

    shot = tmp_path / "dashboard.png"
    await page.mouse.move(0, 0)
    await page.screenshot(path=shot)
    assert shot.stat().st_size > 10_000
    if os.environ.get(SCREENSHOT_COPY):
        shutil.copyfile(shot, os.environ[SCREENSHOT_COPY])

    replay = await open_dashboard(browser, demo_server)
    await expect(replay.locator("body")).to_have_attribute("data-run", "finished")
    last_event = await page.locator("body").get_attribute("data-last-event")
    await expect(replay.locator("body")).to_have_attribute("data-last-event", str(last_event))
    assert await bars(replay) == await bars(page)
    assert browser.errors == []


async def test_a_finished_run_reads_by_keyboard_and_in_a_narrow_window(
    demo_server: ServerThread, browser: Browser, tmp_path: Path
) -> None:
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    attempts = sum(attempt_outcomes((await server_view(demo_server))["events"]).values())
    page = await open_dashboard(browser, demo_server, viewport=NARROW)
    await expect(page.locator("body")).to_have_attribute("data-run", "finished")
    await expect(page.locator(".bar")).to_have_count(attempts)
    # the demo's one stale read (T3 read models.py, T1 changed it), reconciled: a mark on T3's bar
    stale = page.locator('.bar[data-task="T3"] .stale-mark.reconciled[data-stale="models.py"]')
    await expect(stale).to_have_count(1)
    label = await page.locator('.bar[data-task="T3"]').get_attribute("aria-label") or ""
    assert "stale read at" in label and "models.py (T1) · reconciled: clean" in label

    overflow = await page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= NARROW["width"]  # the timeline scrolls inside its own box, not the page

    for _ in range(30):  # tab order: skip link, sections, zoom, then the timeline
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.classList.contains('bar')"):
            break
    focused = page.locator(":focus")
    await expect(focused).to_have_class(re.compile(r"^bar out-"))
    first = await focused.get_attribute("data-key")
    task = await focused.get_attribute("data-task")
    assert task is not None and task in (await focused.get_attribute("aria-label") or "")
    tooltip = page.locator("#tooltip")
    await expect(tooltip).to_be_visible()
    await expect(tooltip).to_contain_text(task)

    await page.keyboard.press("ArrowRight")
    assert await focused.get_attribute("data-key") != first
    await page.keyboard.press("Enter")
    chosen = await focused.get_attribute("data-task")
    await expect(page.locator("#log-view .selection button")).to_have_text(f"only {chosen} ✕")
    rows = await page.locator("#log-view tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.type, r.cells[3].textContent])"
    )
    batch_of_it = ("lease_denied", "landing_check_started", "landing_check_finished")
    assert rows and all(task == chosen or kind in batch_of_it for kind, task in rows)
    await page.keyboard.press("Escape")
    await expect(page.locator("#log-view .selection button")).to_have_count(0)

    width = float(await page.locator(".tl-svg").get_attribute("width") or 0)
    await page.keyboard.press("+")
    await expect(page.locator(".zoom-level")).to_have_text("1.5\N{MULTIPLICATION SIGN}")
    assert float(await page.locator(".tl-svg").get_attribute("width") or 0) == width * 1.5

    await page.keyboard.press("Tab")  # the timeline is one tab stop: next comes the graph
    await expect(page.locator(":focus")).to_have_attribute("data-node", "T1")

    await page.screenshot(path=tmp_path / "narrow.png", full_page=True)
    assert browser.errors == []


async def test_without_its_token_the_page_asks_for_it_then_connects(
    demo_server: ServerThread, browser: Browser
) -> None:
    await load_demo_graph(demo_server)
    page = await browser.open(f"{demo_server.url}/")
    await expect(page.locator("body")).to_have_attribute("data-conn", "auth")
    await expect(page.locator("#token-input")).to_be_focused()

    await page.locator("#token-input").fill(TOKEN)
    await page.keyboard.press("Enter")
    await expect(page.locator("body")).to_have_attribute("data-conn", "live")
    await expect(page.locator("[data-node]")).to_have_count(5)
    await expect(page.locator("#auth")).to_be_hidden()
    # the one refused read is the browser's own report of the 401 that asked for the token
    assert all("401" in error for error in browser.errors), browser.errors


async def test_a_dropped_stream_resumes_after_the_last_event_it_delivered(
    demo_server: ServerThread, browser: Browser
) -> None:
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        events = await client.all_events()
    reads: list[str] = []  # the `since` of each GET /events
    cursors: list[str] = []  # ... and of each stream

    async def first_read_is_short(route: Route) -> None:
        reads.append(parse_qs(urlsplit(route.request.url).query)["since"][0])
        if len(reads) == 1:  # as if the run had had five events when the page loaded
            body = json.dumps({"events": events[:5]})
            await route.fulfill(status=200, content_type="application/json", body=body)
        else:
            await route.continue_()

    async def first_stream_ends_early(route: Route) -> None:
        cursors.append(route.request.url.rsplit("since=", 1)[1])
        if len(cursors) == 1:  # the next five events, then the connection closes
            body = "".join(frame(e) for e in events[5:10])
            await route.fulfill(status=200, content_type="text/event-stream", body=body)
        else:
            await route.continue_()

    page = await browser.context.new_page()
    await page.route(re.compile(r"/events\?"), first_read_is_short)
    await page.route("**/events/stream?*", first_stream_ends_early)
    page.on("console", lambda m: browser.errors.append(m.text) if m.type == "error" else None)
    await page.goto(f"{demo_server.url}/?token={TOKEN}")

    await expect(page.locator("body")).to_have_attribute("data-last-event", str(events[-1]["id"]))
    # each stream starts after the last event read; each reconnect reads on from the last delivered
    assert reads[:2] == ["0", str(events[9]["id"])]
    assert cursors[:2] == [str(events[4]["id"]), str(events[-1]["id"])]
    await expect(page.locator("#log-view [aria-live]")).to_have_text(
        f"{len(events)} of {len(events)} events."
    )
    await expect(page.locator(".bar")).to_have_count(sum(attempt_outcomes(events).values()))
    assert browser.errors == []


async def test_a_fresh_server_on_another_record_behind_the_same_address_is_shown_from_its_start(
    make_server: Callable[..., ServerThread], browser: Browser
) -> None:
    """`runs new` and a fresh `serve` on the same port: the open page shows the new record,
    not the old one's tasks with the new one's events folded on top."""
    old = make_server(token=TOKEN, **FAST)
    await load_demo_graph(old)
    page = await open_dashboard(browser, old)
    await expect(page.locator('#graph-view [data-node="T1"]')).to_have_count(1)
    old.stop()

    new = make_server(token=TOKEN, port=old.settings.port, **FAST)  # its own database file
    async with FleetClient(new.url, token=TOKEN) as client:
        await client.create_tasks(
            [{"id": "N1", "title": "new", "description": "on the new record"}]
        )
        last = (await client.all_events())[-1]["id"]
    await expect(page.locator('#graph-view [data-node="N1"]')).to_have_count(1, timeout=20_000)
    await expect(page.locator('#graph-view [data-node="T1"]')).to_have_count(0)
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(last))
    await expect(page.locator("body")).to_have_attribute("data-conn", "live")


async def test_a_rolled_back_attempt_is_marked_on_its_runners_lane(
    demo_server: ServerThread, browser: Browser, tmp_path: Path
) -> None:
    script = {
        "holder": [{"write": {"path": "held.py", "content": "HELD = 1\n"}},
                   {"wait_denied": "held.py", "attempt": 1}],
        "eager": [{"wait_leased": "held.py", "attempt": 1},
                  {"write": {"path": "fresh.py", "content": "FRESH = 1\n"}},
                  {"append": {"path": "held.py", "text": "EAGER = 1\n"}}],
    }  # fmt: skip
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks(
            [
                {
                    "id": "holder",
                    "title": "Holds held.py",
                    "description": "do it",
                    "file_scope": ["held.py"],
                },
                {
                    "id": "eager",
                    "title": "Writes fresh.py, then held.py",
                    "description": "do it",
                    "file_scope": ["fresh.py"],
                },
            ]
        )
    executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
    settings = demo_server.settings
    result = await run_fleet(
        demo_server.url,
        lambda _: executor,
        FleetOptions(RunnerOptions("runner", settings.workdir, settings.run_dir), runners=2),
        token=TOKEN,
    )
    assert result.ok
    server = await server_view(demo_server)
    (conflict,) = server["conflicts"]

    page = await open_dashboard(browser, demo_server)
    await expect(page.locator("body")).to_have_attribute("data-run", "finished")
    rollback = page.locator("g.rollback")
    await expect(rollback).to_have_count(1)
    await expect(rollback).to_have_attribute("data-task", "eager")
    await expect(rollback).to_have_attribute("data-lane", conflict["agent_name"])
    await expect(rollback).to_have_attribute("data-paths", "fresh.py")
    await expect(rollback).to_have_attribute("aria-label", re.compile("fresh.py: removed"))
    await expect(page.locator('#log-view tr[data-type="file_restored"]')).to_contain_text(
        "fresh.py removed"
    )
    await expect(page.locator("#story")).to_contain_text("its earlier edits were rolled back")
    await page.screenshot(path=tmp_path / "rollback.png")
    assert browser.errors == []


async def test_the_lanes_are_this_run_s_runners_and_an_interrupted_attempt_is_said_to_be_yours(
    demo_server: ServerThread, browser: Browser
) -> None:
    script = {"one": [{"write": {"path": "one.py", "content": "ONE = 1\n"}}]}
    settings = demo_server.settings
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "one", "title": "One", "description": "do it"}])
        earlier = await run_fleet(
            demo_server.url,
            lambda _: ScriptedExecutor(parse_script(script), wait_timeout=10),
            FleetOptions(
                RunnerOptions("runner", settings.workdir, settings.run_dir),
                runners=2,
                name_suffix=".old",
            ),
            token=TOKEN,
        )
        assert earlier.ok
        await client.create_tasks([{"id": "two", "title": "Two", "description": "do it"}])
        await client.fleet_started(runners=1)  # the next run: its runner is stopped (Ctrl-C)
        joined = await client.register("runner-1.new", str(settings.workdir), None)
        agent, epoch = joined["agent_id"], joined["epoch"]
        assert await client.assignment(agent, epoch, wait=5) is not None
        await client.start("two", agent, epoch)
        await client.leave(agent, epoch, interrupted=True)

    page = await open_dashboard(browser, demo_server)
    labels = page.locator(".tl-label")
    await expect(labels).to_have_count(2)
    await expect(labels.nth(0)).to_have_attribute("data-lane", "runner-1.new")
    await expect(labels.nth(1)).to_have_attribute("data-lane", "2 earlier runners")
    await expect(labels.nth(1)).to_contain_text("offline · 1 attempt")
    await expect(page.locator("#story")).to_contain_text(
        "two's attempt 1 on runner-1.new was interrupted by you (not charged)"
    )
    await expect(page.locator("#story")).not_to_contain_text("ended with infra")
    await expect(page.locator('g.node[data-node="two"]')).to_have_attribute(
        "aria-label", re.compile(r"attempts 0/3 \+1 free")
    )
    assert browser.errors == []


async def test_a_write_that_waited_is_hatched_on_its_bar_with_an_arrow_to_the_holders_lane(
    make_server: Callable[..., ServerThread], browser: Browser, tmp_path: Path
) -> None:
    server = make_server(token=TOKEN, lease_wait=20.0, **FAST)
    script = {  # the holder ends once the waiter's write of held.py is parked behind it
        "holder": [
            {"write": {"path": "held.py", "content": "HELD = 1\n"}},
            {"wait_parked": "held.py"},
        ],
        "waiter": [
            {"wait_leased": "held.py"},
            {"append": {"path": "held.py", "text": "WAITED = 1\n"}},
        ],
    }
    async with FleetClient(server.url, token=TOKEN) as client:
        await client.create_tasks(
            [
                {"id": t, "title": t, "description": "do it", "file_scope": [f"{t}.txt"]}
                for t in ("holder", "waiter")
            ]
        )
    executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
    settings = server.settings
    result = await run_fleet(
        server.url,
        lambda _: executor,
        FleetOptions(RunnerOptions("runner", settings.workdir, settings.run_dir), runners=2),
        token=TOKEN,
    )
    assert result.ok

    page = await open_dashboard(browser, server)
    await expect(page.locator("body")).to_have_attribute("data-run", "finished")
    waiter = page.locator('g.bar[data-task="waiter"]')
    link = waiter.locator("line.wait-link")
    await expect(link).to_have_count(1)
    await expect(link).to_have_attribute("data-holder", "holder")
    await expect(link).to_have_attribute("marker-end", "url(#arrow-wait)")
    # measured in one frame: a later render may rescale the time axis between two reads
    mark, line, body = await page.evaluate(
        """() => {
        const box = (e) => { const b = e.getBoundingClientRect();
                             return {x: b.x, y: b.y, width: b.width, height: b.height}; };
        const waiter = document.querySelector('g.bar[data-task="waiter"]');
        const holder = document.querySelector('g.bar[data-task="holder"]');
        return [box(waiter.querySelector("rect.wait-mark")),
                box(waiter.querySelector("line.wait-link")),
                box(holder.querySelector("rect.bar-body"))];
        }"""
    )
    assert mark["x"] <= line["x"] <= mark["x"] + mark["width"]  # it leaves the hatched segment
    reaches = (line["y"], line["y"] + line["height"])  # and ends at the holder's bar
    assert min(abs(reaches[0] - (body["y"] + body["height"])), abs(reaches[1] - body["y"])) <= 2
    legend = page.locator("ul.legend li", has=page.locator(".wait-key"))  # the mark is explained
    await expect(legend).to_have_text("waited for a held file")
    await page.screenshot(path=tmp_path / "wait.png")
    assert browser.errors == []


async def test_a_persons_session_shows_in_the_lease_map_live_and_leaves_it(
    demo_server: ServerThread, browser: Browser
) -> None:
    """`codefleet join`: a person's lease appears with its kind, and goes at SessionEnd."""
    tree = str(demo_server.settings.workdir)
    env = {"CODEFLEET_TOKEN": TOKEN, "USER": "ada"}

    def person(event: str, **extra: Any) -> str:
        body = {"session_id": "0aeef531-72cc-4552-9656-7482e7ecde15", "cwd": tree, **extra}
        return run(HookArgs(event, demo_server.url, tree), json.dumps(body), env)

    page = await open_dashboard(browser, demo_server)
    write = {"tool_name": "Write", "tool_input": {"file_path": f"{tree}/api.py", "content": "x"}}
    assert person("pre-tool-use", **write) == ""

    row = page.locator('#leases-view tr[data-lease="api.py"]')
    await expect(row).to_have_attribute("data-kind", "interactive")
    await expect(row).to_contain_text("ada@0aeef531")
    await expect(row.locator(".badge.cat-person")).to_have_text("person")
    await expect(row).to_contain_text("i-0aeef531")
    await expect(page.locator('[data-runner="ada@0aeef531"]')).to_have_count(0)

    # A runner takes a task and a file of its own; the person is then refused that file.
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "T9", "title": "Fleet work", "description": "do it"}])
        agent = await client.register("runner-1", tree, os.getpid())
        assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5) is not None
        await client.start("T9", agent["agent_id"], agent["epoch"])
        granted = await client.acquire(
            agent["agent_id"], agent["epoch"], "T9", ["models.py"], "Edit"
        )
        assert granted["decision"] == "allow"
    refused = person(
        "pre-tool-use", tool_name="Write", tool_input={"file_path": f"{tree}/models.py"}
    )
    assert "is being edited by runner-1 for task T9 (Fleet work)" in refused
    await expect(page.locator('#log-view tr[data-type="lease_denied"]')).to_have_count(1)
    await expect(page.locator("g.veto")).to_have_count(0)  # a person has no runner lane
    await expect(page.locator('#leases-view tr[data-lease="models.py"]')).to_have_attribute(
        "data-kind", "task"
    )

    assert person("session-end", hook_event_name="SessionEnd", reason="other") == ""
    await expect(page.locator('#leases-view tr[data-lease="api.py"]')).to_have_count(0)
    await expect(page.locator('#log-view tr[data-type="agent_offline"]')).to_contain_text(
        "ada@0aeef531 released api.py (session_end)"
    )
    assert browser.errors == []


async def test_a_usage_limit_pause_shows_a_live_countdown_and_goes_on_resume(
    demo_server: ServerThread, browser: Browser
) -> None:
    tree = str(demo_server.settings.workdir)
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "T1", "title": "Limited", "description": "do it"}])
        runner = await client.register("runner-1", tree, None)
        agent, epoch = runner["agent_id"], runner["epoch"]
        assert await client.assignment(agent, epoch, wait=5) is not None
        await client.start("T1", agent, epoch)
        page = await open_dashboard(browser, demo_server)
        limited = AttemptReport(
            attempt=1,
            ok=False,
            error_kind=ErrorKind.RATE_LIMITED,
            error="session ended with success (HTTP 429): usage limit",
            retry_after_s=600,
        )
        await client.complete("T1", agent, epoch, limited)

        banner = page.locator("#pause")
        await expect(banner).to_be_visible()
        await expect(banner).to_contain_text("Fleet paused on a usage limit")
        await expect(banner).to_contain_text("runner-1: session ended with success (HTTP 429)")
        countdown = banner.locator(".countdown")
        await expect(countdown).to_have_text(re.compile(r"^(9|10) min"))
        first = await countdown.text_content()
        await expect(countdown).not_to_have_text(first or "")  # it counts down by itself
        await expect(page.locator('#log-view tr[data-type="fleet_paused"]')).to_contain_text(
            "paused until"
        )

        await client.resume()
        await expect(banner).to_be_hidden()
        await expect(page.locator('#log-view tr[data-type="fleet_resumed"]')).to_contain_text(
            "resumed (operator)"
        )
    assert browser.errors == []


async def test_a_spent_budget_shows_in_the_cost_figure_and_a_banner_until_it_is_raised(
    demo_server: ServerThread, browser: Browser
) -> None:
    tree = str(demo_server.settings.workdir)
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks(
            [{"id": t, "title": t, "description": "do it"} for t in ("T1", "T2")]
        )
        await client.set_budget(0.5)
        page = await open_dashboard(browser, demo_server)
        runner = await client.register("runner-1", tree, None)
        agent, epoch = runner["agent_id"], runner["epoch"]
        task = await client.assignment(agent, epoch, wait=5)
        assert task is not None
        await client.start(task.id, agent, epoch)
        await client.complete(
            task.id, agent, epoch, AttemptReport(attempt=1, ok=True, cost_usd=0.6)
        )

        banner = page.locator('#pause[data-limit="budget"]')
        await expect(banner).to_be_visible()
        await expect(banner).to_contain_text("Fleet budget exhausted · $0.6000 spent of $0.5000")
        await expect(page.locator("#stats")).to_contain_text("$0.6000 of $0.5000")
        await expect(
            page.locator('#log-view tr[data-type="fleet_budget_exhausted"]')
        ).to_contain_text("no new task is assigned")

        await client.set_budget(5.0)
        await expect(page.locator("#pause")).to_be_hidden()
        await expect(page.locator("#stats")).to_contain_text("$0.6000 of $5.00")
    assert browser.errors == []


# Every panel's content fits its panel at these window widths (a table or a picture that
# does not fit scrolls inside its own box only when the panel cannot grow any wider).
LAYOUT_WIDTHS = (1024, 1280, 1920)
CROPPED = """() => [...document.querySelectorAll("main > section.panel")].flatMap((panel) =>
  [panel, ...panel.querySelectorAll(".scroll-x, table")]
    .filter((box) => box.scrollWidth > box.clientWidth + 1)
    .map((box) => `${panel.id}: ${box.tagName.toLowerCase()}${box.id ? "#" + box.id : ""} `
      + `shows ${box.clientWidth} of ${box.scrollWidth} px`))"""


async def test_no_panel_is_narrower_than_its_content_at_common_window_widths(
    demo_server: ServerThread, browser: Browser
) -> None:
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok

    cropped: dict[int, list[str]] = {}
    for width in LAYOUT_WIDTHS:
        page = await open_dashboard(browser, demo_server, viewport={"width": width, "height": 900})
        await expect(page.locator("body")).to_have_attribute("data-run", "finished")
        await expect(page.locator('#contention-view tr[data-file="api.py"]')).to_be_visible()
        cropped[width] = await page.evaluate(CROPPED)
        await page.close()

    assert cropped == {width: [] for width in LAYOUT_WIDTHS}
    assert browser.errors == []


async def test_the_dashboards_duration_is_the_reports_wall_time_for_the_same_run(
    demo_server: ServerThread, browser: Browser
) -> None:
    """A runner going stale 22.5 s after the run finished is not part of the run's duration,
    nor the ten minutes before the next run on the same database (which is)."""
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        record = await fetch_record(client)
    events = list(record.events)
    finished = next(e for e in reversed(events) if e["type"] == "run_finished")
    later = from_iso(finished["at"]) + timedelta(seconds=22.5)
    stale = {
        **events[-1],
        "id": events[-1]["id"] + 1,
        "type": "agent_offline",
        "at": to_iso(later),
        "task_id": None,
        "payload": {"reason": "agent_stale"},
    }
    next_run = [
        {
            **stale,
            "id": stale["id"] + n,
            "type": kind,
            "payload": payload,
            "at": to_iso(later + timedelta(seconds=600 + offset)),
        }
        for n, (kind, offset, payload) in enumerate(
            [("fleet_started", 0.0, {"runners": 1}), ("run_finished", 1.25, {"ok": True})], 1
        )
    ]
    events = [*events, stale, *next_run]
    wall_s = run_facts(replace(record, events=tuple(events))).wall_s

    async def with_a_later_event(route: Route) -> None:
        if parse_qs(urlsplit(route.request.url).query)["since"][0] == "0":
            body = json.dumps({"events": events})
            await route.fulfill(status=200, content_type="application/json", body=body)
        else:
            await route.continue_()

    page = await browser.context.new_page()
    await page.route(re.compile(r"/events\?"), with_a_later_event)
    await page.goto(f"{demo_server.url}/?token={TOKEN}")
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(events[-1]["id"]))

    shown = await page.locator(".stat", has_text="Duration").locator("dd").inner_text()
    value, unit = shown.split()
    shown_s = float(value) / (1000 if unit == "ms" else 1)
    # within one step of the last digit shown: two decimals under 10 s, one from 10 s (`seconds`)
    digits = len(value.partition(".")[2])
    last_digit = 10.0**-digits / (1000 if unit == "ms" else 1)
    assert unit in ("ms", "s") and abs(shown_s - wall_s) <= last_digit + 0.001, (
        f"dashboard {shown}, report {seconds(wall_s)}"
    )
    assert shown in await page.locator("#story").inner_text()


# -- a person in the loop (issue 31) ---------------------------------------------------------


async def test_the_dashboard_shows_an_open_question_and_sends_an_answer(
    demo_server: ServerThread, browser: Browser
) -> None:
    """The agent's question gets a badge and a row; the answer typed there reaches its session."""
    script = {
        "Q1": [
            {"ask": "httpx or requests?"},
            {"expect_answer": "use httpx"},
            {"write": {"path": "client.txt", "content": "httpx\n"}},
        ]
    }
    executor = ScriptedExecutor(parse_script(script), wait_timeout=30)
    settings = demo_server.settings
    page = await open_dashboard(browser, demo_server)
    await expect(page.locator("#questions-view")).to_contain_text("No open questions.")
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "Q1", "title": "Pick a client", "description": "ask"}])
        run = run_fleet(
            demo_server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", settings.workdir, settings.run_dir)),
            token=TOKEN,
        )
        fleet = asyncio.create_task(run)
        row = page.locator('#questions-view li[data-task="Q1"]')
        await expect(row).to_contain_text("Q1 (attempt 1) asks: httpx or requests?")
        await expect(page.locator('[data-node="Q1"]')).to_have_attribute("data-asking", "true")
        await row.get_by_label("Answer to Q1").fill("use httpx, it is async")
        await row.get_by_role("button", name="Send").click()
        result = await asyncio.wait_for(fleet, 30)
        [answered] = [e for e in await client.all_events() if e["type"] == "question_answered"]
    assert result.all_succeeded
    assert (settings.workdir / "client.txt").read_text() == "httpx\n"
    assert answered["payload"]["text"] == "use httpx, it is async"
    await expect(page.locator("#questions-view")).to_contain_text("No open questions.")
    await expect(page.locator('[data-node="Q1"]')).not_to_have_attribute("data-asking", "true")
    assert browser.errors == []


async def test_a_message_typed_in_the_tell_form_reaches_the_tasks_messages(
    demo_server: ServerThread, browser: Browser
) -> None:
    """Select a task, tell it something: `codefleet tasks ID` lists the message."""
    await load_demo_graph(demo_server)
    page = await open_dashboard(browser, demo_server)
    tell = page.locator("#tell")
    await expect(tell).to_be_hidden()
    await page.locator('[data-node="T1"]').click()
    await expect(tell).to_contain_text("Tell this task (T1)")
    await page.get_by_label("Tell this task").fill("mind the docstrings")
    await tell.get_by_role("button", name="Send").click()
    await expect(tell.locator(".form-status")).to_have_text("Sent.")
    await expect(page.locator('#log-view tr[data-type="operator_message"]')).to_have_count(1)

    args = ["tasks", "T1", "--server", demo_server.url, "--token", TOKEN]
    shown = await asyncio.to_thread(CliRunner().invoke, cli, args, env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "mind the docstrings" in shown.output
    assert browser.errors == []
