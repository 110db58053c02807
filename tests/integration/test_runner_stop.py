"""Stop means stop: a `codefleet runner` process obeys SIGTERM and SIGINT in every phase.

Real processes and real signals: a runner started while no server answers
(retrying its registration), and a runner in the middle of an attempt. Each
waits for a line the runner prints in that phase, then signals it; the
process must exit cleanly, and a runner stopped mid-attempt leaves, so the
server takes the task back at once instead of after the stale window.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pipe_support import pipeline_exit_code, start_piped_cli

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.server.thread import ServerThread, free_port

EXIT_WAIT_S = 20.0  # a bound on a hang, not a speed claim: a stopped runner exits in well under 1 s
LINE_WAIT_S = 30.0


async def start_runner(*args: str, tmp_path: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    if "--script" not in args:  # scripted agents that play no step
        (tmp_path / "no-steps.yaml").write_text("{}\n")
        args = ("--script", str(tmp_path / "no-steps.yaml"), *args)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codefleet.cli",
        "runner",
        "--dry-run",
        "--run-dir",
        str(tmp_path / "runs"),
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def wait_for_line(proc: asyncio.subprocess.Process, needle: str) -> str:
    """Read the runner's stderr until a line contains `needle` (bounded)."""
    assert proc.stderr is not None

    async def scan() -> str:
        assert proc.stderr is not None
        while line := (await proc.stderr.readline()).decode():
            if needle in line:
                return line
        raise AssertionError(f"the runner exited without saying {needle!r}")

    return await asyncio.wait_for(scan(), LINE_WAIT_S)


async def exit_code(proc: asyncio.subprocess.Process) -> int:
    try:
        return await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"the runner ignored the signal for {EXIT_WAIT_S} s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_runner_retrying_an_absent_server_stops_on_a_signal(
    sig: signal.Signals, workdir: Path, tmp_path: Path
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    proc = await start_runner(
        "--name", "patient", "--server", nobody, "--workdir", str(workdir), tmp_path=tmp_path
    )

    await wait_for_line(proc, "retrying in")  # waiting for the server, to register
    proc.send_signal(sig)

    assert await exit_code(proc) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_runner_stopped_in_the_middle_of_an_attempt_leaves_and_the_attempt_is_not_charged(
    sig: signal.Signals,
    make_server: Callable[..., ServerThread],
    workdir: Path,
    tmp_path: Path,
    wait_until: Any,
) -> None:
    server = make_server(stale_after=3600.0)
    script = long_script(tmp_path)
    async with FleetClient(server.url) as client:
        await client.create_tasks([LONG_TASK])
        proc = await start_runner(
            "--name",
            "busy",
            "--server",
            server.url,
            "--workdir",
            str(workdir),
            "--script",
            str(script),
            tmp_path=tmp_path,
        )
        await wait_until(lambda: _leased(client, "a.py"), timeout=LINE_WAIT_S)

        proc.send_signal(sig)

        assert await exit_code(proc) == 0
        [agent] = await client.agents()
        await assert_handed_back_uncharged(client, workdir)
    assert agent["status"] == "offline"
    assert (workdir / "a.py").read_text() == "A = 1\n"  # the attempt's edit was rolled back


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_run_stopped_in_the_middle_of_an_attempt_leaves_and_the_attempt_is_not_charged(
    sig: signal.Signals,
    make_server: Callable[..., ServerThread],
    workdir: Path,
    tmp_path: Path,
    wait_until: Any,
) -> None:
    server = make_server(stale_after=3600.0)
    script = long_script(tmp_path)
    async with FleetClient(server.url) as client:
        await client.create_tasks([LONG_TASK])
        proc = await start_cli(
            "run",
            "--no-graph",
            "-n",
            "2",
            "--dry-run",
            "--script",
            str(script),
            "--server",
            server.url,
            "--run-dir",
            str(tmp_path / "runs"),
            cwd=workdir,
        )
        await wait_until(lambda: _leased(client, "a.py"), timeout=LINE_WAIT_S)

        proc.send_signal(sig)

        assert await exit_code(proc) == 128 + sig.value
        said = (await proc.stderr.read()).decode() if proc.stderr else ""
        agents = await client.agents()
        await assert_handed_back_uncharged(client, workdir)
    assert f"run: interrupted ({sig.name})" in " ".join(said.split())
    assert [a["status"] for a in agents] == ["offline", "offline"]  # both runners left
    assert (workdir / "a.py").read_text() == "A = 1\n"


