"""The pieces the fast commands (`cli.operate.quick`) share: where the server is, one call, output.

Standard library only, like `hook.command`: these commands are typed while a
fleet runs and must start in a fraction of a second, so nothing here imports
pydantic, httpx, Rich or Typer (tests/unit/test_quick_commands.py).

- `address`: the server's URL and token as `config.Settings` would give them,
  for the settings these commands use (`server_url`, `host`, `port`, `token`,
  `tls_cert`, `workdir`): a flag wins over `CODEFLEET_*` in the environment
  (any case), which wins over the current directory's `.env`; with none of
  the address given, the tree's live server once it has shown it is this tree's
  (`api.treeserver.tree_server`, as `cli.common.found_server`). Whatever it cannot read exactly as pydantic
  would (a `.env` value with quotes it does not know, a token with blanks, a
  port that is not a number, https) is `Unsure`: the command then takes the
  full command line, which reads it and says what is wrong.
- `call`: one JSON request (`api.blockingclient`), its refusal as `Failed`
  with the message the full command line prints (`cli.common.call_server`).
- `say`, `error`, `print_json`: what `cli.output`'s consoles print, piped:
  lines made `terminal_safe`, the error in bold red on a terminal (the task
  table is `cli.operate.quicktable`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from codefleet.safetext import terminal_safe

__all__ = [
    "Address",
    "Failed",
    "Unsure",
    "address",
    "call",
    "error",
    "no_server_text",
    "not_codefleet_text",
    "print_json",
    "say",
    "unauthorized_text",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8099
CALL_TIMEOUT_S: Final = 10.0  # as `api.client.DEFAULT_TIMEOUT_S`
MAX_ANSWER_BYTES: Final = 1024 * 1024 * 1024  # a task list or a patch may be large
SETTINGS: Final = ("server_url", "host", "port", "token", "tls_cert", "workdir")


class Unsure(Exception):
    """Something these commands cannot read exactly as the full command line would."""


class Failed(Exception):
    """A call refused or unanswered: the message the command prints as its error."""


class Address(NamedTuple):
    url: str
    token: str | None


def no_server_text(url: str) -> str:
    return f"no CodeFleet server answers at {url}; start one with `codefleet serve`"


def unauthorized_text(url: str, token_given: bool) -> str:
    given = "the token given was refused" if token_given else "it needs a token"
    return f"the server at {url} refused the request: {given}; pass --token or set CODEFLEET_TOKEN"


# -- where the server is --------------------------------------------------------------------


def address(server: str | None, token: str | None, env: Mapping[str, str]) -> Address:
    """The URL and token `Settings` would give the command (see the module's docstring)."""
    given = {**_dotenv(Path(".env")), **_environment(env)}
    if server is not None:
        given["server_url"] = server
    if token is not None:
        given["token"] = token
    if given.get("tls_cert"):
        raise Unsure("https")
    chosen = given.get("token")
    if chosen is not None and (not chosen.strip() or chosen != chosen.strip()):
        raise Unsure("a blank token")
    url = _url(given)
    if not {"server_url", "host", "port"} & set(given):
        url = _found(Path(given.get("workdir") or _tree()), url)
    if not url.startswith("http://"):
        raise Unsure("https")
    return Address(url, chosen)


def _url(given: Mapping[str, str]) -> str:
    if given.get("server_url"):
        return given["server_url"].rstrip("/")
    host = given.get("host", DEFAULT_HOST)
    try:
        port = int(given.get("port", DEFAULT_PORT))
    except ValueError:
        raise Unsure("a port that is not a number") from None
    if not 0 <= port <= 65535:
        raise Unsure("a port out of range")
    return f"http://{DEFAULT_HOST if host in ('0.0.0.0', '', '::') else host}:{port}"


def _environment(env: Mapping[str, str]) -> dict[str, str]:
    """The settings given as `CODEFLEET_*` variables, their names in any case."""
    found = {}
    for key, value in env.items():
        name = key.lower().removeprefix("codefleet_")
        if key.lower().startswith("codefleet_") and name in SETTINGS:
            found[name] = value
    return found


def _dotenv(path: Path) -> dict[str, str]:
    """The settings of a `.env` file, when each line that gives one is plain `KEY=VALUE`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError):
        raise Unsure(".env unreadable") from None
    found = {}
    for line in text.splitlines():
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        name = key.strip().lower().removeprefix("codefleet_")
        if not (key.strip().lower().startswith("codefleet_") and name in SETTINGS):
            continue
        found[name] = _plain(value.strip()) if sep else _unsure(line)
    return found


def _plain(value: str) -> str:
    """A `.env` value as python-dotenv reads it, or `Unsure` for anything but the simple cases."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] not in inner and "\\" not in inner and "$" not in inner:
            return inner
    elif not any(c in value for c in "'\"#$\\"):
        return value
    raise Unsure(f".env value {value!r}")


def _unsure(line: str) -> str:
    raise Unsure(f".env line {line!r}")


def _tree() -> Path:
    # fast path: loaded only by the command that needs it
    from codefleet.statedir import tree_root

    return tree_root(Path.cwd())[0]


def _found(workdir: Path, url: str) -> str:
    """`url`, or the tree's live server's when there is one (`cli.common.found_server`)."""
    # fast path: loaded only by the command that needs it
    from codefleet.api.treeserver import NotThisTree, tree_server

    try:
        record = tree_server(workdir)
    except NotThisTree as err:
        raise Failed(str(err)) from None
    if record is None or record.url == url:
        return url
    if not record.url.startswith("http://"):
        raise Unsure("https")  # before the line below: the full command line says it
    sys.stderr.write(
        terminal_safe(
            f"server: {record.url} (the server of the tree {record.workdir}, pid {record.pid})"
        )
        + "\n"
    )
    return record.url


# -- one call ---------------------------------------------------------------------------------


def call(where: Address, method: str, target: str, body: Any = None) -> Any:
    """The decoded JSON answer of one request, or `Failed` with the command's error."""
    # fast path: loaded only by the command that needs it
    from codefleet.api.blockingclient import exchange

    payload = b"" if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if where.token:
        headers["Authorization"] = f"Bearer {where.token}"
    try:
        status, raw = exchange(
            method, where.url, target, payload, headers, CALL_TIMEOUT_S, max_bytes=MAX_ANSWER_BYTES
        )
    except (OSError, ValueError):  # refused, reset, timed out, not HTTP
        raise Failed(no_server_text(where.url)) from None
    if status == 503:
        raise Failed(no_server_text(where.url))
    if status >= 400:
        raise Failed(_refusal(where, status, raw))
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        raise Failed(not_codefleet_text(where.url, f"HTTP {status}, not JSON")) from None


def not_codefleet_text(url: str, what: str) -> str:
    """`cli.common.not_codefleet_message`'s line."""
    return (
        f"the server at {url} answered what no CodeFleet server sends ({what}): "
        "is it CodeFleet? Check --server / CODEFLEET_SERVER_URL"
    )


def _refusal(where: Address, status: int, raw: bytes) -> str:
    """What `api.client` makes of an error answer, as `call_server` prints it."""
    try:
        err = json.loads(raw)["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        return not_codefleet_text(where.url, f"HTTP {status}")
    if code == "unauthorized":
        return unauthorized_text(where.url, bool(where.token))
    return str(message)


# -- output -----------------------------------------------------------------------------------


def say(text: str, *, stream: Any = None) -> None:
    """One printed text, as `cli.output`'s console prints it with `markup=False`."""
    (stream or sys.stdout).write(terminal_safe(text) + "\n")


def error(message: str) -> int:
    """`cli.common.fail`'s line on stderr; the exit status 1."""
    head = "\x1b[1;31merror:\x1b[0m" if _colour(sys.stderr) else "error:"
    sys.stderr.write(f"{head} {terminal_safe(message)}\n")
    return 1


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _colour(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return (
        bool(isatty and isatty())
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM") not in ("dumb", "unknown")
    )
