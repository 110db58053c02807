"""The first hour on one's own repository, through the real CLI against a real server.

Each test runs `codefleet` commands the way a new user would, from inside a
small repository (the current directory), against a real server on loopback:
the tree is the current directory, `init` writes a graph that `load` and `run`
find, scripted runs refuse tasks they have no script for, a failed run is
recovered with `retry`, and the messages tell the truth.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.server.thread import ServerThread

FAST = {"tick_interval": 0.05, "backoff_base": 0.0, "heartbeat_interval": 0.5}
SCRIPT = """\
T1:
- write: {path: CONTRIBUTING.md, content: "# Contributing\\n"}
T2:
- append: {path: README.md, text: "\\nSee CONTRIBUTING.md.\\n"}
"""


def cli(*args: str, **env: str) -> Result:
    """`codefleet ARGS` with no CODEFLEET_* or credentials from the outer environment."""
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_", "CLAUDE_"))}
    return CliRunner().invoke(app, list(args), env={**clean, "COLUMNS": "100", **env})  # type: ignore[dict-item]


def said(result: Result) -> str:
    return " ".join((result.stdout + result.stderr).split())


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small repository with a README and a test, and the current directory."""
    root = tmp_path / "my-repo"
    (root / "tests").mkdir(parents=True)
    (root / "README.md").write_text("# my-repo\n")
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "my-repo"\nversion = "0"\n\n[dependency-groups]\ndev = ["pytest>=8"]\n'
    )
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no Claude login from the real HOME
    return root


@pytest.fixture
def server(make_server: Callable[..., ServerThread], repo: Path) -> ServerThread:
    return make_server(workdir=repo, **FAST)


def test_init_writes_a_graph_with_the_repositorys_checks_and_prints_the_next_commands(
    repo: Path,
) -> None:
    result = cli("init", "--scripts")

    assert result.exit_code == 0, said(result)
    graph = (repo / "codefleet.yaml").read_text()
    assert re.search(r"^  test: uv run --project \. pytest -q", graph, re.M) or (
        "test: python -m pytest -q" in graph
    )
    assert "id: T1" in graph and "id: T2" in graph and "verify: test" in graph
    lines = result.stdout.splitlines()
    assert [line.split("#")[0].strip() for line in lines[-3:]] == [  # the README's steps
        "codefleet graph check",
        "codefleet serve &",
        "codefleet run --dry-run --script codefleet.script.yaml",  # `run` loads the graph
    ]
    again = cli("init")
    assert again.exit_code == 1 and "codefleet.yaml already exists here" in said(again)


def test_load_finds_codefleet_yaml_and_a_second_load_says_already_loaded(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0

    first = cli("load", "--server", server.url)
    second = cli("load", "--server", server.url)

    assert first.exit_code == 0, said(first)
    assert first.stdout.splitlines()[0] == (
        f"load: tree {repo.resolve()} · server {server.url} · {repo / 'codefleet.yaml'}"
    )
    assert "created 2 task(s): T1 T2" in first.stdout
    assert second.exit_code == 0, said(second)
    assert "already loaded (2 task(s)): nothing to create" in said(second)
    assert "used twice" not in said(second)


def test_run_loads_codefleet_yaml_and_a_scripted_run_goes_green(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "script.yaml").write_text(SCRIPT)

    result = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url, "-n", "2")
    again = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)

    assert result.exit_code == 0, said(result)
    lines = result.stdout.splitlines()
    assert lines[0] == f"run: tree {repo.resolve()} · server {server.url} · dry-run agents"
    assert lines[1] == f"{repo / 'codefleet.yaml'}: loaded 2 task(s): T1 T2"
    assert "PASS" in result.stdout
    assert (repo / "CONTRIBUTING.md").read_text() == "# Contributing\n"
    assert (repo / "README.md").read_text().endswith("See CONTRIBUTING.md.\n")
    assert again.exit_code == 0, said(again)
    assert f"{repo / 'codefleet.yaml'}: already loaded (2 task(s))" in again.stdout
    assert "nothing ran: every task had finished before this run" in said(again)
    assert "nothing ran" not in said(result)


