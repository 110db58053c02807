"""One Ctrl-C stops `codefleet run --offline … | tee log` while a real Claude Code session works.

The bundled Claude Code CLI runs against CodeFleet's scripted model; the session writes
a.py (through the real hook and lease), then the model takes two minutes over its next
turn. The terminal's Ctrl-C reaches the whole pipeline, `tee` included. Before the fix
the run outlived it, waiting for a second Ctrl-C, and exited 1; now it stops as it does
on a terminal: exit 130, the attempt rolled back, no session left behind.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import yaml
from pipe_support import pipeline_exit_code, start_piped_cli

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

THINKS_S = 120  # the model's second turn: long past the bound on the run's exit
TASK = {"id": "T1", "title": "Edit a", "description": "Change A to 2 in a.py.", "max_attempts": 1}


async def test_one_ctrl_c_stops_a_piped_offline_run_mid_session_and_rolls_it_back(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: object
) -> None:
    model = tmp_path / "model.yaml"
    write = {"tool_use": {"name": "Write", "input": {"file_path": "a.py", "content": "A = 2\n"}}}
    turns = [{"content": [write]}, {"delay_s": THINKS_S, "content": [{"text": "done"}]}]
    model.write_text(yaml.safe_dump({"T1": turns}))
    server = make_server(workdir=workdir, run_dir=tmp_path / "runs", stale_after=3600.0)
    clean = {k: None for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    async with FleetClient(server.url) as client:
        await client.create_tasks([TASK])
        tee, proc = await start_piped_cli(
            "run",
            "--no-graph",
            "--offline",
            "--model-script",
            str(model),
            "--runners",
            "1",
            "--server",
            server.url,
            "--run-dir",
            str(tmp_path / "runs"),
            cwd=workdir,
            log=tmp_path / "log",
            env={**clean, "HOME": str(tmp_path / "home")},
        )
        await wait_until(lambda: (workdir / "a.py").read_text() == "A = 2\n", timeout=60)

        os.killpg(tee.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole foreground group

        code = await pipeline_exit_code(proc, tee)
        said = (await proc.stderr.read()).decode() if proc.stderr else ""
        task = await client.task("T1")
    assert code == 128 + signal.SIGINT.value, said
    assert "run: interrupted (SIGINT)" in " ".join(said.split())
    assert "Traceback" not in said
    assert (workdir / "a.py").read_text() == "A = 1\n"  # the attempt was rolled back
    assert task["status"] == "pending"  # handed back, not charged: its one attempt is still to come
