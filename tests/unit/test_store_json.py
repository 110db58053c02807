"""The store's fast JSON for plain values decodes to what was written, whatever the text."""

from __future__ import annotations

import json

import pytest
import test_engine
from test_engine import Fleet

from codefleet.coord.storage.jsontext import plain_json
from codefleet.coord.tables.validation import NewTask
from codefleet.models import EventType

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


@pytest.mark.parametrize("title", ["plain", "naïve ünïcode ✓", 'q"\\'])
def test_a_created_task_and_its_event_decode_to_the_posted_values(fleet: Fleet, title: str):
    fleet.engine.operator.create_tasks([NewTask(title, id="t1", file_scope=["ü/naïve.py"])])
    row = fleet.task("t1")
    (event,) = fleet.events(EventType.TASK_CREATED)
    assert (row["title"], row["file_scope"]) == (title, ["ü/naïve.py"])
    assert event["payload"] == {
        "title": title,
        "priority": 3,
        "file_scope": ["ü/naïve.py"],
        "depends_on": [],
    }


def test_the_stored_payload_is_compact_json():
    value = {"a": [1, "b"], "c": None}
    assert json.loads(plain_json(value)) == value
    assert plain_json(value) == json.dumps(value, separators=(",", ":"))
    odd = {"lone": "\ud800", 1: "a non-str key"}  # what orjson refuses: the stdlib's text
    assert plain_json(odd) == json.dumps(odd, separators=(",", ":"))