def test_a_run_refuses_a_check_the_graph_file_changed_until_the_operator_gives_it(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(
        "checks:\n  test: python -c pass\n  lint: python -c 'print(1)'\n"
        "tasks:\n  - {id: T1, title: a, description: d, verify: test}\n"
    )
    (repo / "script.yaml").write_text("T1:\n- write: {path: a.txt, content: x}\n")
    run = ("run", "--dry-run", "--script", "script.yaml", "--server", server.url)
    assert cli(*run).exit_code == 0
    graph.write_text(graph.read_text().replace("test: python -c pass", "test: python -c 1"))

    refused = cli(*run)  # no terminal: nobody can say yes
    again = cli(*run, "--check", "test=python -c 1")

    assert refused.exit_code == 1, said(refused)
    assert (
        "check test changed in codefleet.yaml: it was `python -c pass`, now `python -c 1`; "
        "not applied. To apply it, run again with --check 'test=python -c 1'; to keep the old "
        "one, restore codefleet.yaml" in said(refused)
    )
    assert again.exit_code == 0, said(again)
    assert f"{graph}: check test is now `python -c 1` (it was `python -c pass`)" in said(again)
    assert "check lint" not in said(again)


def test_a_dry_run_refuses_tasks_its_script_does_not_cover_and_names_them(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "half.yaml").write_text("T1:\n- write: {path: CONTRIBUTING.md, content: x}\n")

    no_script = cli("run", "--dry-run", "--server", server.url)
    half = cli("run", "--dry-run", "--script", "half.yaml", "--server", server.url)

    assert no_script.exit_code == 1
    assert "--dry-run needs --script FILE" in said(no_script)
    assert half.exit_code == 1
    assert "has no script for task(s) T2" in said(half)
    assert "PASS" not in half.stdout
    assert not (repo / "CONTRIBUTING.md").exists()


def test_without_a_key_run_names_only_options_that_exist(repo: Path, server: ServerThread) -> None:
    result = cli("run", "--server", server.url)
    offline_alone = cli("run", "--offline", "--server", server.url)

    assert result.exit_code == 1
    message = said(result)
    assert "ANTHROPIC_API_KEY or a Claude login" in message
    suggested = set(re.findall(r"--[a-z][a-z-]+", message))
    flags = said(cli("run", "--help"))
    assert suggested >= {"--dry-run", "--script", "--offline", "--model-script"}
    assert all(flag in flags for flag in suggested)
    assert offline_alone.exit_code == 1
    assert "--offline needs --model-script FILE" in said(offline_alone)


def test_a_run_in_another_directory_than_the_servers_tree_is_refused(
    repo: Path, server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (elsewhere / "s.yaml").write_text("{}\n")

    result = cli("run", "--dry-run", "--script", "s.yaml", "--server", server.url)

    assert result.exit_code == 1
    assert f"serves the tree {repo.resolve()}, but this run's tree is {elsewhere}" in said(result)


def test_a_failed_run_is_recovered_with_retry_and_a_second_run(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "bad.yaml").write_text("T1:\n- fail: not today\nT2: []\n")
    (repo / "script.yaml").write_text(SCRIPT)

    failed = cli("run", "--dry-run", "--script", "bad.yaml", "--server", server.url)
    listed = cli("tasks", "--status", "failed", "--server", server.url, "--json")
    retried = cli("retry", "--failed", "--server", server.url)
    fixed = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)

    assert failed.exit_code == 1 and "FAIL" in failed.stdout
    assert '"id": "T1"' in listed.stdout
    assert retried.exit_code == 0, said(retried)
    assert "T1: pending again" in retried.stdout
    assert fixed.exit_code == 0, said(fixed)
    assert "PASS" in fixed.stdout


def test_after_retry_the_earlier_attempts_stay_in_the_table_the_task_and_the_report(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "bad.yaml").write_text("T1:\n- fail: not today\nT2: []\n")
    (repo / "script.yaml").write_text(SCRIPT)
    assert cli("run", "--dry-run", "--script", "bad.yaml", "--server", server.url).exit_code == 1
    assert cli("retry", "T1", "--server", server.url).exit_code == 0

    fixed = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)
    table = cli("tasks", "--server", server.url)
    task = cli("tasks", "T1", "--server", server.url)
    report = cli("report", "--server", server.url)

    assert fixed.exit_code == 0, said(fixed)
    assert re.search(r"T1 .* succeeded .* 1/3 \+3 before retry", said(table)), said(table)
    assert "attempts: 1 of 3 charged · 3 before the last retry (kept, not charged)" in said(task)
    assert re.search(r"\| T1 \| .* \| 1/3 \+3 before retry \|", report.stdout), report.stdout


