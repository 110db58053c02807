"""`run --verify`: the operator's command runs like a check (one shell runner for both).

Real processes in `tmp_path`; the assertions are about which processes are
left, not about how long anything took.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from codefleet.fleet.local import run_verify


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone(pid: int) -> bool:
    for _ in range(200):  # SIGKILL is asynchronous: wait (bounded) for the kernel to act
        if not _alive(pid):
            return True
        time.sleep(0.01)
    return False


async def test_a_verify_past_its_time_limit_leaves_no_process_of_its_group_behind(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = f"sh -c 'echo $$ > {pid_file}; exec sleep 60' & sleep 60"

    result = await run_verify(command, tmp_path, timeout=0.5)

    assert not result.ok and result.exit_code == -1
    assert "timed out after" in result.output
    assert _gone(int(pid_file.read_text()))


async def test_a_background_child_does_not_outlive_a_finished_verify(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"

    verify = run_verify(f"sleep 600 & echo $! > {pid_file}; echo fine", tmp_path)
    result = await asyncio.wait_for(verify, timeout=60)  # a liveness bound: not the child's 600 s

    assert (result.exit_code, result.output.strip()) == (0, "fine")
    assert _gone(int(pid_file.read_text()))


async def test_a_verify_runs_in_the_tree_without_codefleets_secrets(tmp_path: Path) -> None:
    os.environ["CODEFLEET_TOKEN"] = "do-not-leak"
    try:
        result = await run_verify("pwd; env; exit 4", tmp_path)
    finally:
        del os.environ["CODEFLEET_TOKEN"]

    assert result.exit_code == 4 and not result.ok
    assert result.output.splitlines()[0] == str(tmp_path)
    assert "do-not-leak" not in result.output


async def test_a_verify_whose_program_is_missing_says_which_and_what_to_do(tmp_path: Path) -> None:
    missing = await run_verify("true && flake9-is-not-installed .", tmp_path)
    deeper = await run_verify("sh -c 'flake9-is-not-installed'", tmp_path)
    fine = await run_verify("exit 3", tmp_path)

    assert missing.exit_code == 127
    assert missing.cannot_start() == (
        "could not start: flake9-is-not-installed was not found where checks run. Install "
        "flake9-is-not-installed where checks run, or fix the --verify command; it is not the "
        "agents' work that failed."
    )
    assert (deeper.cannot_start() or "").startswith(
        "could not start: a program it names was not found where checks run. Install the program"
    )
    assert fine.cannot_start() is None
