"""A module over the part bound is leased whole, even when leases are by part (issue 51).

Each grant, restore, patch and view by part parses the module on the server's loop; past
`parts.python.MAX_PART_BYTES` the module has no parts, so a write of it takes the whole file,
as under file leases, and the lease path stays bounded. Real server, real runners and
SQLite; only the agents' brains are scripted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.parts.python import MAX_PART_BYTES
from codefleet.testing.invariants import check, collect

PARTS = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "lease_granularity": "part",
}
BIG = '"""A module past the part bound."""\n' + "".join(
    f"\n\ndef func_{n}(x):\n    return x + {n}\n" for n in range(MAX_PART_BYTES // 30)
)


def edit(old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"edit": {"path": "big.py", "old": old, "new": new}, **more}


async def test_two_tasks_editing_different_functions_of_a_module_past_the_bound_take_it_whole(
    make_server: Any, workdir: Path
) -> None:
    assert len(BIG.encode()) > MAX_PART_BYTES
    (workdir / "big.py").write_text(BIG)
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return x + 1\n", "return x + 11\n"), {"wait_denied": "big.py"}],
        "T2": [
            {"wait_leased": "big.py", "attempt": 1},
            edit("return x + 2\n", "return x + 22\n"),
        ],
    }
    specs = [{"id": t, "title": f"edit big.py ({t})", "description": "d"} for t in script]
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    runner = RunnerOptions("runner", workdir, workdir.parent / "runs")
    async with FleetClient(server.url) as client:
        await client.create_tasks(specs)
        result = await run_fleet(server.url, lambda _: executor, FleetOptions(runner, runners=2))
        events = await client.all_events()
        assert check(await collect(client)) == []

    granted = {
        (e["task_id"], e["payload"]["path"]) for e in events if e["type"] == "lease_acquired"
    }
    assert granted == {("T1", "big.py"), ("T2", "big.py")}  # the file, never a part of it
    assert result.all_succeeded, result.tasks
    (denied,) = [e for e in events if e["type"] == "lease_denied"]
    assert denied["task_id"] == "T2" and denied["payload"]["path"] == "big.py"
    assert (workdir / "big.py").read_text() == BIG.replace(
        "return x + 1\n", "return x + 11\n"
    ).replace("return x + 2\n", "return x + 22\n")
