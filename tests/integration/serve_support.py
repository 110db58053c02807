"""A `codefleet serve` subprocess in a test: wait until it answers, stop it (both bounded)."""

from __future__ import annotations

import contextlib
import signal
import subprocess

import httpx
import pytest

START_BOUND_S = 30.0


def wait_healthy(proc: subprocess.Popen[bytes], port: int) -> None:
    """Poll /health until it answers (bounded); the server process must stay up."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1.0) as http:
        for _ in range(int(START_BOUND_S / 0.05)):
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}")
            try:
                if http.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            # a bounded poll of a process we do not control: there is no event to wait on
            proc_wait(proc, 0.05)
    pytest.fail("the server never answered /health")


def proc_wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
