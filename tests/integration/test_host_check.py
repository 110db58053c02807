"""DNS rebinding: a server without a token answers only to loopback Host names.

A web page on `attacker-rebound.example` whose name the attacker re-points at
127.0.0.1 makes the operator's browser send requests to the server with
`Host: attacker-rebound.example`. Without a token nothing else stands in the
way, so such a request is refused (403 `host_not_allowed`) before any handler
runs; loopback literals and the configured names (`CODEFLEET_ALLOWED_HOSTS`,
default `localhost`) are served. With a token the token is the guard. An empty
or whitespace token is refused wherever it is given, instead of silently
meaning "no token".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from corpus_support import assert_envelope
from pydantic import ValidationError
from typer.testing import CliRunner, Result

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.config import Settings
from codefleet.server.thread import ServerThread, free_port

REBOUND = "attacker-rebound.example"


def send(
    server: ServerThread, method: str, path: str, host: str, **kwargs: object
) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        return http.request(method, path, headers={"Host": host}, **kwargs)  # type: ignore[arg-type]


TASK = {"tasks": [{"id": "EVIL", "title": "t", "description": "exfiltrate"}]}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/tasks", TASK),
        ("GET", "/tasks", None),
        ("GET", "/health", None),
        ("GET", "/", None),
        ("GET", "/events", None),
    ],
)
def test_without_a_token_a_request_for_another_host_name_is_refused_before_any_handler(
    server: ServerThread, method: str, path: str, body: object
) -> None:
    refused = send(server, method, path, f"{REBOUND}:{server.settings.port}", json=body)

    assert_envelope(refused, 403, "host_not_allowed")
    assert REBOUND in refused.json()["error"]["message"]
    tasks = send(server, "GET", "/tasks", f"127.0.0.1:{server.settings.port}").json()["tasks"]
    assert tasks == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LocalHost", "[::1]"])
def test_loopback_names_are_served_with_or_without_the_port(
    server: ServerThread, host: str
) -> None:
    for spelled in (host, f"{host}:{server.settings.port}"):
        assert send(server, "GET", "/tasks", spelled).status_code == 200, spelled


@pytest.mark.parametrize(
    "host", ["", "localhost.attacker.example", "127.0.0.1.nip.io", "localhost:80@evil"]
)
def test_near_misses_and_an_empty_host_are_refused(server: ServerThread, host: str) -> None:
    assert send(server, "GET", "/tasks", host).status_code == 403


def test_the_allow_list_is_configurable(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(allowed_hosts="fleet.internal, dev-box")

    assert send(server, "GET", "/tasks", "fleet.internal:1234").status_code == 200
    assert send(server, "GET", "/tasks", "DEV-BOX").status_code == 200
    assert send(server, "GET", "/tasks", "127.0.0.1").status_code == 200  # literals stay
    assert send(server, "GET", "/tasks", "localhost").status_code == 403  # not on this list
    assert send(server, "GET", "/tasks", REBOUND).status_code == 403


def test_with_a_token_the_token_is_the_guard_not_the_host_name(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server(token="t0ken")
    auth = {"Authorization": "Bearer t0ken"}

    with httpx.Client(base_url=server.url, timeout=10) as http:
        named = http.get("/tasks", headers={"Host": "fleet.example.org", **auth})
        anonymous = http.get("/tasks", headers={"Host": REBOUND})

    assert named.status_code == 200
    assert anonymous.status_code == 401


# -- an empty or whitespace token ---------------------------------------------------------------


@pytest.mark.parametrize("token", ["", " ", "\t\n", " padded "])
def test_an_empty_whitespace_or_padded_token_is_a_settings_error(token: str) -> None:
    with pytest.raises(ValidationError, match="token"):
        Settings(_env_file=None, token=token)  # type: ignore[call-arg]


@pytest.mark.parametrize("token", ["", "   "])
def test_the_client_refuses_an_empty_token(token: str) -> None:
    with pytest.raises(ValueError, match="token"):
        FleetClient("http://127.0.0.1:1", token=token)


def invoke(args: list[str], **env: str) -> Result:
    cleared: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CODEFLEET_")}
    return CliRunner().invoke(app, args, env={**cleared, **env})


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["tasks", "--token", "  "], {}),
        (["tasks"], {"CODEFLEET_TOKEN": ""}),
        (["serve", "--token", " "], {}),
    ],
    ids=["a client flag", "the environment", "the server flag"],
)
def test_the_cli_refuses_an_empty_token_with_one_line_naming_the_setting(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    (tmp_path / "tree").mkdir()
    where = (
        [
            "--workdir",
            str(tmp_path / "tree"),
            "--db",
            str(tmp_path / "db.sqlite"),
            "--port",
            str(free_port()),
        ]
        if args[0] == "serve"
        else []
    )

    done = invoke([*args, *where], **env)

    said = " ".join(done.stderr.split())
    assert done.exit_code == 1, done.output
    assert "Traceback" not in done.output + done.stderr
    assert "CODEFLEET_TOKEN" in said and "empty" in said
    assert not (tmp_path / "db.sqlite").exists()
