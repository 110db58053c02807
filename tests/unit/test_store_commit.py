"""After a COMMIT the change is stored: nothing that runs after it may report it as undone."""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.coord.storage.database import Touched
from codefleet.coord.storage.store import Store
from codefleet.models import EventType


def test_a_failing_post_commit_hook_does_not_report_the_committed_change_as_rolled_back(
    tmp_path: Path,
) -> None:
    rolled_back: list[Touched] = []

    def broken(_: Touched) -> None:
        raise RuntimeError("a read cache failed")

    store = Store(tmp_path / "db.sqlite", on_rollback=rolled_back.append, on_committed=broken)
    with pytest.raises(RuntimeError, match="a read cache failed"), store.transaction():
        store.emit(EventType.TASK_CREATED, task_id="A", title="A")

    assert rolled_back == []  # nobody mirroring rows is told to re-read a change that stands
    assert [e["task_id"] for e in store.events(0, 10)] == ["A"]
    assert store.commits == 1
    store.close()
