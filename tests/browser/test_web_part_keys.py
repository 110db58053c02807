"""The web dashboard in Chromium after a demo run with part leases: file first, then the part.

The demo graph runs with its scripted agents on a server with `lease_granularity: part`, so
its staged veto is on a part of `api.py` (the server's conflicts say which); the page must
show that key as its file and its part, and gather the part under its file in the files of
the run and in the contention table (`GET /stats`).
"""

from __future__ import annotations

from collections.abc import Callable

from playwright.async_api import expect
from web_support import FAST, TOKEN, Browser, load_demo_graph, run_demo_fleet, server_view

from codefleet.server.thread import ServerThread
from codefleet.toolcalls.leasekeys import split_part_key


async def test_a_veto_on_a_part_reads_file_then_part_and_is_counted_under_its_file(
    make_server: Callable[..., ServerThread], browser: Browser
) -> None:
    server = make_server(token=TOKEN, lease_granularity="part", **FAST)
    await load_demo_graph(server)
    assert (await run_demo_fleet(server)).ok
    page = await browser.open(f"{server.url}/?token={TOKEN}")
    await expect(page.locator("body")).to_have_attribute("data-run", "finished")

    [conflict] = [c for c in (await server_view(server))["conflicts"] if "::" in c["path"]]
    file, part = split_part_key(conflict["path"])
    assert part is not None
    refused = page.locator(f'[data-conflict="{conflict["event_id"]}"] td.path')
    await expect(refused).to_have_text(conflict["path"])
    await expect(refused.locator(".part")).to_have_text(f"::{part}")  # the part, apart
    tile = page.locator(f'#leases-view li[data-file="{file}"]')
    await expect(tile).to_have_count(1)  # one tile for the file, its parts inside
    await expect(tile.locator(f'.part[data-part="{part}"]')).to_contain_text("1 veto")
    assert await page.locator(f'#leases-view li[data-file="{conflict["path"]}"]').count() == 0
    total = page.locator(f'#contention-view tr[data-file="{file}"]')
    await expect(total.locator("td").first).to_have_text(file)
    beneath = page.locator(f'#contention-view tr[data-part-of="{file}"][data-part="{part}"]')
    await expect(beneath.locator("td").first).to_have_text(f"::{part}")
    await expect(beneath.locator("td").nth(1)).to_have_text("1")
    assert browser.errors == []
