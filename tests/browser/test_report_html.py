"""`codefleet report --format html`: one self-contained file, read offline in headless Chromium.

The demo graph runs with the scripted agents (synthetic token counts, so the
cost section has figures), `codefleet commit` makes the branch, and
`codefleet report -o report.html` writes the page. Chromium opens it from
disk with every network request refused: the page must need none, show the
verdict, the veto, the rollback, the failed verify's output and the branch.
Set CODEFLEET_REPORT_PNG to a path to refresh docs/report.png from the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from playwright.async_api import Route, expect
from web_support import TOKEN, Browser, load_demo_graph, run_demo_fleet

from codefleet.server.thread import ServerThread

SCREENSHOT_COPY = "CODEFLEET_REPORT_PNG"


def codefleet(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def git_init(tree: Path) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=Demo", "-c", "user.email=demo@example.invalid", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True)


async def test_the_html_report_reads_offline_and_shows_the_run(
    demo_server: ServerThread, browser: Browser, tmp_path: Path
) -> None:
    git_init(demo_server.settings.workdir)
    await load_demo_graph(demo_server)
    assert (await run_demo_fleet(demo_server)).ok
    url = ["--server", demo_server.url, "--token", TOKEN]
    codefleet("commit", "--branch", "fleet/demo", "--author", "Demo <demo@example.invalid>", *url)
    page_file = tmp_path / "report.html"
    codefleet("report", "-o", str(page_file), *url)
    requests: list[str] = []

    async def refuse(route: Route) -> None:
        requests.append(route.request.url)
        await route.abort() if not route.request.url.startswith(
            "file:"
        ) else await route.continue_()

    await browser.context.route("**/*", refuse)
    page = await browser.open(page_file.as_uri())

    assert requests == [page_file.as_uri()]  # the file itself, nothing else
    await expect(page.locator("h1 .verdict")).to_have_text("PASS")
    await expect(page.locator("#vetoes tbody tr")).to_have_count(1)
    await expect(page.locator("#vetoes tbody tr")).to_contain_text("api.py")
    # T1's verify, T4's veto (its create_app edit put back, by part); T2's landing break is
    # repaired in its session, nothing rolled back
    rollbacks = page.locator("#rollbacks tbody tr")
    await expect(rollbacks).to_contain_text(["verify_failed", "veto"])
    await expect(page.locator("#repairs")).to_contain_text("1 of 2 repaired in the same session")
    # T1-a1 failed its verify twice: before and after its repair turn
    await expect(page.locator("#verify pre").first).to_contain_text("invalid tag 'DOCS'")
    await expect(page.locator("#tasks tbody tr")).to_have_count(5)
    await expect(page.locator("#graph")).to_contain_text("ideal on 3 runners")  # graph check's
    await expect(page.locator("#history")).to_contain_text("fleet/demo")
    await expect(page.locator("#timeline svg rect")).to_have_count(8)  # eight attempts
    await expect(page.locator("#cost dd").nth(1)).not_to_have_text("0 in · 0 out")
    assert browser.errors == []
    shot = tmp_path / "report.png"
    await page.set_viewport_size({"width": 1100, "height": 800})
    await page.screenshot(path=shot, full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get(SCREENSHOT_COPY):
        shutil.copyfile(shot, os.environ[SCREENSHOT_COPY])
