"""Leases on parts of a file: two tasks in one module, each putting back only its own parts.

The engine over a real SQLite file and a real scratch tree, with an injected clock
and no event loop; each "agent" writes the file as its tool would, after its lease.
A part key is `path::name` (`toolcalls.leasekeys`); which parts a write changes is
the gate's question (`toolcalls.writeparts`), so here the keys are asked for as
the gate would ask for them.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from codefleet.attempt import AttemptReport
from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.policy.writelatch import WRITE_LATCH_S
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.validation import NewTask
from codefleet.models import DenyReason, EventType, TaskStatus
from codefleet.paths import TreeRoot

T0 = datetime(2026, 12, 2, 18, 0, 0, tzinfo=UTC)

API = '''"""The API."""

import os


def handle(request):
    return 1


def route(path):
    return path


class Router:
    pass
'''


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Fleet:
    """An engine, a tree holding `api.py`, and one registered runner per task it starts."""

    def __init__(self, db: Path, tree: Path) -> None:
        self.db, self.tree, self.clock = db, tree, Clock()
        self.engine = self.open()
        self.runners: dict[str, tuple[str, int]] = {}  # task -> its runner (agent id, epoch)
        self.epochs: dict[str, int] = {}  # every registered runner's epoch

    def open(self) -> Engine:
        root = TreeRoot(self.tree, protected=[self.db])
        return Engine(Store(self.db), root, EngineConfig(stale_after=20.0), clock=self.clock)

    def restart(self) -> Engine:
        self.engine.store.close()
        self.engine = self.open()
        return self.engine

    def start(self, *task_ids: str) -> None:
        """Create the tasks (no declared scope: run side by side) and start each on a runner."""
        self.engine.operator.create_tasks(
            [NewTask(t, id=t, description=f"edit api.py for {t}") for t in task_ids]
        )
        epochs = self.epochs
        for n in range(len(self.runners) + 1, len(self.runners) + len(task_ids) + 1):
            answer = self.engine.arrivals.register(f"runner-{n}", str(self.tree), 4242)
            epochs[str(answer.agent_id)] = int(answer.epoch)
        self.engine.ticks.tick()
        for task_id in task_ids:
            agent = str(self.engine.store.task(task_id)["assigned_agent_id"])  # type: ignore[index]
            self.runners[task_id] = (agent, epochs[agent])
            self.engine.runner.start(task_id, agent, epochs[agent])

    def acquire(self, task_id: str, *keys: str, tool: str = "Edit") -> Any:
        agent, epoch = self.runners[task_id]
        return self.engine.runner.acquire(agent, epoch, task_id, list(keys), tool)

    def edit(self, task_id: str, old: str, new: str, *keys: str) -> None:
        """Lease `keys` (it must be granted), make the edit on the file as it is now, record it."""
        assert self.acquire(task_id, *keys).allowed
        text = self.api.read_text()
        assert old in text, (old, text)
        self.api.write_text(text.replace(old, new, 1))
        self.record(task_id)

    def record(self, task_id: str, tool: str = "Edit", path: str = "api.py") -> None:
        """The write's PostToolUse: the change ledger's row, which ends the write moment."""
        agent, epoch = self.runners[task_id]
        self.engine.runner.record_change(agent, epoch, task_id, path, tool)

    def finish(self, task_id: str, ok: bool) -> None:
        agent, epoch = self.runners[task_id]
        report = AttemptReport(attempt=1, ok=ok, error=None if ok else "the attempt failed")
        self.engine.outcomes.complete(task_id, agent, epoch, report)
        self.engine.restores.finish_due()

    @property
    def api(self) -> Path:
        return self.tree / "api.py"

    def held(self) -> dict[str, str]:
        return {str(r["path"]): str(r["task_id"]) for r in self.engine.store.leases()}

    def events(self, kind: EventType) -> list[dict[str, Any]]:
        return self.engine.store.events(0, 100_000, kind.value)


@pytest.fixture
def fleet(tmp_path: Path, workdir: Path) -> Iterator[Fleet]:
    (workdir / "api.py").write_text(API)
    made = Fleet(tmp_path / "fleet.sqlite", workdir)
    yield made
    made.engine.store.close()


def test_two_tasks_hold_different_parts_of_one_file_and_a_third_is_refused_naming_the_part(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2", "T3")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")

    refused = fleet.acquire("T3", "api.py::handle")

    assert not refused.allowed
    (denied,) = refused.denied
    assert denied.path == "api.py::handle" and denied.reason is DenyReason.HELD
    assert denied.holder_task_id == "T1"
    assert denied.message == f"api.py::handle is held by {denied.holder_agent_name} for task T1"
    assert fleet.held() == {"api.py::handle": "T1", "api.py::route": "T2"}
    (event,) = fleet.events(EventType.LEASE_DENIED)
    assert event["payload"]["path"] == "api.py::handle"
    assert event["payload"]["holder_task_id"] == "T1"


def test_a_whole_file_refused_by_several_parts_of_one_holder_is_one_veto_per_holder(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2", "T3")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle", "api.py::<import os>")
    fleet.edit("T2", "    pass\n", "    x = 1\n", "api.py::Router")

    refused = fleet.acquire("T3", "api.py")  # a write the gate could not map: the whole file

    assert not refused.allowed
    assert [(d.path, d.holder_task_id) for d in refused.denied] == [
        ("api.py::<import os>", "T1"),
        ("api.py::Router", "T2"),
    ]
    assert len(fleet.events(EventType.LEASE_DENIED)) == 2  # not one per held part


def test_while_a_task_writes_its_part_another_tasks_parts_of_the_file_are_busy(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed  # T1's tool now reads and writes

    refused = fleet.acquire("T2", "api.py::route")

    assert not refused.allowed
    (denied,) = refused.denied
    assert denied.path == "api.py" and denied.reason is DenyReason.BUSY
    assert "being written by task T1" in denied.message
    assert fleet.held() == {"api.py::handle": "T1"}  # busy takes nothing
    fleet.record("T1")  # the write landed
    assert fleet.acquire("T2", "api.py::route").allowed
    assert fleet.held() == {"api.py::handle": "T1", "api.py::route": "T2"}


def test_a_whole_file_asked_for_while_another_task_writes_a_part_is_busy_not_a_veto(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed  # T1's tool is writing the file
    # T2's gate read the file half written, could not parse it, and asks for all of it

    first = fleet.acquire("T2", "api.py")

    assert [(d.path, d.reason) for d in first.denied] == [("api.py", DenyReason.BUSY)]
    assert fleet.events(EventType.LEASE_DENIED) == []  # no veto: the gate asks again
    fleet.record("T1")
    assert fleet.acquire("T2", "api.py::route").allowed  # mapped again on the written file


def test_a_write_that_is_never_recorded_frees_the_file_after_the_latch(fleet: Fleet) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed  # its tool failed: no PostToolUse
    assert fleet.acquire("T2", "api.py::route").denied[0].reason is DenyReason.BUSY

    fleet.clock.advance(WRITE_LATCH_S + 0.1)

    assert fleet.acquire("T2", "api.py::route").allowed


def test_the_write_moment_does_not_hold_back_the_writer_itself_or_other_files(
    fleet: Fleet, workdir: Path
) -> None:
    (workdir / "other.py").write_text("def f():\n    return 1\n")
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed
    assert fleet.acquire("T1", "api.py::route").allowed  # its own next part
    assert fleet.acquire("T2", "other.py::f").allowed  # another file


def test_a_whole_file_and_any_part_of_it_exclude_each_other(fleet: Fleet) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed
    fleet.record("T1")  # its write is in: the file is no longer being written

    whole = fleet.acquire("T2", "api.py")
    assert not whole.allowed and [d.path for d in whole.denied] == ["api.py::handle"]

    fleet.finish("T1", ok=True)
    assert fleet.acquire("T2", "api.py").allowed
    assert fleet.held() == {"api.py": "T2"}
    fleet.start("T3")
    assert [d.path for d in fleet.acquire("T3", "api.py::route").denied] == ["api.py"]


def test_a_part_of_a_file_the_task_holds_whole_is_already_its_own(fleet: Fleet) -> None:
    fleet.start("T1")
    assert fleet.acquire("T1", "api.py").allowed
    assert fleet.acquire("T1", "api.py::handle").allowed
    assert fleet.held() == {"api.py": "T1"}


def test_all_or_nothing_holds_across_parts(fleet: Fleet) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::route").allowed
    assert not fleet.acquire("T2", "api.py::handle", "api.py::route").allowed
    assert fleet.held() == {"api.py::route": "T1"}


@pytest.mark.parametrize("failing", ["T1", "T2"], ids=["the-earlier", "the-later"])
def test_of_two_concurrent_editors_the_one_that_fails_puts_back_only_its_part(
    fleet: Fleet, failing: str
) -> None:
    # the earlier editor's pre-image predates the later one's change: a whole-file
    # restore of it would erase that change too
    changes = {"T1": ("return 1", "return 'one'"), "T2": ("return path", "return path.upper()")}
    fleet.start("T1", "T2")
    fleet.edit("T1", *changes["T1"], "api.py::handle")
    fleet.edit("T2", *changes["T2"], "api.py::route")

    fleet.finish(failing, ok=False)

    (stays,) = set(changes) - {failing}
    assert fleet.api.read_text() == API.replace(*changes[stays])
    assert fleet.held() == {"T1": {"api.py::route": "T2"}, "T2": {"api.py::handle": "T1"}}[failing]
    (restored,) = fleet.events(EventType.FILE_RESTORED)
    assert restored["payload"]["path"] == "api.py" and restored["task_id"] == failing
    assert fleet.engine.store.task(failing)["status"] == TaskStatus.PENDING  # type: ignore[index]


def test_a_failed_attempt_removes_the_part_it_added_and_keeps_the_others_addition(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "class Router:", "def added_by_t1():\n    pass\n\n\nclass Router:",
               "api.py::added_by_t1")  # fmt: skip
    fleet.edit("T2", "\n\ndef route(", "\n\ndef added_by_t2():\n    pass\n\n\ndef route(",
               "api.py::added_by_t2")  # fmt: skip

    fleet.finish("T1", ok=False)

    text = fleet.api.read_text()
    assert "added_by_t1" not in text and "def added_by_t2():" in text
    assert text == API.replace("\n\ndef route(", "\n\ndef added_by_t2():\n    pass\n\n\ndef route(")


def test_two_tasks_each_add_an_import_at_once_and_a_failed_one_removes_only_its_own(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "import os\n", "import os\nimport re\n", "api.py::<import re>")
    fleet.edit("T2", "import os\n", "import os\nimport sys\n", "api.py::<import sys>")
    assert fleet.held() == {"api.py::<import re>": "T1", "api.py::<import sys>": "T2"}

    fleet.finish("T1", ok=False)

    assert fleet.api.read_text() == API.replace("import os\n", "import os\nimport sys\n")


def test_two_tasks_adding_imports_land_patches_that_leave_both_imports(
    fleet: Fleet, tmp_path: Path
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "import os\n", "import os\nimport re\n", "api.py::<import re>")
    fleet.edit("T2", "import os\n", "import os\nimport sys\n", "api.py::<import sys>")
    fleet.edit("T1", "return 1", "return re.escape('1')", "api.py::handle")

    fleet.finish("T2", ok=True)
    fleet.finish("T1", ok=True)

    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "api.py").write_text(API)
    for task_id in ("T2", "T1"):
        (patch,) = fleet.engine.store.patches_of_task(task_id)
        subprocess.run(["git", "apply", "--unidiff-zero", "-"], input=str(patch["diff"]),
                       text=True, cwd=replay, check=True)  # fmt: skip
    landed = (replay / "api.py").read_text()
    assert landed == fleet.api.read_text()
    assert "import os\nimport sys\nimport re\n" in landed and "re.escape('1')" in landed


def test_parts_that_cannot_be_found_again_keep_their_lease_while_another_holds_a_part(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")
    fleet.api.write_text("this is not python (\n")  # someone broke the file outside the lock

    fleet.finish("T2", ok=False)

    assert fleet.api.read_text() == "this is not python (\n"  # T1's work is not overwritten
    assert fleet.held() == {"api.py::handle": "T1", "api.py::route": "T2"}
    (failed,) = fleet.events(EventType.RESTORE_FAILED)
    assert "could not be found again" in failed["payload"]["error"]
    assert fleet.engine.store.task("T2")["status"] == TaskStatus.FAILED  # type: ignore[index]


def test_with_nobody_else_in_the_file_unfindable_parts_put_the_whole_file_back(
    fleet: Fleet,
) -> None:
    fleet.start("T1")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.api.write_text("this is not python (\n")

    fleet.finish("T1", ok=False)

    assert fleet.api.read_text() == API
    assert fleet.held() == {}


def test_the_patches_of_two_tasks_in_one_file_apply_in_the_order_they_landed(
    fleet: Fleet, tmp_path: Path
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "    pass\n", "    prefix = '/'\n", "api.py::Router")
    fleet.edit("T1", "import os\n", "import os\nimport re\n", "api.py::<import re>")

    fleet.finish("T2", ok=True)  # T2 lands first, while T1 is still editing
    fleet.finish("T1", ok=True)

    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "api.py").write_text(API)
    for task_id in ("T2", "T1"):
        (patch,) = fleet.engine.store.patches_of_task(task_id)
        subprocess.run(
            ["git", "apply", "--unidiff-zero", "-"],
            input=str(patch["diff"]),
            text=True,
            cwd=replay,
            check=True,
        )
    assert (replay / "api.py").read_text() == fleet.api.read_text()
    (first,) = fleet.engine.store.patches_of_task("T2")
    assert "return 'one'" not in str(first["diff"])  # T1's unlanded change is not T2's


def test_a_task_landing_while_another_writes_the_file_gets_its_patch_from_the_file_unwritten(
    fleet: Fleet, tmp_path: Path
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    assert fleet.acquire("T2", "api.py::route").allowed  # T2's tool now writes the file...
    fleet.api.write_text('"""The API."""\n\nimport os\n\n\ndef hand')  # ...half written

    fleet.finish("T1", ok=True)  # T1 lands in that instant (the chaos run's seed 501)

    (patch,) = fleet.engine.store.patches_of_task("T1")
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "api.py").write_text(API)
    subprocess.run(
        ["git", "apply", "--unidiff-zero", "-"],
        input=str(patch["diff"]),
        text=True,
        cwd=replay,
        check=True,
    )
    assert (replay / "api.py").read_text() == API.replace("return 1", "return 'one'")
    view = fleet.engine.runner.foreign_preimages("T1")  # and a check's view meanwhile
    assert [base64.b64decode(f["content_b64"]).decode() for f in view["files"]] == [
        API.replace("return 1", "return 'one'")
    ]


def test_a_check_view_shows_the_other_holders_parts_as_they_were_and_its_own_as_they_are(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")

    view = fleet.engine.runner.foreign_preimages("T2")

    (shown,) = view["files"]
    text = base64.b64decode(shown["content_b64"]).decode()
    assert text == API.replace("return path", "return path.upper()")
    assert shown["holder_task_id"] == "T1" and view["unrestorable"] == []


def test_a_restart_reloads_part_leases_and_keeps_excluding(fleet: Fleet) -> None:
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "api.py::handle").allowed
    fleet.restart()
    assert [d.path for d in fleet.acquire("T2", "api.py").denied] == ["api.py::handle"]
    assert fleet.acquire("T2", "api.py::route").allowed


def test_a_malformed_part_key_is_refused_with_a_clear_reason(fleet: Fleet) -> None:
    fleet.start("T1")
    refused = fleet.acquire("T1", "api.py::")
    assert not refused.allowed
    (denied,) = refused.denied
    assert denied.reason is DenyReason.INVALID_PATH and "path::name" in denied.message


def test_a_restore_by_part_waits_while_another_task_is_writing_the_file(fleet: Fleet) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    assert fleet.acquire("T2", "api.py::route").allowed  # T2's tool has read the file ...
    seen_by_t2 = fleet.api.read_text()

    fleet.finish("T1", ok=False)  # ... when T1 fails

    assert fleet.api.read_text() == seen_by_t2  # not put back under T2's tool
    assert fleet.held() == {"api.py::handle": "T1", "api.py::route": "T2"}
    assert fleet.events(EventType.FILE_RESTORED) == []
    fleet.api.write_text(seen_by_t2.replace("return path", "return path.upper()"))
    fleet.record("T2")  # T2's write is over: the restore goes ahead after it

    assert fleet.api.read_text() == API.replace("return path", "return path.upper()")
    assert fleet.held() == {"api.py::route": "T2"}
    (restored,) = fleet.events(EventType.FILE_RESTORED)
    assert restored["task_id"] == "T1"


def test_a_task_granted_its_file_whole_after_another_landed_puts_back_only_its_own_change(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")
    fleet.finish("T2", ok=True)  # T2's change lands; nobody else holds a part of api.py
    # T1's next write cannot be mapped to parts (say, an Edit whose old_string is not in
    # the file): the gate asks for the whole file, and with nobody else in it gets it
    fleet.edit("T1", "    pass\n", "    x = 1\n", "api.py")

    fleet.finish("T1", ok=False)

    assert fleet.api.read_text() == API.replace("return path", "return path.upper()")
    assert fleet.held() == {}


def test_after_a_task_is_granted_its_file_whole_a_view_and_its_patch_keep_the_landed_change(
    fleet: Fleet, tmp_path: Path
) -> None:
    fleet.start("T1", "T2", "T3")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")
    fleet.finish("T2", ok=True)
    fleet.edit("T1", "    pass\n", "    x = 1\n", "api.py")  # the part -> whole upgrade

    view = fleet.engine.runner.foreign_preimages("T3")  # what a check's view puts back
    (shown,) = view["files"]
    assert base64.b64decode(shown["content_b64"]).decode() == API.replace(
        "return path", "return path.upper()"
    )
    fleet.finish("T1", ok=True)
    (patch,) = fleet.engine.store.patches_of_task("T1")
    assert "path.upper()" not in str(patch["diff"])  # T1's patch carries only T1's change
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "api.py").write_text(API)
    for task_id in ("T2", "T1"):  # the order they landed in
        (landed,) = fleet.engine.store.patches_of_task(task_id)
        subprocess.run(
            ["git", "apply", "--unidiff-zero", "-"],
            input=str(landed["diff"]),
            text=True,
            cwd=replay,
            check=True,
        )
    assert (replay / "api.py").read_text() == fleet.api.read_text()


@pytest.mark.parametrize("other", ["landed", "still-holding"])
def test_on_an_empty_module_a_failed_attempt_removes_only_the_definition_it_added(
    fleet: Fleet, workdir: Path, other: str
) -> None:
    module = workdir / "pkg.py"  # an empty module, like most __init__.py files
    module.write_text("")
    fleet.start("T1", "T2")
    assert fleet.acquire("T1", "pkg.py::alpha").allowed
    module.write_text("def alpha():\n    return 1\n")
    fleet.record("T1", path="pkg.py")
    assert fleet.acquire("T2", "pkg.py::beta").allowed
    module.write_text(module.read_text() + "\n\ndef beta():\n    return 2\n")
    fleet.record("T2", path="pkg.py")
    if other == "landed":
        fleet.finish("T2", ok=True)

    fleet.finish("T1", ok=False)

    assert module.read_text() == "def beta():\n    return 2\n"  # first now: no blank lines above
    assert fleet.events(EventType.RESTORE_FAILED) == []
    assert fleet.held() == ({} if other == "landed" else {"pkg.py::beta": "T2"})


def test_a_whole_file_is_refused_to_a_part_holder_whose_parts_cannot_be_found_in_it_now(
    fleet: Fleet,
) -> None:
    fleet.start("T1", "T2")
    fleet.edit("T1", "return 1", "return 'one'", "api.py::handle")
    fleet.edit("T2", "return path", "return path.upper()", "api.py::route")
    fleet.finish("T2", ok=True)
    fleet.api.write_text(fleet.api.read_text() + "this is not python (\n")  # behind the lock

    refused = fleet.acquire("T1", "api.py")

    (denied,) = refused.denied
    assert denied.reason is DenyReason.INVALID_PATH and "cannot be found again" in denied.message
    assert fleet.held() == {"api.py::handle": "T1"}


def test_a_function_added_at_the_top_lands_as_a_patch_that_applies_to_the_module_as_it_was(
    fleet: Fleet, workdir: Path, tmp_path: Path
) -> None:
    module = workdir / "pkg.py"
    original = "def seed():\n    return 0\n\n\ndef other():\n    return 0\n"
    module.write_text(original)
    fleet.start("T1", "T2")
    assert fleet.acquire("T2", "pkg.py::other").allowed
    module.write_text(original.replace("other():\n    return 0", "other():\n    return 2"))
    fleet.record("T2", path="pkg.py")
    assert fleet.acquire("T1", "pkg.py::added").allowed  # above seed(), at the very top
    module.write_text("def added():\n    return 1\n\n\n" + module.read_text())
    fleet.record("T1", path="pkg.py")

    fleet.finish("T1", ok=True)  # while T2 still holds other()
    fleet.finish("T2", ok=True)

    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "pkg.py").write_text(original)
    for task_id in ("T1", "T2"):
        (patch,) = fleet.engine.store.patches_of_task(task_id)
        subprocess.run(
            ["git", "apply", "-"], input=str(patch["diff"]), text=True, cwd=replay, check=True
        )
    assert (replay / "pkg.py").read_text() == module.read_text()