def test_landing_before_a_load_names_the_integration_check_the_graph_here_names(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0

    before = cli("landing", "--server", server.url)
    assert cli("load", "--server", server.url).exit_code == 0
    after = cli("landing", "--server", server.url)

    assert before.exit_code == 0, said(before)
    assert "integration check: none on this server yet; codefleet.yaml names `test`" in said(before)
    assert said(after).startswith("integration check: test landed: 0")


def test_cancel_then_retry_one_task_by_id(repo: Path, server: ServerThread) -> None:
    assert cli("init").exit_code == 0
    assert cli("load", "--server", server.url).exit_code == 0

    cancelled = cli("cancel", "T2", "--server", server.url)
    shown = cli("tasks", "T2", "--server", server.url)
    retried = cli("retry", "T2", "--server", server.url)
    again = cli("cancel", "T404", "--server", server.url)

    assert cancelled.exit_code == 0 and "T2: cancelled" in cancelled.stdout
    assert shown.exit_code == 0
    assert "T2 · Point the README to CONTRIBUTING.md" in shown.stdout
    assert "cancelled" in shown.stdout and "depends on" in shown.stdout
    assert retried.exit_code == 0 and "T2: pending again" in retried.stdout
    assert again.exit_code == 1 and "no task T404" in said(again)


def test_tasks_id_is_readable_json_with_json_and_a_patch_with_no_change_says_so(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    assert cli("load", "--server", server.url).exit_code == 0

    readable = cli("tasks", "T1", "--server", server.url)
    as_json = cli("tasks", "T1", "--server", server.url, "--json")
    patch = cli("tasks", "T1", "--patch", "--server", server.url)
    bogus = cli("tasks", "--status", "bogus", "--server", server.url)

    assert not readable.stdout.lstrip().startswith("{")
    assert "T1 · Write CONTRIBUTING.md" in readable.stdout
    assert "nothing recorded" in readable.stdout
    assert as_json.stdout.lstrip().startswith("{") and '"id": "T1"' in as_json.stdout
    assert patch.exit_code == 0 and patch.stdout == ""
    assert "task T1 has no recorded change" in said(patch)
    assert bogus.exit_code == 1
    assert "unknown status 'bogus': one of pending, assigned," in said(bogus)


def test_rich_markup_in_user_text_is_printed_as_it_is(repo: Path, server: ServerThread) -> None:
    (repo / "g.yaml").write_text(
        "checks:\n  Unit Tests: pytest\ntasks:\n  - {id: A, title: a, description: d}\n"
    )
    (repo / "h.yaml").write_text(
        "tasks:\n  - {id: B, title: '[bold]B[/bold] in [red]', description: d}\n"
    )

    bad_name = cli("load", "g.yaml", "--server", server.url)
    assert cli("load", "h.yaml", "--server", server.url).exit_code == 0
    listed = cli("tasks", "--server", server.url)

    assert bad_name.exit_code == 1
    assert "'^[a-z][a-z0-9_-]{0,31}$'" in said(bad_name)
    assert "[bold]B[/bold] in [red]" in listed.stdout


def test_piped_output_keeps_long_lines_whole(repo: Path, server: ServerThread) -> None:
    deep = repo / ("very-long-directory-name-" * 4).rstrip("-")
    deep.mkdir()
    (deep / "codefleet.yaml").write_text("tasks:\n  - {id: L, title: long, description: d}\n")

    result = cli("load", str(deep / "codefleet.yaml"), "--server", server.url)

    first = result.stdout.splitlines()[0]
    assert len(first) > 100 and first.endswith(str(deep / "codefleet.yaml"))


def test_serve_on_a_busy_port_fails_before_its_banner_and_creates_no_database(
    repo: Path, tmp_path: Path
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]

        result = cli("serve", "--port", str(port))

    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in said(result)
    assert "CodeFleet server on" not in result.stdout
    assert not (repo / ".codefleet").exists()


def test_doctor_checks_the_graph_by_the_loaders_rules_and_names_a_claude_login(
    repo: Path,
) -> None:
    (repo / "codefleet.yaml").write_text(
        "tasks:\n  - {id: A, title: a, description: d, file_scope: [../../etc/passwd]}\n"
    )

    result = cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)}

    assert checks["graph"]["ok"] is False
    assert (
        "'../../etc/passwd': ../../etc/passwd resolves outside the working tree"
        in (checks["graph"]["detail"])
    )
    assert "Claude login" in checks["api-key"]["detail"]
    assert "auth login" in checks["api-key"]["hint"]


