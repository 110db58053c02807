"""Helpers for the browser tests: the Chromium launch, the demo fleet, what the server says.

The browser is the system's `/usr/bin/chromium` (`apt-get install chromium`;
`CODEFLEET_CHROMIUM` points elsewhere), never a Playwright download, started
headless with a fresh profile. Without one a test that needs it is skipped
with a one-line reason, unless `CI` is set: CI installs Chromium, so there a
missing browser is a failure, never a silent skip (`tool_support.unavailable`). `run_demo_fleet` runs the demo graph with the
scripted agents of `examples/demo-script.yaml`, optionally gated on what the
page shows, and reports synthetic token usage so that the cost view has
figures to draw (a dry run spends nothing).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, ConsoleMessage, Page, async_playwright
from tool_support import unavailable

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.fleet.local import FleetOptions, FleetResult, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, load_script
from codefleet.server.thread import ServerThread

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "browser-test-token"
FAST = {"tick_interval": 0.05, "backoff_base": 0.0, "heartbeat_interval": 0.5}
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 420, "height": 800}

Gate = Callable[[Attempt], Awaitable[None]]


@dataclass
class Browser:
    """One Chromium with a fresh profile; every page it opens records its console errors."""

    context: BrowserContext
    errors: list[str] = field(default_factory=list)

    async def open(self, url: str, viewport: dict[str, int] = WIDE) -> Page:
        page = await self.context.new_page()
        await page.set_viewport_size(viewport)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        await page.goto(url)
        return page

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")


def chromium_path(env: Mapping[str, str] = os.environ) -> Path:
    """The Chromium to drive, from `CODEFLEET_CHROMIUM` or the system's default."""
    return Path(env.get("CODEFLEET_CHROMIUM") or DEFAULT_CHROMIUM)


def missing_chromium(env: Mapping[str, str] = os.environ) -> str | None:
    """Why the browser tier cannot run here (one line), or None when Chromium is found."""
    path = chromium_path(env)
    if path.is_file() and os.access(path, os.X_OK):
        return None
    return f"no Chromium at {path}: `apt-get install chromium`, or set CODEFLEET_CHROMIUM"


def require_chromium(env: Mapping[str, str] = os.environ) -> Path:
    """The browser's path; without one the test is `unavailable` (skipped, or failed in CI)."""
    reason = missing_chromium(env)
    if reason:
        unavailable(reason)
    return chromium_path(env)


@asynccontextmanager
async def launch(chromium: Path, profile: Path) -> AsyncIterator[Browser]:
    """Headless `chromium` with a fresh profile in `profile`."""
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(chromium),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=WIDE,
        )
        try:
            yield Browser(context)
        finally:
            await context.close()


def synthetic_usage(outcome: AttemptReport) -> AttemptReport:
    """Deterministic token counts and cost for a scripted attempt (a dry run spends nothing)."""
    files = len(outcome.files_written)
    tokens_in = 1800 + 2400 * files
    tokens_out = 120 + 380 * files
    cost = round(tokens_in * 3e-6 + tokens_out * 15e-6, 6)
    return replace(outcome, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)


class GatedExecutor:
    """The demo's scripted agents; `gates[(task, attempt)]` must pass before that attempt plays."""

    def __init__(self, gates: dict[tuple[str, int], Gate]) -> None:
        self.inner = ScriptedExecutor(load_script(EXAMPLES / "demo-script.yaml"), wait_timeout=10)
        self.gates = gates

    async def run(self, attempt: Attempt) -> AttemptReport:
        gate = self.gates.get((attempt.task_id, attempt.number))
        if gate is not None:
            await gate(attempt)
        return synthetic_usage(await self.inner.run(attempt))


async def load_demo_graph(server: ServerThread) -> None:
    async with FleetClient(server.url, token=TOKEN) as client:
        await client.create_tasks(load_graph(EXAMPLES / "demo-tasks.yaml"))


async def run_demo_fleet(
    server: ServerThread, gates: dict[tuple[str, int], Gate] | None = None
) -> FleetResult:
    """Three runners over the demo graph (already loaded) until it drains."""
    executor = GatedExecutor(gates or {})
    settings = server.settings
    return await run_fleet(
        server.url,
        lambda _: executor,
        FleetOptions(
            RunnerOptions(
                "runner",
                settings.workdir,
                settings.run_dir,
                protected=(settings.db, settings.run_dir / "runners"),
            ),
            runners=3,
        ),
        token=TOKEN,
    )


async def server_view(server: ServerThread) -> dict[str, Any]:
    """What the server says after a run: its state, conflicts and events."""
    async with FleetClient(server.url, token=TOKEN) as client:
        return {
            "state": await client.state(),
            "conflicts": await client.conflicts(),
            "events": await client.all_events(),
        }


def attempt_outcomes(events: list[dict[str, Any]]) -> Counter[str]:
    """How the attempts of a run ended, by the server's own record (one bar each)."""
    ended: Counter[str] = Counter()
    for event in events:
        if event["type"] == "task_succeeded":
            ended["succeeded"] += 1
        elif event["type"] == "task_requeued":
            ended["vetoed" if event["payload"]["error_kind"] == "veto" else "requeued"] += 1
        elif event["type"] == "repair_started" and event["payload"]["cause"] == "integration":
            ended["repaired"] += 1  # its change stays: the next attempt resumes the session
    assert sum(ended.values()) == sum(e["type"] == "task_assigned" for e in events)
    return ended