@pytest.mark.parametrize(
    ("reader", "flags"),
    [("stopped_by_the_same_ctrl_c", ()), ("gone_before", ()), ("gone_before", ("--json",))],
    ids=["reader_stopped_too", "reader_gone", "reader_gone_json"],
)
async def test_a_run_piped_into_a_reader_stops_on_one_ctrl_c_as_it_does_on_a_terminal(
    reader: str,
    flags: tuple[str, ...],
    make_server: Callable[..., ServerThread],
    workdir: Path,
    tmp_path: Path,
    wait_until: Any,
) -> None:
    """`codefleet run … | tee log`, Ctrl-C: the terminal signals the whole pipeline, so `tee`
    dies with the run's first Ctrl-C and the run's next line meets a broken pipe (or the
    reader was gone before). The run stops as on a terminal: 130, rolled back, said."""
    server = make_server(stale_after=3600.0)
    async with FleetClient(server.url) as client:
        await client.create_tasks([LONG_TASK])
        tee, proc = await start_piped_cli(
            "run",
            "--no-graph",
            "--dry-run",
            *flags,
            "--script",
            str(long_script(tmp_path)),
            "--server",
            server.url,
            "--run-dir",
            str(tmp_path / "runs"),
            cwd=workdir,
            log=tmp_path / "log",
        )
        await wait_until(lambda: _leased(client, "a.py"), timeout=LINE_WAIT_S)
        if reader == "gone_before":
            tee.kill()
            await tee.wait()

        os.killpg(tee.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole foreground group

        code = await pipeline_exit_code(proc, tee)
        said = (await proc.stderr.read()).decode() if proc.stderr else ""
        await assert_handed_back_uncharged(client, workdir)
    assert code == 128 + signal.SIGINT.value, said
    assert "run: interrupted (SIGINT)" in " ".join(said.split())
    assert "Traceback" not in said
    assert (workdir / "a.py").read_text() == "A = 1\n"
    if not flags:  # the live log did go through the pipe
        assert "long: attempt 1" in (tmp_path / "log").read_text()


async def test_a_run_waits_for_a_server_that_went_away_and_carries_on_when_it_is_back(
    workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    settings = Settings(
        _env_file=None,
        host="127.0.0.1",
        port=free_port(),
        db=tmp_path / "db",
        workdir=workdir,
        run_dir=tmp_path / "runs",
        tick_interval=0.05,
        backoff_base=0.0,
        stale_after=3600.0,
    )  # type: ignore[call-arg]
    first = ServerThread(settings).start()
    async with FleetClient(first.url) as client:
        await client.create_tasks([LONG_TASK])
        proc = await start_cli(
            "run",
            "--no-graph",
            "--dry-run",
            "--script",
            str(long_script(tmp_path)),
            "--server",
            first.url,
            "--run-dir",
            str(tmp_path / "runs"),
            cwd=workdir,
        )
        await wait_until(lambda: _leased(client, "a.py"), timeout=LINE_WAIT_S)

        first.stop()
        waiting = await wait_for_line(proc, "does not answer")
        with ServerThread(settings):
            await client.cancel("long")  # the run can now drain: it must see that, and say so
            assert await exit_code(proc) == 1
        rest = (await proc.stderr.read()).decode() if proc.stderr else ""
    assert "waiting up to 120 s for it to come back" in waiting
    assert "answers again" in rest
    assert "no CodeFleet server answers" not in rest


LONG_TASK = {"id": "long", "title": "a long attempt", "description": "work long", "max_attempts": 1}


def long_script(tmp_path: Path) -> Path:
    """The `long` task writes a.py, then works for an hour (until it is stopped)."""
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump({"long": [{"write": {"path": "a.py", "content": "X\n"}}, {"sleep": 3600}]})
    )
    return script


async def start_cli(*args: str, cwd: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codefleet.cli",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
    )


async def assert_handed_back_uncharged(client: FleetClient, tree: Path) -> None:
    """`long` (max_attempts 1) is pending again, the requeue says the operator's interrupt
    ended it, and its one attempt is still to come: the next runner gets it."""
    task = await client.task("long")
    requeued = [e["payload"] for e in await client.events(0) if e["type"] == "task_requeued"]
    assert task["status"] == "pending"  # taken back by the leave, not by a stale window
    assert requeued[0]["reason"] == "interrupted"
    assert all(r["charged"] is False for r in requeued), requeued  # (another runner, stopping
    # too, may have been handed it meanwhile: never started, that is not charged either)
    joined = await client.register("next", str(tree), os.getpid())
    handed = await client.assignment(joined["agent_id"], joined["epoch"], wait=LINE_WAIT_S)
    assert handed is not None and handed.id == "long"  # not failed as out of attempts


async def _leased(client: FleetClient, path: str) -> bool:
    return any(lease["path"] == path for lease in await client.leases())
