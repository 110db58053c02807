"""The stale-read computation and the reconcile message's bounded diff (issue 27).

Real files in a temporary tree; the ledger's answer (`changes`) is literal data,
as `POST /tasks/{id}/reads` would return it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from codefleet.attempt import StaleRead
from codefleet.fleet.gate.followup import (
    FILE_CHARS,
    TOTAL_CHARS,
    Seen,
    bounded_diff,
    followup_message,
)
from codefleet.fleet.gate.readset import KEEP_BYTES, ReadLog
from codefleet.fleet.gate.stale import A_PERSON, OUTSIDE_THE_LOCK, find_stale
from codefleet.paths import TreeRoot


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def read(tree: TreeRoot, log: ReadLog, path: str) -> None:
    log.record(tree, "Read", {"file_path": str(tree.root / path)})


def rewrite(target: Path, text: str) -> None:
    """Write and move the mtime on, as a later write on a coarse clock would."""
    before = target.stat().st_mtime_ns if target.exists() else 0
    target.write_text(text)
    os.utime(target, ns=(before + 10**9, before + 10**9))


def by(task: str, person: bool = False) -> dict[str, Any]:
    return {"task_id": task, "at": "2026-01-01T00:00:00.000Z", "sha256": None, "person": person}


def tree_with(tmp_path: Path, **files: str) -> TreeRoot:
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    return TreeRoot(tmp_path)


def test_a_file_another_task_changed_since_the_read_is_stale_and_names_that_task(
    tmp_path: Path,
) -> None:
    tree, log = tree_with(tmp_path, api="def f(a):\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "def f(a, b):\n")
    found = find_stale(log.latest, {}, {"api.py": [by("T3")]}, tmp_path)
    assert found == (
        StaleRead(
            path="api.py",
            changed_by=("T3",),
            read_sha256=sha("def f(a):\n"),
            now_sha256=sha("def f(a, b):\n"),
        ),
    )


def test_a_file_the_attempt_itself_wrote_last_is_not_stale(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="old\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "mine\n")
    assert find_stale(log.latest, {"api.py": sha("mine\n")}, {}, tmp_path) == ()


def test_a_file_changed_after_the_attempts_own_write_is_still_stale(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="old\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "theirs\n")
    found = find_stale(log.latest, {"api.py": sha("mine\n")}, {"api.py": [by("T4")]}, tmp_path)
    assert [(s.path, s.changed_by) for s in found] == [("api.py", ("T4",))]


def test_a_deleted_file_is_stale_with_no_hash_now(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="x\n"), ReadLog()
    read(tree, log, "api.py")
    (tmp_path / "api.py").unlink()
    found = find_stale(log.latest, {}, {"api.py": [by("T3")]}, tmp_path)
    assert [(s.path, s.changed_by, s.now_sha256) for s in found] == [("api.py", ("T3",), None)]
    assert "api.py: deleted by T3." in followup_message(found, {})


def test_a_file_changed_and_changed_back_is_not_stale(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="same\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "other\n")
    rewrite(tmp_path / "api.py", "same\n")
    assert find_stale(log.latest, {}, {"api.py": [by("T3"), by("T5")]}, tmp_path) == ()


def test_a_file_read_twice_is_judged_by_the_later_read(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="v1\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "v2\n")
    read(tree, log, "api.py")
    assert find_stale(log.latest, {}, {"api.py": [by("T3")]}, tmp_path) == ()
    assert [r.sha256 for r in log.unsent] == [sha("v1\n"), sha("v2\n")]


def test_a_change_with_no_ledger_row_is_found_by_size_and_named_outside_the_lock(
    tmp_path: Path,
) -> None:
    tree, log = tree_with(tmp_path, api="short\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "much longer now\n")
    found = find_stale(log.latest, {}, {}, tmp_path)
    assert [s.changed_by for s in found] == [(OUTSIDE_THE_LOCK,)]


def test_a_persons_change_is_named_a_person(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="a\n"), ReadLog()
    read(tree, log, "api.py")
    rewrite(tmp_path / "api.py", "b\n")
    found = find_stale(log.latest, {}, {"api.py": [by("i-1", person=True), by("T2")]}, tmp_path)
    assert [s.changed_by for s in found] == [(A_PERSON, "T2")]


def test_a_file_neither_in_the_ledger_nor_moved_on_disk_is_not_hashed(tmp_path: Path) -> None:
    tree, log = tree_with(tmp_path, api="a\n"), ReadLog()
    read(tree, log, "api.py")
    target = tmp_path / "api.py"
    stat = target.stat()
    target.write_text("b\n")  # same size, mtime put back: only a hash would tell
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert find_stale(log.latest, {}, {}, tmp_path) == ()
    assert [s.path for s in find_stale(log.latest, {}, {"api.py": [by("T3")]}, tmp_path)] == [
        "api.py"
    ]


def test_reads_outside_the_tree_and_grep_calls_are_not_recorded(tmp_path: Path) -> None:
    inside = tmp_path / "tree"
    inside.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    log = ReadLog()
    log.record(TreeRoot(inside), "Read", {"file_path": str(tmp_path / "secret.txt")})
    log.record(TreeRoot(inside), "Grep", {"pattern": "x", "path": str(inside)})
    assert log.latest == {} and log.unsent == []


def test_the_diff_shows_what_was_read_against_what_is_there_now() -> None:
    text, changed = bounded_diff("api.py", "def f(a):\n    pass\n", "def f(a, b):\n    pass\n")
    assert "--- api.py (as you read it)" in text and "+++ api.py (now)" in text
    assert "-def f(a):\n+def f(a, b):\n" in text
    assert changed == 2


def test_a_python_files_diff_names_the_parts_that_changed() -> None:
    before = "import os\n\n\ndef handle():\n    return 1\n\n\ndef route():\n    return 2\n"
    after = before.replace("return 2", "return 3").replace("import os\n", "import os\nimport re\n")
    stale = StaleRead(path="api.py", changed_by=("T3",), read_sha256="a" * 64, now_sha256="b" * 64)

    message = followup_message([stale], {"api.py": Seen(before, after, kept=True)})

    assert "- api.py: changed by T3 (in <import re>, route).\n```diff\n" in message
    notes = StaleRead(
        path="notes.txt", changed_by=("T3",), read_sha256="a" * 64, now_sha256="b" * 64
    )
    plain = followup_message([notes], {"notes.txt": Seen(before, after, kept=True)})
    assert "- notes.txt: changed by T3.\n" in plain  # not Python: no parts named


def test_a_file_diff_past_the_per_file_bound_is_named_with_its_line_count() -> None:
    before = "".join(f"line {n}\n" for n in range(3000))
    after = "".join(f"LINE {n}\n" for n in range(3000))
    stale = StaleRead(path="big.py", changed_by=("T3",), read_sha256="a" * 64, now_sha256="b" * 64)
    message = followup_message([stale], {"big.py": Seen(before, after, kept=True)})
    assert len(bounded_diff("big.py", before, after)[0]) > FILE_CHARS
    assert "big.py: changed by T3. 6000 lines changed (too long to show here). Read it again." in (
        message
    )
    assert "```diff" not in message


def test_diffs_past_the_total_bound_are_named_and_the_message_stays_within_it() -> None:
    before = "".join(f"line {n}\n" for n in range(700))
    after = "".join(f"LINE {n}\n" for n in range(700))
    items = [
        StaleRead(path=f"f{n}.py", changed_by=("T3",), read_sha256="a" * 64, now_sha256="b" * 64)
        for n in range(6)
    ]
    seen = {s.path: Seen(before, after, kept=True) for s in items}
    message = followup_message(items, seen)
    one = len(bounded_diff("f0.py", before, after)[0])
    assert FILE_CHARS // 2 < one <= FILE_CHARS
    shown = message.count("```diff")
    assert shown == TOTAL_CHARS // one
    assert message.count("Read it again.") == len(items) - shown
    assert len(message) < TOTAL_CHARS + 2_000


def test_a_file_not_kept_as_text_is_named_and_read_again() -> None:
    stale = StaleRead(
        path="blob.bin", changed_by=("T3",), read_sha256="a" * 64, now_sha256="b" * 64
    )
    message = followup_message([stale], {"blob.bin": Seen(None, None, kept=False)})
    assert "- blob.bin: changed by T3. Read it again." in message


def test_a_file_past_the_kept_size_is_hashed_whole_but_not_kept(tmp_path: Path) -> None:
    data = b"x" * (KEEP_BYTES + 1)
    (tmp_path / "big.bin").write_bytes(data)
    log = ReadLog()
    read(TreeRoot(tmp_path), log, "big.bin")
    record = log.latest["big.bin"]
    assert (record.sha256, record.content) == (hashlib.sha256(data).hexdigest(), None)
