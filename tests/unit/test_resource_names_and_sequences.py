"""Named resources and sequences in the graph file: what loads, and the errors that name the task."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from codefleet.api.graphfile import GraphError, GraphTasks, parse_graph
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.sequences import Sequences, first_value, highest_number
from codefleet.errors import InvalidGraph
from codefleet.paths import TreeRoot
from codefleet.planning.check import check_graph
from codefleet.resources import is_resource_key, resource_key, resource_name

T0 = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)


def graph(**task: Any) -> dict[str, Any]:
    return {"tasks": [{"id": "T3", "title": "migrate", "description": "do it", **task}]}


def test_a_task_names_its_resources_and_the_loaded_spec_carries_them():
    loaded = parse_graph(graph(resources=["db", "build:web"]))

    assert loaded[0]["resources"] == ["db", "build:web"]


@pytest.mark.parametrize("name", ["db/x", "has space", "Db", "", "9db", "x" * 65])
def test_a_bad_resource_name_is_a_load_error_naming_the_task(name: str):
    with pytest.raises(GraphError, match=r"task #1 \(T3\): resources\.0"):
        parse_graph(graph(resources=[name]))


def test_ten_thousand_resources_on_one_task_is_a_clear_load_error():
    with pytest.raises(GraphError, match=r"T3.*resources.*at most 64"):
        parse_graph(graph(resources=[f"r{n}" for n in range(10_000)]))


def test_an_unknown_key_beside_resources_names_the_closest_known_one():
    with pytest.raises(GraphError, match=r"T3.*'resource' \(did you mean resources\?\)"):
        parse_graph(graph(resource=["db"]))


def test_a_resource_key_is_never_a_canonical_path_and_round_trips_its_name():
    key = resource_key("build:web")

    assert key.startswith("/")  # a canonical lease key for a file is relative: never this
    assert is_resource_key(key) and not is_resource_key("resource:db")
    assert resource_name(key) == "build:web"


# -- sequences: where they start, and that a restart continues them ------------------------


def test_a_sequence_glob_starts_after_the_highest_leading_number_of_a_matching_file(
    tmp_path: Path,
):
    (tmp_path / "migrations").mkdir()
    for name in ("0001_init.py", "0012_tags.py", "0099_notes.txt", "readme.py"):
        (tmp_path / "migrations" / name).write_text("")

    assert highest_number(tmp_path, "m", "migrations/[0-9]*_*.py") == 12
    assert first_value(tmp_path, "m", {"start_after": "migrations/[0-9]*_*.py"}) == 13
    assert first_value(tmp_path, "m", {"start_after": "nothing/*.py"}) == 1
    assert first_value(tmp_path, "m", {"start": 40}) == 40


@pytest.mark.parametrize("pattern", ["../*.py", "/etc/*", "a/../../b*", "~/x*"])
def test_a_sequence_glob_that_could_reach_outside_the_tree_is_refused(tmp_path: Path, pattern: str):
    with pytest.raises(InvalidGraph, match="inside the tree"):
        highest_number(tmp_path, "m", pattern)
    with pytest.raises(GraphError, match="inside the tree"):
        parse_graph({**graph(), "sequences": {"m": {"start_after": pattern}}})


def test_numbers_taken_before_a_restart_are_never_handed_out_again(tmp_path: Path):
    db = tmp_path / "db.sqlite"
    store = Store(db)
    first = Sequences(store, lambda: T0)
    with store.transaction():
        first.define({"migrations": 3})
    with store.transaction():
        taken = [first.take("migrations", "T1", "a_1") for _ in range(3)]
    store.close()

    reopened = Store(db)
    again = Sequences(reopened, lambda: T0)
    again.load()
    with reopened.transaction():
        again.define({"migrations": 1})  # defining it again never lowers it
        after = again.take("migrations", "T2", "a_2")

    assert taken == [3, 4, 5]
    assert after == 6


def test_a_number_taken_in_a_transaction_that_rolls_back_is_not_answered_and_the_next_is_fresh(
    tmp_path: Path,
):
    store = Store(tmp_path / "db.sqlite")
    counter = Sequences(store, lambda: T0)
    with store.transaction():
        counter.define({"m": 1})
    with pytest.raises(RuntimeError), store.transaction():
        assert counter.take("m", "T1", "a_1") == 1
        raise RuntimeError("the transaction fails after the update")
    with store.transaction():
        value = counter.take("m", "T1", "a_1")

    assert value == 1  # the rolled-back 1 was never answered: handing it out now is its first time


LARGEST = 2**63 - 1  # SQLite's largest INTEGER


def test_a_counter_hands_out_sqlites_largest_integer_once_and_then_nothing_twice(tmp_path: Path):
    store = Store(tmp_path / "db.sqlite")
    counter = Sequences(store, lambda: T0)
    with store.transaction():
        counter.define({"m": LARGEST - 1})
    with store.transaction():
        taken = [counter.take("m", "T1", "a_1") for _ in range(3)]

    assert taken == [LARGEST - 1, LARGEST, None]
    assert counter.exhausted("m") and not counter.exhausted("nope")
    assert store.sequences()[0]["last_value"] == LARGEST


def test_a_counter_an_older_server_overflowed_into_a_float_stays_exhausted(tmp_path: Path):
    db = tmp_path / "db.sqlite"
    with Store(db).transaction():
        pass  # the schema
    with sqlite3.connect(db) as older:
        older.execute("INSERT INTO sequences VALUES ('m', 9223372036854775808.0, 't')")
    store = Store(db)
    counter = Sequences(store, lambda: T0)
    counter.load()

    with store.transaction():
        assert counter.take("m", "T1", "a_1") is None
    assert counter.exhausted("m")


@pytest.mark.parametrize("name", [f"{LARGEST}_x.py", "12345678901234567890_x.py"])
def test_a_file_numbered_past_what_a_sequence_can_hand_out_is_a_graph_error_naming_it(
    tmp_path: Path, name: str
):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / name).write_text("")

    with pytest.raises(InvalidGraph, match=f"m/{name}"):
        first_value(tmp_path, "seq", {"start_after": "m/*.py"})
    assert first_value(tmp_path, "seq", {"start_after": "nothing/*.py"}) == 1


# -- graph check: a shared resource serializes, and is named -------------------------------


def test_graph_check_runs_tasks_sharing_a_resource_one_at_a_time_and_names_the_hotspot(
    tmp_path: Path,
):
    def task(task_id: str, *resources: str) -> dict[str, Any]:
        spec = {
            "id": task_id,
            "title": task_id,
            "description": "d",
            "file_scope": [f"{task_id}.py"],
        }
        return {**spec, "resources": list(resources)} if resources else spec

    shared = check_graph(GraphTasks([task("A", "db"), task("B", "db")]), TreeRoot(tmp_path), 2)
    apart = check_graph(GraphTasks([task("A", "db"), task("B", "cache")]), TreeRoot(tmp_path), 2)

    assert shared.parallelism.predicted == 1.0 and apart.parallelism.predicted == 2.0
    assert [(o.task_ids, o.paths) for o in shared.overlaps] == [(("A", "B"), ("/resource:db",))]
    assert [(h.path, h.task_ids) for h in shared.hotspots] == [("/resource:db", ("A", "B"))]
    assert apart.hotspots == ()