def first_line(args: list[str], cwd: Path) -> str:
    """Start `codefleet ARGS` in `cwd`, read its first line, stop it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "codefleet.cli", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        return proc.stdout.readline().rstrip("\n")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_in_a_repository_serves_it_and_keeps_its_state_in_an_ignored_dot_codefleet(
    repo: Path,
) -> None:
    line = first_line(["serve", "--port", "0"], repo)

    assert re.fullmatch(
        rf"CodeFleet server on http://127\.0\.0\.1:\d+ · tree {re.escape(str(repo))} "
        r"· db \.codefleet/codefleet\.db",
        line,
    ), line
    assert (repo / ".codefleet" / "codefleet.db").is_file()
    assert (repo / ".codefleet" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_watch_and_a_runner_name_their_tree_on_their_first_line(
    repo: Path, server: ServerThread
) -> None:
    (repo / "s.yaml").write_text("{}\n")

    watched = first_line(["watch", "--server", server.url], repo)
    ran = first_line(
        ["runner", "--name", "r1", "--dry-run", "--script", "s.yaml", "--server", server.url], repo
    )

    assert watched == f"watch: tree {repo} · server {server.url}"
    assert ran == f"r1: tree {repo} · server {server.url}"


@pytest.mark.parametrize("flags", [["--dry-run", "--script"], ["--offline", "--model-script"]])
def test_a_broken_script_file_is_an_error_naming_the_file(
    repo: Path, server: ServerThread, flags: list[str]
) -> None:
    (repo / "broken.yaml").write_text("T1: [unclosed\n")

    result = cli("run", *flags, "broken.yaml", "--server", server.url)
    missing = cli("run", *flags, "absent.yaml", "--server", server.url)

    assert result.exit_code == 1 and "broken.yaml is not valid YAML" in said(result)
    assert missing.exit_code == 1 and "cannot read " in said(missing)
    assert "absent.yaml: No such file or directory" in said(missing)
    assert "Traceback" not in said(result) + said(missing)


def test_runners_that_run_started_leave_the_server_when_it_ends_even_with_nothing_to_do(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "bad.yaml").write_text("T1:\n- fail: not today\nT2: []\n")
    assert cli("load", "--server", server.url).exit_code == 0
    assert cli("cancel", "T1", "--server", server.url).exit_code == 0  # T2 is blocked by it

    idle = cli("run", "--dry-run", "--script", "bad.yaml", "--server", server.url, "-n", "3")

    agents = asyncio.run(_agents(server.url))
    assert idle.exit_code == 1, said(idle)
    assert agents and {a["status"] for a in agents} == {"offline"}, agents  # none left behind
    assert "interrupted" not in idle.stdout + idle.stderr  # a run that ended is no interrupt


async def _agents(url: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return await client.agents()


GRAPH = """\
tasks:
  - {id: T1, title: Write CONTRIBUTING.md, description: d}
  - {id: T2, title: Point the README to it, description: d, depends_on: [T1]}
