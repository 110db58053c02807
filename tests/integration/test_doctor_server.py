"""`codefleet doctor --server URL` on a runner's host (issue 33 item 3).

Against a real server it checks that the server takes this host's token, that
this host's tree is the server's by its identity (wherever it is mounted), the
clock skew against the server's clock and the round trip. The judging
functions are also read with literal measurements, where a real clock cannot
be set apart from the server's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.cli.start.doctor_server import (
    PINGS,
    RTT_WARN_S,
    SKEW_WARN_S,
    Probe,
    judge_clock,
    judge_line,
    judge_round_trip,
    judge_token,
)
from codefleet.server.thread import ServerThread
from codefleet.statedir import ensure_tree_id, read_tree_id, tree_id_path

TOKEN = "s3cret-doctor-token"
SERVER_CHECKS = ("token", "tree", "clock", "round-trip")


def doctor(server: ServerThread, tree: Path, *extra: str) -> tuple[int, dict[str, dict[str, Any]]]:
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
    argv = ["doctor", "--json", "--server", server.url, "--workdir", str(tree), *extra]
    result = CliRunner().invoke(app, argv, env=clean)  # type: ignore[arg-type]
    return result.exit_code, {c["name"]: c for c in json.loads(result.stdout)}


@pytest.fixture
def guarded(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(token=TOKEN)


def another_mount(workdir: Path, tmp_path: Path) -> Path:
    """The tree's identity at another path: what a second host's mount of the tree shows."""
    mount = tmp_path / "mnt" / "repo"
    tree_id_path(mount).parent.mkdir(parents=True)
    shutil.copy(tree_id_path(workdir), tree_id_path(mount))
    return mount


def test_doctor_on_a_runner_host_checks_token_tree_clock_and_round_trip(
    guarded: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    mount = another_mount(workdir, tmp_path)

    _, checks = doctor(guarded, mount, "--token", TOKEN)

    assert [n for n in checks if n in SERVER_CHECKS] == list(SERVER_CHECKS)
    assert checks["token"]["ok"] and checks["tree"]["ok"]
    assert read_tree_id(workdir) in checks["tree"]["detail"]
    assert checks["clock"]["ok"]  # one machine, one clock
    assert f"over {PINGS} requests" in checks["round-trip"]["detail"]


def test_doctor_fails_a_token_the_server_refuses_and_a_missing_one(
    guarded: ServerThread, workdir: Path
) -> None:
    wrong_code, wrong = doctor(guarded, workdir, "--token", "not-the-token")
    none_code, none = doctor(guarded, workdir)

    assert wrong_code == none_code == 1
    assert not wrong["token"]["ok"] and "refused this host's token" in wrong["token"]["detail"]
    assert not none["token"]["ok"] and "none is set" in none["token"]["detail"]
    assert "CODEFLEET_TOKEN" in none["token"]["hint"]


def test_doctor_fails_another_tree_naming_both_identities(
    server: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    other_id = ensure_tree_id(other)

    code, checks = doctor(server, other)

    assert code == 1
    assert not checks["tree"]["ok"]
    assert other_id in checks["tree"]["detail"]
    assert read_tree_id(workdir) in checks["tree"]["detail"]


def test_doctor_fails_a_tree_without_its_identity_naming_the_file(
    server: ServerThread, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()

    code, checks = doctor(server, bare)

    assert code == 1
    assert f"{tree_id_path(bare)} is missing" in checks["tree"]["detail"]


def probe_of(skew_s: float = 0.0, round_trips_s: tuple[float, ...] = (0.001,)) -> Probe:
    return Probe("https://fleet:8099", {}, True, "", round_trips_s, skew_s)


def test_a_skew_past_the_limit_is_a_warning_naming_which_clock_counts() -> None:
    behind = judge_clock(probe_of(skew_s=SKEW_WARN_S + 3))
    ahead = judge_clock(probe_of(skew_s=-(SKEW_WARN_S + 3)))
    close = judge_clock(probe_of(skew_s=SKEW_WARN_S / 2))

    assert (behind.ok, behind.required, ahead.ok, close.ok) == (False, False, False, True)
    assert "behind the server's" in behind.detail and "ahead of the server's" in ahead.detail
    assert "only the server's clock counts" in behind.detail


def test_the_round_trip_is_the_median_and_past_the_limit_a_warning() -> None:
    slow = judge_round_trip(probe_of(round_trips_s=(0.001, RTT_WARN_S * 3, RTT_WARN_S * 2)))
    fast = judge_round_trip(probe_of(round_trips_s=(0.002, 0.004, RTT_WARN_S * 9)))

    assert (slow.ok, slow.required) == (False, False)
    assert f"{RTT_WARN_S * 2 * 1000:.1f} ms" in slow.detail
    assert fast.ok and "4.0 ms" in fast.detail


def test_a_server_without_a_token_passes_the_token_check_saying_so() -> None:
    check = judge_token(probe_of(), has_token=False)

    assert check.ok and "needs no token" in check.detail


def test_doctor_says_whether_this_host_can_fetch_the_landed_line(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("A = 1\n")
    git_init = ["git", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run([*git_init, *args], check=True)
    subprocess.run(
        [
            *git_init,
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@example.invalid",
            "commit",
            "-qm",
            "a",
        ],
        check=True,
    )
    served = make_server(workdir=repo, token=TOKEN)
    plain = make_server()  # the default tree is no git repository: no line

    code, checks = doctor(served, repo, "--token", TOKEN)
    _, none = doctor(plain, workdir)

    assert code == 0 and checks["landed line"]["ok"], checks["landed line"]
    assert "can fetch the landed line (at " in checks["landed line"]["detail"]
    assert not none["landed line"]["ok"] and not none["landed line"]["required"]
    assert "keeps no landed line" in none["landed line"]["detail"]
    assert "not in a git repository" in none["landed line"]["detail"]


def test_doctor_on_a_clone_runners_host_checks_its_directory_and_fetches_the_line(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("A = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "a"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    served = make_server(workdir=repo, token=TOKEN)
    pod = tmp_path / "pod"  # absent: the runner clones there
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")

    code, checks = doctor(served, pod, "--token", TOKEN, "--clone", str(pod))
    busy_code, refused = doctor(served, busy, "--token", TOKEN, "--clone", str(busy))
    bad_code, untrusted = doctor(served, pod, "--token", "not-the-token", "--clone", str(pod))

    assert code == 0, checks
    assert "tree" not in checks and "workdir" not in checks  # a clone host has no tree mount
    assert checks["clone"]["ok"] and "cloned there at start" in checks["clone"]["detail"]
    assert checks["landed line"]["ok"] and checks["landed line"]["required"]
    assert not pod.exists()  # the check fetched into scratch space, not into the clone
    assert busy_code == 1 and not refused["clone"]["ok"]
    assert "give an absent or empty directory" in refused["clone"]["detail"]
    assert bad_code == 1 and not untrusted["landed line"]["ok"]
    assert untrusted["landed line"]["required"]


def test_a_line_this_host_cannot_fetch_is_a_warning_with_what_git_said() -> None:
    found = replace(
        probe_of(),
        line={"started": True, "off": None},
        listed=(128, "fatal: unable to access: The requested URL returned error: 401"),
    )

    check = judge_line(found)

    assert not check.ok and not check.required
    assert "returned error: 401" in check.detail and "token" in check.hint
