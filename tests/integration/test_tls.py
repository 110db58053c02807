"""Runners on other hosts over TLS: `serve --tls-cert/--tls-key`, `runner --server https://...`
(issue 33 item 3).

The test makes its own self-signed certificate (the `openssl` binary: the
`cryptography` package is not one of CodeFleet's dependencies) for
127.0.0.1, and the clients trust it the standard way, `SSL_CERT_FILE`, which
both httpx (the runner, the CLI) and the standard library (`codefleet hook`)
read. A runner process over https with the token takes its task and writes
through the lock; the hook of a person's session gets its lease over https;
a runner that does not trust the certificate stops at once, saying how to
trust it, instead of retrying for ever; `serve` wants both files or neither.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from tool_support import require_tool
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.server.thread import ServerThread, free_port

TOKEN = "tls-fleet-token"
CLI = [sys.executable, "-m", "codefleet.cli"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate and its key for 127.0.0.1 and localhost, one day long."""
    openssl = require_tool("openssl", "a self-signed certificate for the TLS server")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=codefleet-test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def tls_server(
    make_server: Callable[..., ServerThread], certificate: tuple[Path, Path]
) -> ServerThread:
    cert, key = certificate
    return make_server(token=TOKEN, tls_cert=cert, tls_key=key)


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "SSL_"))}
    return {**clean, **extra}


def runner(server: ServerThread, tmp_path: Path, workdir: Path) -> list[str]:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"T": [{"write": {"path": "a.py", "content": "A = 2\n"}}]}))
    return [
        *CLI,
        "runner",
        "--name",
        "far",
        "--dry-run",
        "--script",
        str(script),
        "--server",
        server.url,
        "--token",
        TOKEN,
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
        "--exit-when-drained",
    ]


async def test_a_runner_over_https_with_the_token_takes_its_task_and_writes_through_the_lock(
    tls_server: ServerThread,
    certificate: tuple[Path, Path],
    workdir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cert, _ = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # this test's own client trusts it too
    assert tls_server.url.startswith("https://")
    async with FleetClient(tls_server.url, token=TOKEN) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "d"}])

    done = subprocess.run(
        runner(tls_server, tmp_path, workdir),
        capture_output=True,
        text=True,
        timeout=120,
        env=env(SSL_CERT_FILE=str(cert)),
    )

    assert done.returncode == 0, done.stderr
    assert (workdir / "a.py").read_text() == "A = 2\n"
    async with FleetClient(tls_server.url, token=TOKEN) as client:
        task = await client.task("T")
        leased = await client.events(type_="lease_acquired")
    assert task["status"] == "succeeded"
    assert [e["payload"]["path"] for e in leased] == ["a.py"]


def test_a_runner_that_does_not_trust_the_certificate_stops_at_once_saying_how_to(
    tls_server: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        runner(tls_server, tmp_path, workdir),
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "not trusted" in said and "SSL_CERT_FILE" in said


def test_the_hook_of_a_persons_session_gets_its_lease_over_https(
    tls_server: ServerThread, certificate: tuple[Path, Path], workdir: Path
) -> None:
    cert, _ = certificate
    call = {
        "session_id": "s-1",
        "cwd": str(workdir),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(workdir / "a.py")},
    }
    argv = [
        *CLI[:2],
        "codefleet",
        "hook",
        "pre-tool-use",
        "--server",
        tls_server.url,
        "--tree",
        str(workdir),
    ]

    def hook(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            input=json.dumps(call),
            capture_output=True,
            text=True,
            timeout=60,
            env=env(CODEFLEET_TOKEN=TOKEN, USER="ada", **extra),
        )

    trusted = hook(SSL_CERT_FILE=str(cert))
    untrusted = hook()

    assert (trusted.returncode, trusted.stdout) == (0, "")  # no objection: the lease is held
    reason = json.loads(untrusted.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "CERTIFICATE_VERIFY_FAILED" in reason and "refused" in reason


@pytest.mark.parametrize("given", ["--tls-cert", "--tls-key"])
def test_serve_wants_both_the_certificate_and_its_key(
    tmp_path: Path, certificate: tuple[Path, Path], given: str
) -> None:
    (tmp_path / "tree").mkdir()
    cert, key = certificate
    files = ["--workdir", str(tmp_path / "tree"), "--db", str(tmp_path / "db.sqlite")]
    one = [given, str(cert if given == "--tls-cert" else key)]

    done = CliRunner().invoke(
        app,
        ["serve", "--port", str(free_port()), *files, *one],
        env={k: None for k in os.environ if k.startswith("CODEFLEET_")},
    )  # type: ignore[arg-type]

    said = " ".join(done.stderr.split())
    assert done.exit_code == 1
    assert "--tls-cert" in said and "--tls-key" in said
    assert not (tmp_path / "db.sqlite").exists()


def test_doctor_on_a_host_that_does_not_trust_the_certificate_fails_saying_how_to(
    tls_server: ServerThread, workdir: Path
) -> None:
    argv = ["doctor", "--json", "--server", tls_server.url, "--token", TOKEN]
    done = CliRunner().invoke(app, [*argv, "--workdir", str(workdir)], env=env())  # type: ignore[arg-type]

    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert done.exit_code == 1
    assert "port" not in checks  # a server named with --server is not a local port to bind
    assert checks["server"]["ok"] is False
    assert "not trusted" in checks["server"]["detail"]
    assert "SSL_CERT_FILE" in checks["server"]["detail"] + checks["server"]["hint"]


def test_doctor_fails_a_server_named_with_server_that_does_not_answer(workdir: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = CliRunner().invoke(  # type: ignore[arg-type]
        app, ["doctor", "--json", "--server", url, "--workdir", str(workdir)], env=env()
    )

    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert done.exit_code == 1
    assert checks["server"]["ok"] is False and url in checks["server"]["detail"]


def test_a_runner_told_https_for_a_plain_http_server_stops_at_once_saying_so(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    plain = make_server(token=TOKEN)
    https = plain.url.replace("http://", "https://")
    argv = runner(plain, tmp_path, workdir)
    argv[argv.index(plain.url)] = https

    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env())

    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "does not speak TLS" in said and "http://" in said
