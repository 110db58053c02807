"""`codefleet doctor` against a running server: what a runner on this host needs from it.

When a server answers at the configured URL (`--server URL`), doctor asks it a
few times and judges, each as its own `Check`:

- **token**: the server accepts this host's token (a call that needs it; `/health`
  does not);
- **tree**: the server's tree identity is the one in this host's tree
  (`--workdir`), wherever that is mounted (docs/decisions/0130-a-tree-is-known-by-its-identity-not-its-path.md, "A tree is known
  by its identity, not its path");
- **clock**: the skew between the server's clock and this host's. The server's
  clock is the only one that counts (deadlines, stale runners, event times), so
  a skew only misleads a person reading local logs beside the server's: a
  warning past `SKEW_WARN_S`;
- **round trip**: the median of `PINGS` requests; every write waits one round
  trip for its lease, so past `RTT_WARN_S` it is a warning naming that cost;
- **landed line**: this host's git can fetch the server's landed line over the
  server's port with this host's token (a shallow `git fetch` of its tip into a
  scratch repository, git's own smart HTTP), as a runner in a clone or a person
  would. A warning for a runner in the shared tree, which does not need it; a
  failure with `--clone DIR` (a clone runner's host), where the **clone**
  directory is checked too: absent, empty, or this runner's clone of this tree.

The probe does the I/O once; the judging functions are pure (`Probe` in,
`Check` out).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient
from codefleet.cli.start.doctor_checks import Check
from codefleet.config import Settings
from codefleet.errors import Forbidden, Unauthorized
from codefleet.fleet.clone import LINE_PATH, dir_problem, git_env
from codefleet.models import clock_skew_s, utcnow
from codefleet.statedir import TreeClaim, read_tree_id, tree_mismatch

__all__ = [
    "PINGS",
    "RTT_WARN_S",
    "SKEW_WARN_S",
    "Probe",
    "judge_clock",
    "judge_line",
    "judge_round_trip",
    "judge_token",
    "judge_tree",
    "probe",
    "server_checks",
]

PINGS: Final = 5
SKEW_WARN_S: Final = 2.0
RTT_WARN_S: Final = 0.1
PROBE_TIMEOUT_S: Final = 5.0
FETCH_TIMEOUT_S: Final = 20.0


@dataclass(frozen=True, slots=True)
class Probe:
    """What the server said and how long it took: its health, whether the token was taken
    (else the server's `refusal`), each ping's round trip, and the clock skew (the server's
    time minus this host's at the middle of the fastest ping)."""

    url: str
    health: dict[str, Any]
    token_taken: bool
    refusal: str
    round_trips_s: tuple[float, ...]
    skew_s: float
    line: dict[str, Any] | None = None  # `GET /landed` (None: the token was refused)
    listed: tuple[int, str] = (0, "")  # `git ls-remote` of the line: exit code, what it said


async def probe(settings: Settings) -> Probe:
    """Ask the server at `settings.url`: health `PINGS` times, then one call needing the token."""
    async with FleetClient(settings.url, token=settings.token, timeout=PROBE_TIMEOUT_S) as client:
        await client.health()  # the connection (and its TLS handshake) is not a round trip
        pings = [await _ping(client) for _ in range(PINGS)]
        try:
            await client.checks()
            taken, refusal = True, ""
            line = await client.landed()
        except (Unauthorized, Forbidden) as err:
            taken, refusal, line = False, err.message, None
    listed = (0, "")
    if line is not None and line.get("started"):
        listed = await asyncio.to_thread(list_line, settings.url, settings.token)
    fastest = min(pings, key=lambda p: p[0])
    trips = tuple(p[0] for p in pings)
    return Probe(settings.url, fastest[2], taken, refusal, trips, fastest[1], line, listed)


def list_line(url: str, token: str | None) -> tuple[int, str]:
    """A shallow fetch of the landed line's tip at `url` into a scratch repository, as a
    clone runner's first fetch: exit code, and the tip (or what git said)."""
    git = shutil.which("git")
    if git is None:
        return 127, "git is not installed"
    env = git_env(token)
    with tempfile.TemporaryDirectory(prefix="codefleet-doctor-") as scratch:
        steps = (
            ["init", "--quiet", "--bare", scratch],
            ["-C", scratch, "fetch", "--quiet", "--depth=1", "--no-tags", f"{url}{LINE_PATH}",
             "+refs/heads/landed:refs/heads/landed"],
            ["-C", scratch, "rev-parse", "refs/heads/landed"],
        )  # fmt: skip
        for args in steps:
            try:
                done = subprocess.run(
                    [git, *args],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=FETCH_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return 124, f"no answer within {FETCH_TIMEOUT_S:.0f} s"
            if done.returncode != 0:
                return done.returncode, done.stderr.strip()
    return 0, done.stdout.strip()


async def _ping(client: FleetClient) -> tuple[float, float, dict[str, Any]]:
    """One health request: its round trip, the skew it shows, the answer."""
    started, sent = time.perf_counter(), utcnow()
    health = await client.health()
    trip, received = time.perf_counter() - started, utcnow()
    return trip, clock_skew_s(str(health["server_time"]), sent, received), health


def judge_token(found: Probe, has_token: bool) -> Check:
    if found.token_taken:
        said = "the server takes this host's token" if has_token else "the server needs no token"
        return Check("token", True, said)
    hint = "set CODEFLEET_TOKEN (or --token) to the server's token"
    if has_token:
        return Check(
            "token", False, f"the server refused this host's token ({found.refusal})", hint
        )
    return Check(
        "token", False, f"the server needs a token and none is set ({found.refusal})", hint
    )


def judge_tree(found: Probe, local_tree: Path) -> Check:
    """The server's tree identity against the one in `local_tree` (this host's mount)."""
    served = TreeClaim(str(found.health.get("workdir", "?")), found.health.get("tree_id"))
    if served.tree_id is None:
        return Check(
            "tree",
            False,
            f"the server at {found.url} does not say its tree's identity (an older CodeFleet)",
            required=False,
        )
    try:
        here = TreeClaim(str(local_tree), read_tree_id(local_tree))
    except Exception as err:  # NoTreeId or an unreadable mount: either way, no runner here
        return Check("tree", False, str(err), "pass --workdir: this host's mount of the tree")
    problem = tree_mismatch(here, served)
    if problem is not None:
        return Check("tree", False, problem)
    return Check(
        "tree", True, f"{local_tree} is the server's tree {served.workdir} ({served.tree_id})"
    )


def judge_clock(found: Probe) -> Check:
    skew = found.skew_s
    said = f"this host's clock is {abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} the server's"
    if abs(skew) <= SKEW_WARN_S:
        return Check("clock", True, said)
    return Check(
        "clock",
        False,
        said + " (only the server's clock counts: deadlines and "
        "stale runners are judged there; local logs will disagree with its times)",
        "synchronise this host's clock (NTP: chrony or systemd-timesyncd)",
        required=False,
    )


def judge_round_trip(found: Probe) -> Check:
    median = statistics.median(found.round_trips_s)
    said = f"median round trip {median * 1000:.1f} ms over {len(found.round_trips_s)} requests"
    if median <= RTT_WARN_S:
        return Check("round-trip", True, said)
    return Check(
        "round-trip",
        False,
        said + ": every write waits at least one round trip for its lease",
        "run runners closer to the server",
        required=False,
    )


def judge_line(found: Probe, needed: bool = False) -> Check:
    """Whether this host can fetch the server's landed line: a warning when it cannot,
    unless `needed` (a clone runner's host, `--clone`)."""
    line = found.line
    if line is None:
        return Check("landed line", False, "not asked: the token was refused", required=needed)
    if not line.get("started"):
        why = line.get("off") or "it has not started yet (a task held a lease)"
        return Check(
            "landed line", False, f"the server keeps no landed line: {why}", required=needed
        )
    code, said = found.listed
    if code == 0 and said:
        tip = said.split()[0][:12]
        return Check("landed line", True, f"this host's git can fetch the landed line (at {tip})")
    return Check(
        "landed line",
        False,
        f"this host's git cannot fetch {found.url}/git/landed.git: {said or f'exit {code}'}",
        "install git, and check the token and that the server's port is reachable from here",
        required=needed,
    )


def judge_clone(found: Probe, clone: Path) -> Check:
    """Whether `clone` can hold this runner's clone of the server's line."""
    tree_id = found.health.get("tree_id")
    if not tree_id:
        return Check("clone", False, f"the server at {found.url} does not say its tree's identity")
    problem = dir_problem(clone, str(tree_id))
    if problem is not None:
        return Check("clone", False, problem)
    state = "reused: this tree's clone" if (clone / ".git").is_dir() else "cloned there at start"
    return Check("clone", True, f"{clone}: {state} ({tree_id})")


def server_checks(settings: Settings, clone: Path | None = None) -> list[Check]:
    """The checks against the server at `settings.url` (which answered already); with
    `clone`, a clone runner's host: its clone directory instead of a mount of the tree."""
    try:
        found = asyncio.run(probe(settings))
    except Exception as err:  # the server stopped answering between two checks
        return [Check("server", False, f"{settings.url} stopped answering: {err}")]
    return [
        judge_token(found, bool(settings.token)),
        judge_clone(found, clone) if clone is not None else judge_tree(found, settings.workdir),
        judge_clock(found),
        judge_round_trip(found),
        judge_line(found, needed=clone is not None),
    ]
