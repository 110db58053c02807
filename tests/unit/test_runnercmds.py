"""`codefleet runners`' rows: where each runner works, its clone's head, offline ones folded."""

from __future__ import annotations

from typing import Any

from codefleet.cli.operate.runnercmds import runner_rows

HEAD = "3f2a9c1d7e" + "0" * 30


def runner(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "runner", "status": "idle", **fields}


AGENTS = [
    runner("runner-1", workspace="tree", workdir="/srv/tree", host="laptop", pid=41),
    runner("pod-2", workspace="clone", workdir="/work/clone", host="pod-2", head=HEAD,
           status="busy", current_task_id="T3", tasks_succeeded=2, tasks_failed=1),
    runner("pod-3", workspace="clone", workdir="/work/clone", status="offline"),
    runner("pod-4", workspace="clone", workdir="/work/clone", stale=True),  # no beat since its reset
    {"name": "ada@0aeef531", "kind": "interactive", "status": "busy"},
]  # fmt: skip


def test_each_runner_says_where_it_works_and_a_clone_its_landed_head() -> None:
    rows, folded = runner_rows(AGENTS)
    by_name = {row[0]: row for row in rows}
    assert folded == 1 and "pod-3" not in by_name
    assert by_name["runner-1"] == (
        "runner-1", "idle", "claude", "tree /srv/tree", "laptop pid 41", "", "", "0 ok, 0 failed",
    )  # fmt: skip
    assert by_name["pod-2"][3:8] == (
        "clone /work/clone",
        "pod-2",
        HEAD[:12],
        "T3",
        "2 ok, 1 failed",
    )
    assert by_name["pod-4"][1] == "stale" and by_name["pod-4"][5] == "-"
    assert by_name["ada@0aeef531"][2:4] == ("person", "tree")


def test_all_lists_the_offline_runners_too() -> None:
    rows, folded = runner_rows(AGENTS, every=True)
    assert folded == 0
    assert [row[0] for row in rows][:4] == ["runner-1", "pod-2", "pod-3", "pod-4"]
