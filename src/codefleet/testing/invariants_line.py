"""The landed line's oracle: its tip is the server's tree, its commits the landings in order.

When the server's tree is a git repository the server keeps the landed line
(`review.landedline`): one commit per landed task, in `task_succeeded` order,
each naming its task in a `CodeFleet-Task` trailer, served over the server's
port. `collect_line` waits until the line has followed the log to its last
`task_succeeded`, then clones it exactly as a clone runner does (git's smart
HTTP, the token in the environment, never in argv); `check_line` proves:

- `line_order`: the trailers are the `task_succeeded` order, each task once (a
  task whose patch is empty has no commit);
- `line_tree`: the tip, checked out, holds exactly the server's final tree
  (git's `.git/` and CodeFleet's `.codefleet/` aside).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.api.client import FleetClient
from codefleet.models import EventType
from codefleet.testing.invariants import Evidence, Violation, compare_trees

__all__ = ["Line", "check_line", "collect_line"]

TRAILER: Final = "CodeFleet-Task"  # the line's commits name their task so (`review.commit`)
BRANCH: Final = "landed"
POLL_S: Final = 0.1
SAID_OF_THE_LINE: Final = {  # `compare_trees` speaks of patches; here the line is expected
    "is missing from the final tree": "is on the line's tip but not in the server's tree",
    "is in the final tree but no patch made it": "is in the server's tree but not on the line",
    "differs from its patches replayed in order": "differs between the line's tip and the tree",
}


@dataclass(frozen=True, slots=True)
class Line:
    """The line as a fresh clone sees it: its tasks oldest first, its tip checked out."""

    checkout: Path
    tasks: list[str]


async def collect_line(
    client: FleetClient, evidence: Evidence, into: Path, timeout: float = 60.0
) -> Line | Violation:
    """The line cloned into `into` once it has followed the log past the last landing; a
    `Violation` (rule `line_lag`) when it has no line, or does not get there in time."""
    succeeded = [e["id"] for e in evidence.events if e["type"] == EventType.TASK_SUCCEEDED]
    last = max(succeeded, default=0)
    deadline = time.monotonic() + timeout
    while True:
        state = await client.landed()
        if state.get("started") and int(state.get("cursor") or 0) >= last:
            break
        if time.monotonic() > deadline:
            why = state.get("off") or state.get("problem") or f"cursor {state.get('cursor')}"
            return Violation("line_lag", f"the line did not follow the log to event {last}: {why}")
        await asyncio.sleep(POLL_S)
    url = f"{client.base_url.rstrip('/')}{state['path']}"
    return await asyncio.to_thread(_clone, url, client.token, into)


def _clone(url: str, token: str | None, into: Path) -> Line | Violation:
    shutil.rmtree(into, ignore_errors=True)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    if token:
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {token}",
        }
    cloned = subprocess.run(
        ["git", "clone", "--quiet", "--branch", BRANCH, url, str(into)],
        capture_output=True,
        env=env,
        check=False,
    )
    if cloned.returncode != 0:
        why = cloned.stderr.decode(errors="replace").strip()[-500:]
        return Violation("line_lag", f"the line could not be cloned: {why}")
    log = subprocess.run(
        ["git", "log", "--reverse", f"--format=%(trailers:key={TRAILER},valueonly)"],
        cwd=into,
        capture_output=True,
        env=env,
        check=True,
    )
    tasks = [line.strip() for line in log.stdout.decode().splitlines() if line.strip()]
    return Line(into, tasks)


def check_line(line: Line, evidence: Evidence, tree: Path) -> list[Violation]:
    """Every way the line differs from the log's landings and from the final `tree`."""
    found = [
        Violation("line_order", f"{task_id} is on the line {count} times", task_id=task_id)
        for task_id, count in sorted(Counter(line.tasks).items())
        if count > 1
    ]
    expected = [t for t in dict.fromkeys(evidence.completion_order()) if evidence.patches.get(t)]
    if list(dict.fromkeys(line.tasks)) != expected:
        found.append(Violation("line_order", _order_differs(list(line.tasks), expected)))
    for differs in compare_trees(line.checkout, tree):
        path, _, said = differs.message.partition(" ")
        found.append(Violation("line_tree", f"{path} {SAID_OF_THE_LINE.get(said, said)}"))
    return found


def _order_differs(on_line: Sequence[str], expected: Sequence[str]) -> str:
    """Where the line's tasks first part from the landing order, in one line."""
    at = next(
        (n for n, pair in enumerate(zip(on_line, expected, strict=False)) if pair[0] != pair[1]),
        min(len(on_line), len(expected)),
    )
    seen = list(on_line[at : at + 3])
    wanted = list(expected[at : at + 3])
    return (
        f"the line holds {len(on_line)} tasks, the log landed {len(expected)}; from position "
        f"{at + 1} the line has {seen}, the landing order {wanted}"
    )
