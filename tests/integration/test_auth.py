"""The bearer token: every route but `/health` and the static web shell needs it.

Against a real server started with a token: every route the app serves
(enumerated from the app itself, so a new route is covered the day it is added)
is refused without the token, and with a wrong or mangled one, as a 401 in the
error envelope, before any handler runs; with the token none is a 401. `serve`
refuses to bind a non-loopback address without a token. The CLI commands that
talk to a server send `--token` or `CODEFLEET_TOKEN`, and say what is wrong
(with no traceback) when the server refuses them.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from corpus_support import assert_envelope
from fleet_support import server_settings
from typer.testing import CliRunner, Result

from codefleet.cli.app import app
from codefleet.server.thread import ServerThread, free_port
from codefleet.transport import guards

TOKEN = "s3cret-token-for-tests"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
PUBLIC = {
    ("GET", "/health"),
    ("GET", "/"),
    ("HEAD", "/"),
    ("GET", "/web/{name}"),
    ("HEAD", "/web/{name}"),
}
CLI = [sys.executable, "-m", "codefleet.cli"]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    root = tmp_path_factory.mktemp("auth")
    tree = root / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    settings = server_settings(root, tree, token=TOKEN, tick_interval=0.05)
    with ServerThread(settings) as server:
        yield server


def routes(server: ServerThread) -> list[tuple[str, str]]:
    """(method, path template) of every route the app serves."""
    found = set()
    for route in server.app.routes:
        for method in getattr(route, "methods", None) or ():
            found.add((method, route.path))  # type: ignore[attr-defined]
    return sorted(found)


def concrete(path: str) -> str:
    """A path template with every parameter filled (`app.js` for the shell's file name)."""
    return (
        path.replace("{name}", "app.js")
        .replace("{agent_id}", "a_000000000000")
        .replace("{task_id}", "T1")
    )


def request(
    server: ServerThread, method: str, path: str, headers: dict[str, str]
) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        if path.endswith("/stream"):  # read the status, never the endless body
            with http.stream(method, path, headers=headers) as response:
                if response.status_code != 200:
                    response.read()
                return response
        return http.request(
            method, concrete(path), headers=headers, json={} if method in ("POST", "PUT") else None
        )


def test_the_route_list_is_not_empty_and_holds_the_public_ones(guarded: ServerThread) -> None:
    listed = routes(guarded)

    assert len(listed) > 20
    assert {("GET", "/health"), ("GET", "/"), ("GET", "/web/{name}")} <= set(listed)


def test_every_route_but_health_and_the_shell_is_a_401_envelope_without_the_token(
    guarded: ServerThread,
) -> None:
    refused, served = [], []
    for method, path in routes(guarded):
        response = request(guarded, method, path, {})
        if (method, path) in PUBLIC:
            served.append((method, path, response.status_code))
            continue
        refused.append((method, path))
        if method == "HEAD":  # a HEAD answer carries no body to hold the envelope
            assert response.status_code == 401, (method, path)
        else:
            assert_envelope(response, 401, "unauthorized")

    assert refused and all(status != 401 for *_, status in served), served


def test_with_the_token_no_route_is_a_401(guarded: ServerThread) -> None:
    statuses = {(m, p): request(guarded, m, p, GOOD).status_code for m, p in routes(guarded)}

    assert [key for key, status in statuses.items() if status == 401] == []
    assert statuses[("GET", "/state")] == 200


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer wrong",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"bearer {TOKEN}",
        f"Bearer  {TOKEN}",
        TOKEN,
        "Bearer",
        f"Basic {TOKEN}",
        f"Token {TOKEN}",
    ],
    ids=[
        "wrong",
        "one char short",
        "one char long",
        "lower-case scheme",
        "two spaces",
        "no scheme",
        "empty token",
        "basic",
        "another scheme",
    ],
)
def test_a_wrong_or_mangled_token_is_refused(guarded: ServerThread, authorization: str) -> None:
    response = request(guarded, "GET", "/state", {"Authorization": authorization})

    assert_envelope(response, 401, "unauthorized")


def test_the_token_in_the_query_string_or_a_cookie_is_not_accepted(guarded: ServerThread) -> None:
    with httpx.Client(base_url=guarded.url) as http:
        by_query = http.get("/state", params={"token": TOKEN, "access_token": TOKEN})
        http.cookies.set("token", TOKEN)
        by_cookie = http.get("/state")

    assert_envelope(by_query, 401, "unauthorized")
    assert_envelope(by_cookie, 401, "unauthorized")


def test_an_unknown_route_is_a_401_so_the_api_cannot_be_mapped_without_the_token(
    guarded: ServerThread,
) -> None:
    for path in (
        "/nowhere",
        "/openapi.json",
        "/docs",
        "/health/",
        "/web/../state",
        "/web/app.js/x",
    ):
        assert_envelope(request(guarded, "GET", path, {}), 401, "unauthorized")


