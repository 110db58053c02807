"""The state directory follows no link, and a server record is believed only where it is yours.

A repository that commits `.codefleet/` entries as links (or a FIFO) must not make
`serve` write outside the tree nor hang: it is refused with one line naming the path
(issue 51 item 2). A record another user could have written or held, a FIFO, a link, a
record that names another directory, or one whose URL is not a CodeFleet server never
gets the user's token: the command says one line, without a traceback (issue 51 item 3).
The token is watched for by a plain HTTP server that records every request's
`Authorization`; every command runs as a real `codefleet` process.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from serve_support import START_BOUND_S

from codefleet.server.thread import free_port
from codefleet.statedir import ensure_tree_id
from codefleet.treelock import refuse_if_served

CLI = [sys.executable, "-m", "codefleet"]  # as the `codefleet` executable: the fast commands too
TOKEN = "the-users-secret-token"
NOBODY = 65534


class Recorder(BaseHTTPRequestHandler):
    """Answers `{}` to everything and keeps what it was sent."""

    seen: list[tuple[str, str, str | None]]

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b"{}"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    seen: list[tuple[str, str, str | None]] = []
    handler = type("Seen", (Recorder,), {"seen": seen})
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}", seen
    http.shutdown()
    http.server_close()
    thread.join()


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env={**env, "CODEFLEET_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=START_BOUND_S,
    )


def _record(tree: Path, url: str, workdir: Path | None = None) -> dict[str, object]:
    return {"url": url, "pid": 4242, "host": None, "db": "x.db", "workdir": str(workdir or tree)}


@pytest.fixture
def held() -> Iterator[list[int]]:
    """Descriptors whose exclusive `flock` makes a record look like a live server's."""
    fds: list[int] = []
    yield fds
    for fd in fds:
        os.close(fd)


def _hold(path: Path, fds: list[int]) -> None:
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fds.append(fd)


def _write_record(state: Path, record: dict[str, object], fds: list[int]) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    (state / "server.json").write_text(json.dumps(record))
    _hold(state / "server.json", fds)
    return state / "server.json"


def _graph(workdir: Path) -> Path:
    """A one-task `codefleet.yaml` in `workdir`, and the dry-run script `run` plays for it."""
    (workdir / "codefleet.yaml").write_text("tasks:\n  - {id: T1, title: t, description: d}\n")
    script = workdir.parent / "script.yaml"
    script.write_text("T1: []\n")
    return script


def _repo(parent: Path) -> Path:
    repo = parent / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def _untrusted(kind: str, base: Path, url: str, fds: list[int]) -> None:
    """`base/.codefleet` holds a held record naming `url`, made untrustworthy by `kind`."""
    state = base / ".codefleet"
    if kind == "another user's directory":
        _write_record(state, _record(base, url), fds)
        os.chown(state / "server.json", NOBODY, NOBODY)
        os.chown(state, NOBODY, NOBODY)
    elif kind == "a directory others may write":
        _write_record(state, _record(base, url), fds)
        state.chmod(0o777)
    elif kind == "a symbolic link":
        outside = base.parent / "elsewhere.json"
        outside.write_text(json.dumps(_record(base, url)))
        _hold(outside, fds)
        state.mkdir()
        (state / "server.json").symlink_to(outside)
    elif kind == "a FIFO":
        state.mkdir()
        os.mkfifo(state / "server.json")


@pytest.mark.parametrize(
    "kind",
    ["another user's directory", "a directory others may write", "a symbolic link", "a FIFO"],
)
def test_a_record_in_a_directory_above_the_repository_that_is_not_only_yours_is_never_believed(
    tmp_path: Path,
    recorder: tuple[str, list[tuple[str, str, str | None]]],
    held: list[int],
    kind: str,
) -> None:
    url, seen = recorder
    base = tmp_path / "shared"  # as /tmp: another user's .codefleet above every repository
    repo = _repo(base)
    _untrusted(kind, base, url, held)

    found = _cli(repo, "tasks")
    full = _cli(repo, "landing")

    refuse_if_served(repo)  # serve in the repository is not refused by that record
    assert seen == []  # not even /health: the token, the graph, nothing reached it
    for done in (found, full):
        assert done.returncode != 0
        assert url not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert "no CodeFleet server answers at http://127.0.0.1:8099" in done.stderr


def test_a_held_record_naming_another_directory_gets_nothing_and_one_line(
    workdir: Path, recorder: tuple[str, list[tuple[str, str, str | None]]], held: list[int]
) -> None:
    url, seen = recorder
    ensure_tree_id(workdir)
    _write_record(workdir / ".codefleet", _record(workdir, url, Path("/srv/other")), held)

    for done in (_cli(workdir, "tasks"), _cli(workdir, "landing")):
        assert done.returncode != 0
        [line] = done.stderr.splitlines()
        assert "/srv/other" in line and "nothing was sent to it" in line
    assert seen == []


def test_a_held_record_whose_url_is_not_a_codefleet_server_never_gets_the_token(
    workdir: Path, recorder: tuple[str, list[tuple[str, str, str | None]]], held: list[int]
) -> None:
    url, seen = recorder
    ensure_tree_id(workdir)
    _write_record(workdir / ".codefleet", _record(workdir, url), held)
    run = ["run", "--dry-run", "--script", str(_graph(workdir))]

    answers = [_cli(workdir, *c) for c in (["tasks"], ["say", "T1", "hi"], ["landing"], run)]

    for done in answers:
        assert done.returncode != 0
        [line] = done.stderr.splitlines()
        assert url in line and "nothing was sent to it" in line
    assert seen and all(path == "/health" and auth is None for _, path, auth in seen)


def test_a_reply_that_is_not_codefleets_is_one_line_without_a_traceback(
    workdir: Path, recorder: tuple[str, list[tuple[str, str, str | None]]]
) -> None:
    url, _ = recorder  # named by the user: it gets the token, and its answers are not believed
    run = ["run", "--dry-run", "--script", str(_graph(workdir))]

    for command in (["tasks"], ["say", "T1", "hi"], ["stats"], ["questions"], ["landing"], run):
        done = _cli(workdir, *command, "--server", url)

        assert done.returncode != 0
        [line] = done.stderr.splitlines()
        assert "no CodeFleet server sends" in line, line


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ("server.json", "link"),
        ("codefleet.db", "link"),
        ("codefleet.db-wal", "link"),
        ("tree-id", "fifo"),
        ("runs/runners/runner-1.stderr.log", "link"),
    ],
)
def test_serve_refuses_a_state_directory_with_a_link_or_fifo_naming_it_and_writes_nothing_outside(
    workdir: Path, tmp_path: Path, entry: str, kind: str
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    path = workdir / ".codefleet" / entry
    path.parent.mkdir(parents=True)
    if kind == "link":
        path.symlink_to(outside)
    else:
        os.mkfifo(path)

    done = _cli(workdir, "serve", "--port", str(free_port()))

    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert str(path) in line and "Remove it" in line
    assert outside.read_text() == "the user's own file\n"
    assert not (tmp_path / "outside.txt-wal").exists()


def test_a_state_directory_that_is_a_link_is_refused_and_nothing_is_written_there(
    workdir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workdir / ".codefleet").symlink_to(elsewhere)

    done = _cli(workdir, "serve", "--port", str(free_port()))

    assert done.returncode != 0
    assert str(workdir / ".codefleet") in done.stderr and "symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == []
