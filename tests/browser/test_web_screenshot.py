"""The dashboard guide's screenshot command pictures the run, never "Connecting…".

`chromium --headless --virtual-time-budget=N` loads the page, waits for its
`load` event, lets N virtual milliseconds pass (virtual time stands still while
a fetch the budget counts is pending), then dumps the DOM and only after that
takes the picture. Whatever the page shows then must not wait on the event
stream, whose bytes arrive in real time: the first paint comes from plain JSON
reads. The failure was a race, so the guide's own command runs several
times, each a fresh Chromium with `--dump-dom` added (and, for root in CI,
`--no-sandbox` and a fresh profile); and the same property is shown without a
race by holding the stream's request open in Playwright.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from playwright.async_api import Route, expect
from web_support import (
    CHROMIUM_ARGS,
    TOKEN,
    Browser,
    attempt_outcomes,
    load_demo_graph,
    run_demo_fleet,
    server_view,
)

from codefleet.server.thread import ServerThread

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "dashboard.md"
SHOTS = 5
SHOT_TIMEOUT_S = 60


def readme_screenshot_command() -> list[str]:
    """The dashboard screenshot command of docs/dashboard.md, as an argument list."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("chromium --headless")
    return shlex.split(text[start : text.index("\n```", start)].replace("\\\n", " "))


@dataclass
class Shot:
    """What one dumped DOM shows: the body's data, the status pill, the bars and the counters."""

    body: dict[str, str] = field(default_factory=dict)
    pill: str = ""
    bars: list[str] = field(default_factory=list)
    stats: dict[str, str] = field(default_factory=dict)


class ShotParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.shot = Shot()
        self._into: str | None = None  # "pill", "dt" or "dd": where the next text goes
        self._label = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "body":
            self.shot.body = values
        if "bar" in values.get("class", "").split() and "data-task" in values:
            self.shot.bars.append(values["data-task"])
        if values.get("id") == "conn":
            self._into = "pill"
        elif tag in ("dt", "dd"):
            self._into = tag

    def handle_endtag(self, tag: str) -> None:
        self._into = None

    def handle_data(self, data: str) -> None:
        if self._into == "pill":
            self.shot.pill += data
        elif self._into == "dt":
            self._label = data
        elif self._into == "dd":
            self.shot.stats[self._label] = data


async def take_shot(
    chromium: Path, server: ServerThread, tmp_path: Path, number: int
) -> tuple[Shot, Path]:
    """Run the guide's command against `server` in a fresh Chromium; its DOM and its picture."""
    png = tmp_path / f"dashboard-{number}.png"

    def here(arg: str) -> str:  # the guide's picture and address, made this test's
        if arg.startswith("--screenshot="):
            return f"--screenshot={png}"
        return f"{server.url}/?token={TOKEN}" if arg.startswith("http") else arg

    extra = [*CHROMIUM_ARGS, f"--user-data-dir={tmp_path / f'profile-{number}'}", "--dump-dom"]
    process = await asyncio.create_subprocess_exec(
        str(chromium),
        *extra,
        *map(here, readme_screenshot_command()[1:]),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    dom, _ = await asyncio.wait_for(process.communicate(), SHOT_TIMEOUT_S)
    assert process.returncode == 0, f"chromium exited {process.returncode}"
    parser = ShotParser()
    parser.feed(dom.decode("utf-8"))
    return parser.shot, png


def test_the_readme_shows_one_screenshot_command_with_a_virtual_time_budget() -> None:
    command = readme_screenshot_command()
    assert command[0] == "chromium"
    assert "--headless" in command and any(a.startswith("--screenshot=") for a in command)
    assert any(re.fullmatch(r"--virtual-time-budget=\d+", a) for a in command)
    assert command[-1] == "http://127.0.0.1:8099/"


async def test_the_readme_screenshot_of_a_finished_run_shows_the_run_not_connecting(
    chromium: Path, demo_server: ServerThread, tmp_path: Path
) -> None:
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    server = await server_view(demo_server)
    last = str(server["events"][-1]["id"])
    attempts = sum(attempt_outcomes(server["events"]).values())
    tasks = sorted(t["id"] for t in server["state"]["tasks"])
    assert tasks == ["T1", "T2", "T3", "T4", "T5"] and server["conflicts"]

    for number in range(1, SHOTS + 1):
        shot, png = await take_shot(chromium, demo_server, tmp_path, number)
        seen = f"shot {number}: pill {shot.pill!r}, event {shot.body.get('data-last-event')}"
        assert not shot.pill.startswith("Connecting"), seen
        assert shot.body.get("data-conn") != "connecting", seen
        assert shot.body.get("data-last-event") == last, seen  # every event, from the JSON read
        assert shot.body.get("data-run") == "finished", seen
        assert shot.pill.endswith("finished"), seen
        assert len(shot.bars) == attempts and sorted(set(shot.bars)) == tasks, seen
        assert shot.stats["Tasks"] == "5/5 succeeded", seen
        assert shot.stats["Vetoes"] == str(len(server["conflicts"])), seen
        assert png.stat().st_size > 10_000, seen


async def test_with_the_stream_held_open_the_page_paints_the_run_from_its_json_reads(
    demo_server: ServerThread, browser: Browser
) -> None:
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    server = await server_view(demo_server)
    last = str(server["events"][-1]["id"])
    attempts = sum(attempt_outcomes(server["events"]).values())
    held: list[Route] = []

    async def hold(route: Route) -> None:  # neither answered nor failed: the stream never opens
        held.append(route)

    page = await browser.context.new_page()
    page.on("console", lambda m: browser.errors.append(m.text) if m.type == "error" else None)
    await page.route("**/events/stream?*", hold)
    async with page.expect_request("**/events/stream?*") as stream:
        await page.goto(f"{demo_server.url}/?token={TOKEN}")

    body = page.locator("body")
    await expect(body).to_have_attribute("data-conn", "loaded")
    await expect(body).to_have_attribute("data-last-event", last)
    # the stream, when it opens, goes on from the last event read
    assert (await stream.value).url.endswith(f"/events/stream?since={last}")
    await expect(page.locator("#conn")).to_have_text("Loaded · finished")
    await expect(page.locator(".bar")).to_have_count(attempts)
    await expect(page.locator("g.veto")).to_have_count(len(server["conflicts"]))
    await expect(page.locator("#story")).to_contain_text("All 5 tasks succeeded.")
    n = len(server["events"])
    await expect(page.locator("#log-view [aria-live]")).to_have_text(f"{n} of {n} events.")
    assert len(held) == 1 and browser.errors == []