def test_the_refusal_happens_before_the_body_is_read_so_a_graph_posted_without_a_token_lands_nowhere(
    guarded: ServerThread,
) -> None:
    with httpx.Client(base_url=guarded.url) as http:
        refused = http.post(
            "/tasks", json={"tasks": [{"id": "SNEAK", "title": "x", "description": "do it"}]}
        )
        tasks = http.get("/tasks", headers=GOOD).json()["tasks"]

    assert_envelope(refused, 401, "unauthorized")
    assert "SNEAK" not in {t["id"] for t in tasks}


def test_the_token_is_compared_in_constant_time() -> None:
    source = textwrap.dedent(inspect.getsource(guards.Guards.refusal))
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    compares = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Compare)]

    assert any(ast.unparse(c.func) == "hmac.compare_digest" for c in calls)
    assert not [
        ast.unparse(c)
        for c in compares
        if "expected" in ast.unparse(c) and "None" not in ast.unparse(c)
    ]


# -- serve refuses to listen off loopback without a token ------------------------------------


def invoke(args: list[str], **env: str) -> Result:
    """The CLI in process, with no `CODEFLEET_*` from this environment but `env`."""
    cleared: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CODEFLEET_")}
    return CliRunner().invoke(app, args, env={**cleared, **env})


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--host", "0.0.0.0"], {}),
        (["--host", "::"], {}),
        (["--host", "192.0.2.10"], {}),
        ([], {"CODEFLEET_HOST": "0.0.0.0"}),
    ],
    ids=["0.0.0.0", "::", "a LAN address", "the host from the environment"],
)
def test_serve_refuses_a_non_loopback_address_without_a_token(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    (tmp_path / "tree").mkdir()
    files = ["--workdir", str(tmp_path / "tree"), "--db", str(tmp_path / "db.sqlite")]

    done = invoke(["serve", "--port", str(free_port()), *files, *args], **env)

    said = " ".join(done.stderr.split())
    assert done.exit_code == 1
    assert "refusing to bind" in said and "CODEFLEET_TOKEN" in said
    assert not (tmp_path / "db.sqlite").exists()  # it stopped before opening anything


# -- the CLI sends the token -------------------------------------------------------------------


def test_the_cli_sends_the_token_from_the_flag_or_the_environment_and_names_the_fix_without_it(
    guarded: ServerThread, tmp_path: Path
) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text("tasks:\n  - {id: CLI1, title: from the cli, description: d}\n")
    server = ["--server", guarded.url]

    no_token = invoke(["tasks", "--json", *server])
    wrong = invoke(["tasks", "--json", *server, "--token", "nope"])
    by_flag = invoke(["load", str(graph), *server, "--token", TOKEN])
    by_env = invoke(["tasks", "CLI1", "--json", *server], CODEFLEET_TOKEN=TOKEN)

    said = {name: " ".join(r.stderr.split()) for name, r in (("none", no_token), ("wrong", wrong))}
    assert no_token.exit_code == wrong.exit_code == 1
    assert all("pass --token or set CODEFLEET_TOKEN" in text for text in said.values())
    assert "it needs a token" in said["none"] and "the token given was refused" in said["wrong"]
    assert by_flag.exit_code == 0, by_flag.output
    assert by_env.exit_code == 0 and '"id": "CLI1"' in by_env.stdout


def test_run_and_a_runner_process_send_the_token_and_a_runner_without_it_stops_with_a_message(
    guarded: ServerThread, tmp_path: Path
) -> None:
    tree = Path(guarded.settings.workdir)
    with httpx.Client(base_url=guarded.url, headers=GOOD) as http:
        http.post(
            "/tasks", json={"tasks": [{"id": "RUN1", "title": "r", "description": "do it"}]}
        ).raise_for_status()
    script = tmp_path / "script.yaml"
    script.write_text("RUN1: []\nCLI1: []\n")  # scripted to change nothing (CLI1: another test's)
    common = [
        "--dry-run",
        "--script",
        str(script),
        "--server",
        guarded.url,
        "--workdir",
        str(tree),
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    runner = [*CLI, "runner", "--exit-when-drained", *common]

    refused = subprocess.run(
        [*runner, "--name", "no-token"], capture_output=True, text=True, timeout=60, env=env
    )
    ran = invoke(["run", "--runners", "2", *common], CODEFLEET_TOKEN=TOKEN)
    joined = subprocess.run(
        [*runner, "--name", "with-token", "--token", TOKEN],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )

    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "pass --token or set CODEFLEET_TOKEN" in " ".join(refused.stderr.split())
    assert ran.exit_code == 0, ran.output
    assert joined.returncode == 0, joined.stderr
