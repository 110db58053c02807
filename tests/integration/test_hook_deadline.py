"""The hook's one deadline: a server that trickles its answer can neither hold a write nor allow it.

A loopback server reads the hook's request and answers a valid `allow`, one
byte every `TRICKLE_S`: each byte comes well within any read timeout, the
whole answer well after the hook's deadline. Before, the hook timed each read,
not the exchange, so such a server kept `codefleet hook pre-tool-use` running
for as long as it liked and then the write was allowed (issue 24, item 5).
Now the exchange has one deadline (`PRE_TIMEOUT_S`, below the hook timeout
`join` writes); past it the write is refused, or allowed with a note when the
settings asked for `--fail-open`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codefleet.api.blockingclient import Unreachable, post_json
from codefleet.hook.command import PRE_TIMEOUT_S, HookArgs, run
from codefleet.hook.settings import HOOK_TIMEOUT_S

TRICKLE_S = 0.1  # between two bytes of the answer: the server's pace, not a wait of the test
ALLOW = b'{"decision":"allow"}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(ALLOW), ALLOW)
)
SESSION = "0aeef531-72cc-4552-9656-7482e7ecde15"


@pytest.fixture
def trickling() -> Iterator[str]:
    """A server answering `allow`, one byte every `TRICKLE_S` (longer in all than the deadline)."""
    assert len(ANSWER) * TRICKLE_S > 2 * PRE_TIMEOUT_S
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    def trickle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the hook hung up: nothing more to send
            conn.recv(65_536)
            for byte in ANSWER:
                if stop.wait(TRICKLE_S):
                    return
                conn.sendall(bytes([byte]))

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{port}"
    stop.set()
    listener.close()


def write_call(tree: Path) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "cwd": str(tree),
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(tree / "a.py"), "content": "x"},
        }
    )


def test_a_trickled_answer_is_cut_off_at_the_exchanges_deadline(trickling: str) -> None:
    with pytest.raises(Unreachable, match="no complete answer within 1 s"):
        post_json(trickling, "/interactive/acquire", {}, None, 1.0)


def test_the_hook_process_refuses_a_write_whose_answer_trickles(
    trickling: str, workdir: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefleet",
            "hook",
            "pre-tool-use",
            "--server",
            trickling,
            "--tree",
            str(workdir),
        ],
        input=write_call(workdir),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0
    reason = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"did not answer (no complete answer within {PRE_TIMEOUT_S:g} s)" in reason


def test_fail_open_allows_a_write_whose_answer_trickles_and_says_so(
    trickling: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = HookArgs("pre-tool-use", trickling, str(workdir), fail_open=True)

    assert run(args, write_call(workdir), {}) == ""
    assert "allowed (--fail-open)" in capsys.readouterr().err


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS loopback server answering `allow` at once; yields its URL and its certificate."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(65_536)
                    tls.sendall(ANSWER)

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://localhost:{port}", cert
    listener.close()


def test_a_server_behind_tls_is_asked_within_the_same_deadline(
    tls_server: tuple[str, Path], workdir: Path
) -> None:
    url, cert = tls_server
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefleet",
            "hook",
            "pre-tool-use",
            "--server",
            url,
            "--tree",
            str(workdir),
        ],
        input=write_call(workdir),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SSL_CERT_FILE": str(cert)},
    )

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_deadline_leaves_room_under_the_hook_timeout_join_writes() -> None:
    assert PRE_TIMEOUT_S <= HOOK_TIMEOUT_S / 2  # interpreter start and the local checks fit too
