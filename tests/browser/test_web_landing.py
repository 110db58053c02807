"""The web dashboard shows landing from the events alone: the queue, the check, the halt, the order.

The page reads a real server with no graph; its first `GET /events` answers the landing
run of `landing_log` up to the halt, and its first stream delivers the rest, so what the
page shows is driven by the landing events exactly as the contract gives them (issue 39).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from landing_log import CHECKING, EVENTS, HALTED, OLD_EVENTS, TASKS
from playwright.async_api import Page, Route, expect
from web_support import TOKEN, Browser

from codefleet.review.collisionstats import fleet_stats
from codefleet.review.facts import run_facts
from codefleet.review.runrecord import RunRecord
from codefleet.review.statsjson import stats_json
from codefleet.server.sse import frame
from codefleet.server.thread import ServerThread


async def open_with(
    browser: Browser,
    server: ServerThread,
    read: list[dict[str, Any]],
    stream: list[dict[str, Any]],
    stats: dict[str, Any] | None = None,
) -> Page:
    """The page, its first `/events` read answering `read`, its first stream `stream`,
    and `GET /stats` answering `stats` (when given)."""
    streams: list[str] = []

    async def given_stats(route: Route) -> None:
        await route.fulfill(status=200, content_type="application/json", body=json.dumps(stats))

    async def first_read(route: Route) -> None:
        if parse_qs(urlsplit(route.request.url).query)["since"][0] == "0":
            body = json.dumps({"events": read})
            await route.fulfill(status=200, content_type="application/json", body=body)
        else:
            await route.continue_()

    async def first_stream(route: Route) -> None:
        streams.append(route.request.url)
        if len(streams) == 1 and stream:
            body = "".join(frame(e) for e in stream)
            await route.fulfill(status=200, content_type="text/event-stream", body=body)
        else:
            await route.continue_()

    page = await browser.context.new_page()
    page.on("pageerror", lambda error: browser.errors.append(f"page error: {error}"))
    await page.route(re.compile(r"/events\?"), first_read)
    await page.route("**/events/stream?*", first_stream)
    if stats is not None:
        await page.route(re.compile(r"/stats$"), given_stats)
    await page.goto(f"{server.url}/?token={TOKEN}")
    return page


async def test_the_landing_queue_panel_shows_the_queue_in_order_and_the_check_under_way(
    demo_server: ServerThread, browser: Browser
) -> None:
    page = await open_with(browser, demo_server, EVENTS[:CHECKING], [])
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(CHECKING))

    queue = page.locator("#landing-view [data-queued]")
    await expect(queue).to_have_count(2)
    assert await queue.evaluate_all("els => els.map(e => e.dataset.queued)") == ["T1", "T2"]
    check = page.locator("#landing-view .landing-check")
    await expect(check).to_contain_text("Checking test on T1, T2 (batch) over 0 landed")
    await expect(page.locator('#graph-view [data-node="T1"]')).to_have_attribute(
        "data-status", "landing"
    )
    await expect(page.locator('#graph-view [data-node="T2"] .node-status')).to_have_text(
        "⇣ landing 2/2"
    )
    await expect(page.locator("#landing-halt")).to_be_hidden()
    assert browser.errors == []


async def test_every_check_under_way_is_shown_when_landing_steps_run_in_parallel(
    demo_server: ServerThread, browser: Browser
) -> None:
    batch = EVENTS[CHECKING - 1]
    ahead = {**batch, "id": CHECKING + 1, "payload": {
        **batch["payload"], "step": 99, "batch": ["T1", "T2", "T3"], "purpose": "ahead"}}  # fmt: skip
    page = await open_with(browser, demo_server, [*EVENTS[:CHECKING], ahead], [])
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(CHECKING + 1))

    checks = page.locator("#landing-view .landing-check")
    await expect(checks).to_have_count(2)
    await expect(checks.nth(0)).to_contain_text("Checking test on T1, T2 (batch) over 0 landed")
    await expect(checks.nth(1)).to_contain_text("Checking test on T1, T2, T3 (ahead) over 0")
    assert browser.errors == []


async def test_a_halt_is_loud_until_landing_resumes_and_each_task_shows_its_landing_order(
    demo_server: ServerThread, browser: Browser
) -> None:
    record = RunRecord(tasks=TASKS, events=tuple(EVENTS), workdir="/tree")
    stats = stats_json(fleet_stats(run_facts(record)))  # what GET /stats says of this run
    page = await open_with(browser, demo_server, EVENTS[:HALTED], EVENTS[HALTED:], stats)
    # the stream delivers the resume and T3's landing: the page follows it to the end
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(EVENTS[-1]["id"]))

    await expect(page.locator("#landing-halt")).to_be_hidden()
    await expect(page.locator("#landing-view [data-last-order]")).to_have_attribute(
        "data-last-order", "3"
    )
    rows = page.locator("#landing-view [data-landed]")
    assert await rows.evaluate_all("els => els.map(e => [e.dataset.landed, e.dataset.order])") == [
        ["T1", "1"],
        ["T2", "2"],
        ["T3", "3"],
    ]
    broke = page.locator('#landing-view [data-break="T2"]')
    await expect(broke).to_contain_text("T2 broke test with T1 (attempt 1) · reworked, landed #2")
    for task_id, order in (("T1", 1), ("T2", 2), ("T3", 3)):
        node = page.locator(f'#graph-view [data-node="{task_id}"]')
        await expect(node).to_have_attribute("data-order", str(order))
        await expect(node.locator(".node-status")).to_have_text(f"✓ succeeded #{order}")
    await expect(page.locator("#story")).to_contain_text(
        'T2\'s attempt 1 on runner-2 broke the landing check "test" with T1'
    )
    await expect(page.locator("#contention-view [data-landing]")).to_have_text(
        "Landing: 3 landed · 8 landing checks (2.67 per landed task) · waited to land 2.67 s on "
        "average, 4.50 s at most · 1 integration break, 1 reworked and landed · 1 halt"
    )
    # T2's first attempt ended when it began to wait, and its break requeued it
    bar = page.locator('.bar[data-task="T2"]').first
    await expect(bar).to_have_attribute("data-outcome", "requeued")
    assert browser.errors == []


async def test_the_halt_banner_names_the_check_and_the_last_landing(
    demo_server: ServerThread, browser: Browser
) -> None:
    page = await open_with(browser, demo_server, EVENTS[:HALTED], [])
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(HALTED))

    halt = page.locator("#landing-halt")
    await expect(halt).to_be_visible()
    await expect(halt).to_contain_text(
        "LANDING HALTED: the landed tree alone fails test (last landed T2)"
    )
    await expect(halt).to_contain_text("codefleet landing resume")
    await expect(page.locator("#landing-view .landing-check")).to_have_text(
        "No check runs while landing is halted."
    )
    await expect(page.locator('#log-view tr[data-type="landing_halted"]')).to_contain_text(
        "LANDING HALTED"
    )
    assert browser.errors == []


async def test_a_run_recorded_before_landing_shows_an_empty_landing_panel_and_no_order(
    demo_server: ServerThread, browser: Browser
) -> None:
    created = {**OLD_EVENTS[0], "id": 0, "type": "task_created", "task_id": "T1"}
    created["payload"] = {"title": "old"}
    events = [OLD_EVENTS[0], {**created, "id": 2}] + [
        {**e, "id": e["id"] + 1} for e in OLD_EVENTS[1:]
    ]
    page = await open_with(browser, demo_server, events, [])
    await expect(page.locator("body")).to_have_attribute("data-last-event", str(events[-1]["id"]))

    await expect(page.locator("#landing-view")).to_have_text("Nothing has waited to land yet.")
    await expect(page.locator('#graph-view [data-node="T1"] .node-status')).to_have_text(
        "✓ succeeded"
    )
    assert browser.errors == []
