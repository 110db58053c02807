"""A `uv run` check's lock is kept by the content of what defines it (`fleet.views.uvlock`).

Which commands qualify, which files' content keys the kept lock (a change to one
is a new key: uv resolves again), and when a lock is kept at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.fleet.views.uvlock import (
    DEFINING,
    LOCK,
    LockCache,
    Resolution,
    defining_key,
    frozen_command,
    uv_run_command,
    view_reader,
)
from codefleet.rollback import PreImage

PYPROJECT = b'[project]\nname = "demo"\nversion = "0"\ndependencies = ["attrs"]\n'
COMMAND = "uv run --project . pytest -q"


def files(**extra: bytes | None) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {
        "pyproject.toml": PYPROJECT,
        "uv.lock": b"version = 1\n",
        ".python-version": b"3.11\n",
        "uv.toml": None,
        "src/demo.py": b"VALUE = 1\n",
    }
    found.update({k.replace("__", "."): v for k, v in extra.items()})
    return found


def kept_in(tmp_path: Path) -> LockCache:
    """A cache over a tree at `tmp_path` with its state directory."""
    (tmp_path / ".codefleet").mkdir()
    return LockCache(tmp_path)


def key(content: dict[str, bytes | None], command: str = COMMAND, **env: str) -> str | None:
    return defining_key(content.get, command, env)


@pytest.mark.parametrize(
    "command",
    [
        "uv run pytest",
        "uv run --project . pytest -q",
        "uv run --project=. --group test pytest",
        "FOO=1 uv run pytest && uv run ruff check .",
        "uv run python -m unittest 2>&1 | tail -5",
        "uv run --with pytest pytest",
    ],
)
def test_a_plain_uv_run_of_the_trees_project_qualifies(command: str) -> None:
    assert uv_run_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "pytest -q",
        "make test",
        "uv run --frozen pytest",
        "uv run --locked pytest",
        "uv run --no-sync pytest",
        "uv run --with pytest --locked pytest",
        "uv run --project sub pytest",
        "uv run --directory=sub pytest",
        "uv run --config-file other.toml pytest",
        "cd sub && uv run pytest",
        "uv sync && uv run pytest",
        "uv --directory sub run pytest",
        "uv run 'pytest",
    ],
)
def test_any_other_command_is_left_as_it_is(command: str) -> None:
    assert not uv_run_command(command)


@pytest.mark.parametrize(
    ("command", "frozen"),
    [
        ("uv run --project . pytest -q", "uv run --frozen --project . pytest -q"),
        (
            "FOO=1 uv run pytest && uv  run ruff check .",
            "FOO=1 uv run --frozen pytest && uv  run --frozen ruff check .",
        ),
        ("(uv run pytest)|tail -3", "(uv run --frozen pytest)|tail -3"),
        ('echo "uv run"; uv run pytest', 'echo "uv run"; uv run --frozen pytest'),
    ],
)
def test_each_uv_run_and_only_it_gets_the_frozen_flag(command: str, frozen: str) -> None:
    assert frozen_command(command) == frozen


def test_a_rewrite_that_would_change_another_word_is_not_made() -> None:
    assert frozen_command('echo "a; uv run b"; uv run pytest') is None


@pytest.mark.parametrize("path", DEFINING)
def test_a_change_to_any_defining_file_is_a_new_key(path: str) -> None:
    before = files()
    changed = {**before, path: (before[path] or b"") + b"# changed\n"}
    removed = {**before, path: None}

    assert key(changed) != key(before)
    assert (key(removed) != key(before)) == (before[path] is not None)


def test_the_trees_other_files_are_not_in_the_key() -> None:
    assert key(files(**{"src/demo.py": b"VALUE = 2\n"})) == key(files())


def test_the_command_and_uvs_variables_are_in_the_key() -> None:
    assert key(files(), "uv run pytest") != key(files())
    assert key(files(), UV_INDEX_URL="http://127.0.0.1:1/simple") != key(files())
    assert key(files(), HOME="/elsewhere") == key(files())


@pytest.mark.parametrize(
    "pyproject",
    [
        None,
        b"not toml [",
        PYPROJECT + b'[tool.uv.workspace]\nmembers = ["pkg/*"]\n',
        PYPROJECT + b'[tool.uv.sources]\nlib = { path = "../lib" }\n',
        b'[project]\nname = "demo"\nversion = "0"\ndynamic = ["dependencies"]\n',
    ],
)
def test_a_lock_other_files_define_too_has_no_key(pyproject: bytes | None) -> None:
    assert key(files(pyproject__toml=pyproject)) is None


def test_a_kept_lock_makes_the_next_check_on_that_content_skip_the_resolution(
    tmp_path: Path,
) -> None:
    cache, view = kept_in(tmp_path), files(uv__lock=None)
    first = cache.plan(view.get, COMMAND, {})
    assert first is not None and first.resolution is Resolution.RESOLVED
    assert first.command(COMMAND) == COMMAND

    assert cache.keep(first, b"resolved lock", exit_code=1, still=True)  # uv wrote it

    second = cache.plan(view.get, COMMAND, {})
    assert second is not None and second.resolution is Resolution.SKIPPED
    assert second.command(COMMAND) == "uv run --frozen --project . pytest -q"
    assert second.image == PreImage(LOCK, existed=True, content=b"resolved lock", mode=0o644)
    assert (tmp_path / ".codefleet" / f"uv-lock-{first.key}").read_bytes() == b"resolved lock"
    edited = files(uv__lock=None, pyproject__toml=PYPROJECT + b"# one more line\n")
    again = cache.plan(edited.get, COMMAND, {})
    assert again is not None and again.resolution is Resolution.RESOLVED


def test_a_current_lock_is_kept_when_the_command_passed_and_needs_no_image(
    tmp_path: Path,
) -> None:
    cache, view = kept_in(tmp_path), files()
    plan = cache.plan(view.get, COMMAND, {})
    assert plan is not None

    assert not cache.keep(plan, view["uv.lock"], exit_code=1, still=True)  # did uv get that far?
    assert not cache.keep(plan, b"resolved", exit_code=0, still=False)  # the key moved
    assert not cache.keep(plan, None, exit_code=0, still=True)
    assert cache.keep(plan, view["uv.lock"], exit_code=0, still=True)

    kept = cache.plan(view.get, COMMAND, {})
    assert kept is not None and kept.resolution is Resolution.SKIPPED and kept.image is None


def test_no_plan_where_uv_is_already_told_not_to_resolve(tmp_path: Path) -> None:
    cache = kept_in(tmp_path)
    assert cache.plan(files().get, COMMAND, {"UV_FROZEN": "1"}) is None
    assert cache.plan(files().get, COMMAND, {"UV_NO_SYNC": "1"}) is None
    assert cache.plan(files().get, "pytest -q", {}) is None


def test_the_key_is_held_still_only_when_the_files_read_again_agree(tmp_path: Path) -> None:
    cache, view = kept_in(tmp_path), files(uv__lock=None)
    plan = cache.plan(view.get, COMMAND, {})
    assert plan is not None

    written = {**view, "uv.lock": b"what uv wrote"}  # the lock is compared as it was
    assert cache.held_still(plan, written.get, COMMAND, {})
    edited = {**view, "pyproject.toml": PYPROJECT + b"# during the run\n"}
    assert not cache.held_still(plan, edited.get, COMMAND, {})


def test_the_view_shows_a_masked_file_at_its_pre_image(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"live")
    (tmp_path / "uv.lock").write_bytes(b"live lock")
    images = {
        "pyproject.toml": PreImage("pyproject.toml", existed=True, content=b"before"),
        "uv.lock": PreImage("uv.lock", existed=False),
    }
    read = view_reader(tmp_path, images)

    assert (read("pyproject.toml"), read("uv.lock"), read("uv.toml")) == (b"before", None, None)
    assert view_reader(tmp_path)("uv.lock") == b"live lock"


def test_nothing_is_kept_without_a_state_directory_nor_through_a_link(tmp_path: Path) -> None:
    view = files(uv__lock=None)
    bare = LockCache(tmp_path / "no-state")
    plan = bare.plan(view.get, COMMAND, {})
    assert plan is not None and not bare.keep(plan, b"lock", exit_code=0, still=True)

    cache = kept_in(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"planted")
    (tmp_path / ".codefleet" / f"uv-lock-{plan.key}").symlink_to(elsewhere)
    again = cache.plan(view.get, COMMAND, {})
    assert again is not None and again.lock is None  # a link is not read: uv resolves
