"""`codefleet join` / `leave`: merging our hooks into `.claude/settings.local.json`.

The pure merge (`merged`, `without_ours`) on literal settings, then the files
`join_tree` / `leave_tree` write, then the real `codefleet` executable.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codefleet.hook.settings import (
    JoinError,
    hooks_block,
    join_tree,
    leave_tree,
    merged,
    settings_path,
    without_ours,
)

EXE = ["/opt/cf/bin/codefleet"]
THEIRS = {"type": "command", "command": "prettier --write", "timeout": 5}
PERSONAL: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "1"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
        "PostToolUse": [{"matcher": "Write", "hooks": [THEIRS]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
    },
}


def block(server: str = "http://127.0.0.1:8099", fail_open: bool = False) -> dict[str, Any]:
    return hooks_block(EXE, server, Path("/work/tree"), fail_open)


def commands(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"].get(event, []) for h in g["hooks"]]


def ours(settings: dict[str, Any], event: str) -> list[str]:
    return [c for c in commands(settings, event) if " hook " in c]


def test_join_adds_the_three_hooks_with_the_absolute_executable_server_and_tree() -> None:
    out = merged({}, block())
    assert ours(out, "PreToolUse") == [
        "/opt/cf/bin/codefleet hook pre-tool-use --server http://127.0.0.1:8099 --tree /work/tree"
    ]
    assert out["hooks"]["PreToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    assert out["hooks"]["PostToolUse"][0]["matcher"] == (
        "Write|Edit|MultiEdit|NotebookEdit|NotebookRead|Read"  # the reads are recorded too
    )
    assert ours(out, "SessionEnd") == [
        "/opt/cf/bin/codefleet hook session-end --server http://127.0.0.1:8099 --tree /work/tree"
    ]
    assert "matcher" not in out["hooks"]["SessionEnd"][0]


def test_join_keeps_every_other_key_and_hook() -> None:
    out = merged(PERSONAL, block())
    assert out["permissions"] == PERSONAL["permissions"] and out["env"] == PERSONAL["env"]
    assert commands(out, "PreToolUse")[0] == "guard.sh"
    assert commands(out, "PostToolUse")[0] == "prettier --write"
    assert out["hooks"]["Stop"] == PERSONAL["hooks"]["Stop"]
    assert len(ours(out, "PreToolUse")) == len(ours(out, "PostToolUse")) == 1


def test_join_is_idempotent_and_replaces_its_own_entries_when_options_change() -> None:
    once = merged(PERSONAL, block())
    assert merged(once, block()) == once
    moved = merged(once, block("http://10.0.0.2:9000", fail_open=True))
    assert ours(moved, "PreToolUse") == [
        "/opt/cf/bin/codefleet hook pre-tool-use --server http://10.0.0.2:9000 --tree /work/tree --fail-open"
    ]


def test_leave_removes_exactly_what_join_added() -> None:
    assert without_ours(merged(PERSONAL, block(fail_open=True))) == PERSONAL
    assert without_ours(merged({}, block())) == {}
    assert without_ours(PERSONAL) == PERSONAL


def test_leave_removes_our_hook_even_from_a_group_the_person_edited() -> None:
    joined = merged({}, block())
    joined["hooks"]["PreToolUse"][0]["hooks"].append({"type": "command", "command": "mine.sh"})
    left = without_ours(joined)
    assert left == {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Write|Edit|MultiEdit|NotebookEdit",
                    "hooks": [{"type": "command", "command": "mine.sh"}],
                }
            ]
        }
    }


def test_a_hooks_value_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(JoinError, match="not an object"):
        merged({"hooks": ["x"]}, block())
    with pytest.raises(JoinError, match="not a list"):
        merged({"hooks": {"PreToolUse": {"matcher": "x"}}}, block())


# -- the file --------------------------------------------------------------------------------


def test_join_creates_the_file_and_leave_deletes_it_when_nothing_else_was_there(
    tmp_path: Path,
) -> None:
    written = join_tree(tmp_path, block())
    path = settings_path(tmp_path)
    assert written.changed and written.backup is None
    assert json.loads(path.read_text()) == merged({}, block())
    left = leave_tree(tmp_path)
    assert left.changed and not path.exists()
    assert left.backup is None and not path.with_name(path.name + ".bak").exists()


def test_join_backs_up_the_previous_file_and_a_second_join_writes_nothing(tmp_path: Path) -> None:
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps(PERSONAL))
    original = path.read_bytes()
    first = join_tree(tmp_path, block())
    assert first.backup is not None and first.backup.read_bytes() == original
    stamp = path.stat().st_mtime_ns
    second = join_tree(tmp_path, block())
    assert not second.changed and path.stat().st_mtime_ns == stamp
    leave_tree(tmp_path)
    assert json.loads(path.read_text()) == PERSONAL


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '"text"'])
def test_a_settings_file_that_is_not_a_json_object_is_refused_and_left_alone(
    tmp_path: Path, content: str
) -> None:
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(JoinError):
        join_tree(tmp_path, block())
    with pytest.raises(JoinError):
        leave_tree(tmp_path)
    assert path.read_text() == content
    assert not path.with_name(path.name + ".bak").exists()


def test_print_computes_without_writing(tmp_path: Path) -> None:
    written = join_tree(tmp_path, block(), dry_run=True)
    assert written.settings == merged({}, block())
    assert not settings_path(tmp_path).exists()


# -- the real executable ---------------------------------------------------------------------

CODEFLEET = Path(sys.executable).parent / "codefleet"


def codefleet(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CODEFLEET), *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def dead_server() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_commands_name_the_executable_join_ran_from(tmp_path: Path) -> None:
    server = dead_server()
    done = codefleet("join", "--server", server, "--fail-open", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no CodeFleet server answers" in done.stderr
    settings = json.loads(settings_path(tmp_path).read_text())
    argv = shlex.split(ours(settings, "PreToolUse")[0])
    assert argv == [
        str(CODEFLEET),
        "hook",
        "pre-tool-use",
        "--server",
        server,
        "--tree",
        str(tmp_path.resolve()),
        "--fail-open",
    ]
    shown = codefleet("join", "--print", "--server", server, "--fail-open", cwd=tmp_path)
    assert json.loads(shown.stdout) == settings
    assert codefleet("leave", cwd=tmp_path).returncode == 0
    assert not settings_path(tmp_path).exists()


def git(*argv: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *argv], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_join_leaves_git_status_clean_and_leave_leaves_no_hook_command_behind(
    tmp_path: Path,
) -> None:
    git("init", "-q", cwd=tmp_path)
    tree = tmp_path / "sub"  # the tree may be a directory inside the repository
    tree.mkdir()
    path = settings_path(tree)
    path.parent.mkdir()
    path.write_text(json.dumps(PERSONAL))
    server = dead_server()

    joined = codefleet("join", "--server", server, "--fail-open", cwd=tree)
    status = git("status", "--porcelain", "--untracked-files=all", cwd=tmp_path)
    rejoined = codefleet("join", "--server", server, cwd=tree)  # other options: replaced
    left = codefleet("leave", cwd=tree)

    assert joined.returncode == 0 and rejoined.returncode == 0, joined.stderr + rejoined.stderr
    assert status == ""
    assert left.returncode == 0, left.stderr
    assert json.loads(path.read_text()) == PERSONAL
    leftovers = [p.name for p in path.parent.iterdir() if "hook pre-tool-use" in p.read_text()]
    assert leftovers == []