"""


def test_run_loads_only_the_new_tasks_of_an_edited_graph_and_updates_the_changed_ones(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    (repo / "codefleet.yaml").write_text(
        GRAPH.replace("Point the README to it", "Point the README to CONTRIBUTING.md")
        + "  - {id: T3, title: Add a changelog, description: d, depends_on: [T1]}\n"
    )
    (repo / "script.yaml").write_text(SCRIPT + "T3:\n- write: {path: CHANGES.md, content: x}\n")

    result = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)

    assert result.exit_code == 0, said(result)
    assert f"{repo / 'codefleet.yaml'}: loaded 1 new task(s): T3 (2 already loaded)" in said(result)
    assert "T2: not started yet, its definition was updated" in said(result)  # nothing ran
    assert (repo / "CHANGES.md").read_text() == "x"


def test_cancel_of_several_tasks_cancels_what_it_can_and_names_the_rest(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(
        GRAPH + "  - {id: T3, title: Add a changelog, description: d}\n"
    )
    assert cli("load", "--server", server.url).exit_code == 0

    result = cli("cancel", "T1", "T2", "T404", "T3", "--server", server.url)
    listed = cli("tasks", "--json", "--server", server.url)

    assert result.exit_code == 1
    assert "T1: cancelled" in result.stdout and "T3: cancelled" in result.stdout
    assert "T2: not cancelled: task T2 is already blocked_upstream" in said(result)
    assert "T404: not cancelled: no task T404" in said(result)
    assert "2 of 4 task(s) cancelled" in said(result)
    statuses = {t["id"]: t["status"] for t in json.loads(listed.stdout)}
    assert statuses == {"T1": "cancelled", "T2": "blocked_upstream", "T3": "cancelled"}


def test_a_scripted_run_asks_only_for_scripts_of_tasks_that_can_run(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(
        GRAPH + "  - {id: T3, title: Add a changelog, description: d}\n"
    )
    assert cli("load", "--server", server.url).exit_code == 0
    assert cli("cancel", "T1", "--server", server.url).exit_code == 0  # T2 is blocked by it
    (repo / "t3.yaml").write_text("T3:\n- write: {path: CHANGES.md, content: x}\n")

    result = cli("run", "--dry-run", "--script", "t3.yaml", "--server", server.url)

    assert "has no script" not in said(result)
    assert (repo / "CHANGES.md").read_text() == "x"
    assert result.exit_code == 1  # T1 and T2 did not succeed: the verdict says so


def piped(*args: str) -> str:
    """`codefleet ARGS` with standard output a pipe (as in `codefleet ARGS | cat`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "COLUMNS": "80"},
        timeout=120,
        check=False,
    )
    return done.stdout


