"""`codefleet hook`: the command-hook input/output contract, without a server.

What Claude Code sends on stdin and what the hook prints back: nothing for "no
objection", THE PreToolUse deny JSON otherwise, exit 0 always. The server is
reached only for lease decisions; here it is either never asked (the test's
`post` fails the test if it is), or a loopback port where nothing listens.
Answers from a real server are in tests/integration/test_persons.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codefleet.hook.command import (
    EVENTS,
    HookArgs,
    UsageError,
    parse_args,
    person_denial,
    run,
    this_tree,
)
from codefleet.models import WRITE_TOOLS
from codefleet.statedir import ensure_tree_id
from codefleet.toolcalls.writepaths import deny_output

SESSION = "0aeef531-72cc-4552-9656-7482e7ecde15"


def never_post(*args: Any) -> dict[str, Any]:
    pytest.fail(f"the hook asked the server although it had nothing to ask: {args}")


def free_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pre(tree: Path, fail_open: bool = False, server: str = "http://127.0.0.1:9") -> HookArgs:
    return HookArgs("pre-tool-use", server, str(tree), fail_open)


def tool_call(tree: Path, tool: str = "Write", **tool_input: Any) -> str:
    body = {
        "session_id": SESSION,
        "cwd": str(tree),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input or {"file_path": str(tree / "a.py"), "content": "x"},
    }
    return json.dumps(body)


def reason_of(out: str) -> str:
    """The deny reason, after checking the output is exactly THE deny shape."""
    decoded = json.loads(out)
    reason = decoded["hookSpecificOutput"]["permissionDecisionReason"]
    assert decoded == deny_output(reason)
    return str(reason)


# -- the command line ------------------------------------------------------------------


def test_the_arguments_join_writes_parse_back() -> None:
    args = parse_args(["pre-tool-use", "--server", "http://h:1/", "--tree", "/t", "--fail-open"])
    assert args == HookArgs("pre-tool-use", "http://h:1", "/t", fail_open=True)
    assert parse_args(["session-end", "--tree", "/t", "--server", "http://h:1"]).fail_open is False


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["pre"],
        ["pre-tool-use"],
        ["pre-tool-use", "--server", "http://h:1"],
        ["post-tool-use", "--tree", "/t", "--server", "u", "--bogus"],
    ],
)
def test_an_incomplete_command_line_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_args(argv)


def test_the_deny_shape_is_the_one_claude_code_honours() -> None:
    assert deny_output("why") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "why",
        }
    }


# -- pre-tool-use without asking the server ---------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [
        "",
        "not json",
        "[1, 2]",
        json.dumps({"tool_name": "Write", "tool_input": {}}),
        json.dumps({"session_id": SESSION, "tool_input": {}}),
        json.dumps({"session_id": SESSION, "tool_name": "Write", "tool_input": "a.py"}),
    ],
)
def test_malformed_input_is_a_denial_with_a_reason(workdir: Path, stdin: str) -> None:
    reason = reason_of(run(pre(workdir), stdin, {}, never_post))
    assert "could not read this write's hook call" in reason


@pytest.mark.parametrize("cwd", [12, "pkg", "", None, ["/t"]], ids=repr)
def test_a_write_whose_cwd_is_not_an_absolute_path_is_refused_without_asking(
    workdir: Path, cwd: Any
) -> None:
    call = json.loads(tool_call(workdir, file_path="held.txt", content="x"))
    if cwd is None:
        del call["cwd"]
    else:
        call["cwd"] = cwd
    reason = reason_of(run(pre(workdir), json.dumps(call), {}, never_post))
    assert "its input's cwd is not an absolute path" in reason


def test_a_record_whose_cwd_is_not_an_absolute_path_is_ignored_with_a_note(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = json.loads(tool_call(workdir, file_path="held.txt", content="x")) | {"cwd": 12}
    args = HookArgs("post-tool-use", "http://127.0.0.1:9", str(workdir))

    assert run(args, json.dumps(call), {}, never_post) == ""
    assert "cwd is not an absolute path; ignored" in capsys.readouterr().err


def test_a_tool_that_writes_nothing_gets_no_objection(workdir: Path) -> None:
    assert run(pre(workdir), tool_call(workdir, "Read", file_path="a.py"), {}, never_post) == ""


def test_a_write_naming_no_path_is_refused(workdir: Path) -> None:
    reason = reason_of(run(pre(workdir), tool_call(workdir, "Write", content="x"), {}, never_post))
    assert "named no file path" in reason


def test_writes_the_fleet_can_never_lease_get_no_objection(workdir: Path, tmp_path: Path) -> None:
    outside = tool_call(workdir, file_path=str(tmp_path / "notes.md"), content="x")
    protected = tool_call(workdir, file_path=str(workdir / ".git" / "config"), content="x")
    assert run(pre(workdir), outside, {}, never_post) == ""
    assert run(pre(workdir), protected, {}, never_post) == ""


def test_an_unusable_path_is_refused_locally(workdir: Path) -> None:
    reason = reason_of(run(pre(workdir), tool_call(workdir, file_path="pkg"), {}, never_post))
    assert "pkg is a directory" in reason


# -- the server cannot be reached ------------------------------------------------------------


def test_an_unreachable_server_denies_and_says_how_to_continue(workdir: Path) -> None:
    args = pre(workdir, server=f"http://127.0.0.1:{free_port()}")
    reason = reason_of(run(args, tool_call(workdir), {}))
    assert "did not answer" in reason
    assert f"`codefleet leave` in {workdir}" in reason


def test_fail_open_lets_the_write_through_when_the_server_is_away(workdir: Path) -> None:
    args = pre(workdir, fail_open=True, server=f"http://127.0.0.1:{free_port()}")
    assert run(args, tool_call(workdir), {}) == ""


@pytest.mark.parametrize("event", ["post-tool-use", "session-end"])
def test_the_other_events_never_print_even_when_the_server_is_away(
    workdir: Path, event: str
) -> None:
    args = HookArgs(event, f"http://127.0.0.1:{free_port()}", str(workdir))
    assert run(args, tool_call(workdir), {}) == ""
    assert run(args, "garbage", {}) == ""


# -- what the person reads ---------------------------------------------------------------------


def test_the_denial_names_the_holder_the_task_and_what_to_do() -> None:
    answer = {
        "decision": "deny",
        "denied": [
            {
                "path": "src/api.py",
                "reason": "held",
                "holder_agent_name": "runner-2",
                "holder_task_id": "T3",
                "holder_task_title": "Add rate limiting",
                "holder_kind": "task",
            }
        ],
    }
    assert person_denial(answer) == (
        "src/api.py is being edited by runner-2 for task T3 (Add rate limiting); "
        "wait for it (codefleet watch) or work on another file."
    )


def test_a_file_another_person_holds_names_that_session() -> None:
    answer = {
        "denied": [
            {
                "path": "a.py",
                "reason": "held",
                "holder_agent_name": "bob@1a2b3c4d",
                "holder_task_id": "i-1a2b3c4d",
                "holder_kind": "interactive",
            }
        ]
    }
    assert person_denial(answer).startswith(
        "a.py is being edited by bob@1a2b3c4d in another session;"
    )


# -- the process: stdin, stdout, exit code, imports ----------------------------------------------


def hook_process(argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codefleet", "hook", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_process_prints_the_denial_and_exits_zero(workdir: Path) -> None:
    argv = ["pre-tool-use", "--server", f"http://127.0.0.1:{free_port()}", "--tree", str(workdir)]
    done = hook_process(argv, "{broken")
    assert done.returncode == 0, done.stderr
    assert "could not read" in reason_of(done.stdout)
    assert "Traceback" not in done.stderr


def test_a_broken_settings_line_still_fails_closed(workdir: Path) -> None:
    done = hook_process(["pre-tool-use", "--tree", str(workdir)], tool_call(workdir))
    assert done.returncode == 0
    assert "misconfigured" in reason_of(done.stdout)


def test_the_hook_imports_no_framework() -> None:
    """The fast path: no FastAPI, pydantic, Rich, httpx, Typer, YAML or the SDK."""
    heavy = [
        "fastapi",
        "starlette",
        "pydantic",
        "rich",
        "httpx",
        "typer",
        "yaml",
        "claude_agent_sdk",
        "uvicorn",
    ]
    code = (
        "import sys, io; sys.argv = ['codefleet', 'hook', 'session-end', '--server', 'http://127.0.0.1:9', '--tree', '.'];"
        "sys.stdin = io.StringIO('{}'); from codefleet.cli.launch import main; main();"
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_hook_event_has_a_subcommand_and_the_matcher_is_the_write_tools() -> None:
    from codefleet.hook.settings import SUBCOMMANDS, WRITE_MATCHER

    assert set(SUBCOMMANDS.values()) == set(EVENTS)
    assert set(WRITE_MATCHER.split("|")) == WRITE_TOOLS


# -- the tree on another host's mount (issue 33) -------------------------------------------


def test_tree_id_parses_back() -> None:
    argv = ["pre-tool-use", "--server", "http://h:1", "--tree", "/t", "--tree-id", "tree_x"]
    assert parse_args(argv).tree_id == "tree_x"


def test_with_a_tree_id_the_hook_takes_the_tree_that_holds_it_on_this_host(
    tmp_path: Path,
) -> None:
    mount = tmp_path / "mnt" / "repo"  # this host's mount; the joined path is elsewhere
    (mount / "src").mkdir(parents=True)
    tree_id = ensure_tree_id(mount)
    args = HookArgs("pre-tool-use", "http://h:1", "/srv/repo", tree_id=tree_id)

    assert this_tree(args, str(mount / "src")) == str(mount)
    assert this_tree(args._replace(tree=str(mount)), "/elsewhere") == str(mount)
    assert this_tree(args._replace(tree_id=None), str(mount)) == "/srv/repo"  # older settings


def test_a_session_outside_the_joined_tree_on_this_host_is_denied_without_asking(
    tmp_path: Path,
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    args = HookArgs("pre-tool-use", "http://h:1", "/srv/repo", tree_id="tree_" + "c" * 32)

    out = run(args, tool_call(other), {}, post=never_post)

    assert "is not in the tree joined as" in reason_of(out)
    assert "codefleet join" in reason_of(out)
