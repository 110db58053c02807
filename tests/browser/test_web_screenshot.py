"""The README's screenshot command: `--virtual-time-budget` lets the page read the stream.

Chromium's own command line (no Playwright) dumps the page of a finished run
with the README's flags; the page it renders is connected and shows the run,
not "Connecting…".
"""

from __future__ import annotations

import subprocess

from web_support import CHROMIUM_ARGS, TOKEN, require_chromium

from codefleet.client import FleetClient
from codefleet.fleet import run_fleet
from codefleet.scripted import ScriptedExecutor, parse_script
from codefleet.serverthread import ServerThread


async def test_the_readmes_screenshot_flags_show_the_finished_run(
    demo_server: ServerThread,
) -> None:
    async with FleetClient(demo_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "one", "title": "One change", "description": "do it"}])
    settings = demo_server.settings
    executor = ScriptedExecutor(
        parse_script({"one": [{"write": {"path": "x.txt", "content": "x"}}]})
    )
    assert (
        await run_fleet(
            demo_server.url, 1, lambda _: executor, settings.workdir, settings.run_dir, token=TOKEN
        )
    ).ok

    dumped = subprocess.run(
        [str(require_chromium()), *CHROMIUM_ARGS, "--hide-scrollbars", "--window-size=1280,2400",
         "--virtual-time-budget=5000", "--dump-dom", f"{demo_server.url}/?token={TOKEN}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert 'data-conn="live"' in dumped.stdout and 'data-run="finished"' in dumped.stdout
    assert "Connecting…" not in dumped.stdout
    assert 'data-node="one"' in dumped.stdout