async def agents_of(url: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return await client.agents()


def test_after_a_second_run_the_first_run_s_runners_are_called_earlier(
    repo: Path, server: ServerThread
) -> None:
    assert cli("init").exit_code == 0
    (repo / "bad.yaml").write_text("T1:\n- fail: not today\nT2: []\n")
    (repo / "script.yaml").write_text(SCRIPT)
    piped("run", "--dry-run", "--script", "bad.yaml", "--server", server.url)
    first = {a["name"] for a in asyncio.run(agents_of(server.url))}
    assert cli("retry", "T1", "--server", server.url).exit_code == 0

    piped("run", "--dry-run", "--script", "script.yaml", "--server", server.url)  # its own pid

    agents = asyncio.run(agents_of(server.url))
    earlier = {a["name"] for a in agents if a["earlier"]}
    assert earlier == first and len(first) == 3
    assert len([a for a in agents if not a["earlier"]]) == 3  # this run's, offline now too
    assert {a["status"] for a in agents} == {"offline"}


LONG_PATH = "src/" + "/".join(["a-rather-long-package-directory-name"] * 3) + "/module.py"
LONG_WORDS = " ".join(f"word{i:03d}" for i in range(40))
COLOURED_GRAPH = f"""\
checks:
  lint: "printf '\\\\033[31mE501 line too long\\\\033[0m\\\\n'; exit 1"
tasks:
  - id: T4
    title: A task whose title is long enough to be cropped in a narrow table column
    description: {LONG_WORDS}
    file_scope: [{LONG_PATH}]
    verify: lint
    max_attempts: 1
"""


def test_piped_output_is_whole_plain_lines_with_no_colour_codes(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(COLOURED_GRAPH)
    (repo / "s.yaml").write_text(f"T4:\n- write: {{path: {LONG_PATH}, content: x}}\n")
    assert cli("run", "--dry-run", "--script", "s.yaml", "--server", server.url).exit_code == 1

    shown = piped("tasks", "T4", "--server", server.url)
    listed = piped("tasks", "--server", server.url)

    assert LONG_WORDS in shown
    assert LONG_PATH in shown
    assert "E501 line too long" in shown and "\x1b" not in shown
    assert "A task whose title is long enough to be cropped in a narrow table column" in listed
    assert "E501 line too long" in listed and "\x1b" not in listed


def test_doctor_without_a_key_or_a_login_warns_about_the_key_and_still_passes(
    repo: Path,
) -> None:
    result = cli("doctor")
    as_json = cli("doctor", "--json")

    key_line = next(line for line in result.stdout.splitlines() if "api-key" in line)
    assert key_line.split()[:2] == ["warn", "api-key"], key_line
    assert "no ANTHROPIC_API_KEY and no Claude login" in key_line
    checks = {c["name"]: c for c in json.loads(as_json.stdout)}
    assert checks["api-key"]["ok"] is False and checks["api-key"]["required"] is False
    failed = [c["name"] for c in checks.values() if not c["ok"] and c["required"]]
    assert result.exit_code == (1 if failed else 0), failed


def test_demo_without_a_key_refuses_before_starting_anything(repo: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"

    result = cli("demo", "--run-dir", str(runs))

    assert result.exit_code == 1
    assert "real Claude sessions need ANTHROPIC_API_KEY or a Claude login" in said(result)
    assert "CodeFleet demo" not in result.stdout and "server" not in result.stdout
    assert not runs.exists() or not any(runs.iterdir())


def test_init_scripts_after_init_writes_only_the_missing_scripts_and_keeps_the_graph(
    repo: Path,
) -> None:
    assert cli("init").exit_code == 0
    (repo / "codefleet.yaml").write_text((repo / "codefleet.yaml").read_text() + "# mine\n")

    scripts = cli("init", "--scripts")
    again = cli("init", "--scripts")

    assert scripts.exit_code == 0, said(scripts)
    assert (repo / "codefleet.yaml").read_text().endswith("# mine\n")
    assert (repo / "codefleet.script.yaml").is_file() and (repo / "codefleet.model.yaml").is_file()
    assert "kept codefleet.yaml (it exists;" in said(scripts)
    assert "wrote codefleet.script.yaml and codefleet.model.yaml" in said(scripts)
    assert again.exit_code == 1 and "pass --force to overwrite" in said(again)


def test_init_scripts_beside_a_graph_of_other_tasks_says_which_tasks_have_no_script(
    repo: Path,
) -> None:
    (repo / "codefleet.yaml").write_text(
        "tasks:\n"
        "  - {id: T1, title: a, description: d}\n"
        "  - {id: api, title: b, description: d}\n"
        "  - {id: docs, title: c, description: d}\n"
    )

    result = cli("init", "--scripts")

    assert result.exit_code == 0, said(result)
    assert (
        "note: the scripts play the example tasks T1, T2; codefleet.yaml's tasks api, docs "
        "have no script"
    ) in said(result)


def test_load_reports_every_problem_of_the_graph_at_once(repo: Path, server: ServerThread) -> None:
    (repo / "codefleet.yaml").write_text(
        "checks:\n  test: pytest\n"
        "tasks:\n"
        "  - {id: A, title: a, description: d, file_scopes: [a.py]}\n"
        "  - {id: B, title: b, description: d, priority: 9}\n"
        "  - {id: C, title: c, description: d, depends_on: [Z], verify: lint}\n"
    )

    result = cli("load", "--server", server.url)

    message = said(result)
    assert result.exit_code == 1
    assert "4 problems" in message
    assert "task #1 (A): unknown key 'file_scopes' (did you mean file_scope?)" in message
    assert "task #2 (B): priority:" in message
    assert "task C depends on unknown task Z" in message
    assert "task C verifies with unknown check 'lint'" in message


def test_a_write_outside_the_declared_scope_is_named_in_the_log_and_the_verdict(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(
        "tasks:\n  - {id: T1, title: notes, description: d, file_scope: [NOTES.md]}\n"
    )
    (repo / "s.yaml").write_text(
        "T1:\n- write: {path: NOTES.md, content: x}\n- write: {path: docs/extra.md, content: y}\n"
    )

    result = cli("run", "--dry-run", "--script", "s.yaml", "--server", server.url)

    assert result.exit_code == 0, said(result)
    lines = result.stdout.splitlines()
    logged = [line for line in lines if "outside its declared scope" in line]
    assert logged and "T1 wrote docs/extra.md outside its declared scope (NOTES.md)" in logged[0]
    verdict = said(result)[said(result).index("PASS") :]
    assert "1 file(s) written outside declared scopes (T1: docs/extra.md)" in verdict
    assert "NOTES.md outside" not in said(result)


def test_run_reports_every_unknown_reference_of_its_new_tasks_at_once(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(
        "tasks:\n"
        "  - {id: A, title: a, description: d, depends_on: [Y]}\n"
        "  - {id: B, title: b, description: d, depends_on: [Z], verify: lint}\n"
    )
    (repo / "s.yaml").write_text("A: []\nB: []\n")

    result = cli("run", "--dry-run", "--script", "s.yaml", "--server", server.url)

    message = said(result)
    assert result.exit_code == 1
    assert "3 problems" in message
    assert "task A depends on unknown task Y" in message
    assert "task B depends on unknown task Z" in message
    assert "task B verifies with unknown check 'lint'" in message
