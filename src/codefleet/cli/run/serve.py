"""`codefleet serve`: the coordination server, the one process that owns the database."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codefleet.cli.common import (
    RUN,
    MaxCostHardOpt,
    MaxCostOpt,
    ProtectedOpt,
    RunDirOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    fail,
    settings_of,
)
from codefleet.cli.output import console, err_console
from codefleet.cli.settingopts import option
from codefleet.errors import DatabaseDamaged
from codefleet.gcpolicy import settle
from codefleet.models import Granularity
from codefleet.server.httpapp import create_app
from codefleet.server.lock import DatabaseInUse
from codefleet.server.netfs import serve_warnings
from codefleet.statedir import NoTreeId, prepare_dirs
from codefleet.transport.uvicorn_internals import (
    FleetServer,
    raise_descriptor_limit,
    uvicorn_config,
)
from codefleet.treelock import TreeInUse, refuse_if_served

if TYPE_CHECKING:
    from codefleet.config import Settings
    from codefleet.server.httpapp import FleetApp

__all__ = ["serve"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@app.command(rich_help_panel=RUN)
def serve(
    ctx: typer.Context,
    host: Annotated[str | None, option("host")] = None,
    port: Annotated[int | None, option("port")] = None,
    db: Annotated[Path | None, option("db")] = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    task_timeout: Annotated[
        float | None, option("task_timeout", help="Seconds a task attempt may run")
    ] = None,
    question_timeout: Annotated[float | None, option("question_timeout")] = None,
    stale_after: Annotated[float | None, option("stale_after")] = None,
    heartbeat_interval: Annotated[float | None, option("heartbeat_interval")] = None,
    poll_interval: Annotated[float | None, option("poll_interval")] = None,
    tick_interval: Annotated[float | None, option("tick_interval")] = None,
    backoff_base: Annotated[float | None, option("backoff_base")] = None,
    backoff_cap: Annotated[float | None, option("backoff_cap")] = None,
    preimage_max_bytes: Annotated[int | None, option("preimage_max_bytes")] = None,
    max_attempts: Annotated[int | None, option("max_attempts")] = None,
    keep_failed_edits: Annotated[bool | None, option("keep_failed_edits")] = None,
    allow_reset: Annotated[bool | None, option("allow_reset")] = None,
    interactive_idle: Annotated[float | None, option("interactive_idle")] = None,
    lease_wait: Annotated[float | None, option("lease_wait")] = None,
    lease_granularity: Annotated[Granularity | None, option("lease_granularity")] = None,
    landing_batch: Annotated[int | None, option("landing_batch")] = None,
    landing_parallel: Annotated[int | None, option("landing_parallel")] = None,
    verify_before_landing: Annotated[bool | None, option("verify_before_landing")] = None,
    landing_stack: Annotated[bool | None, option("landing_stack")] = None,
    repair_turns: Annotated[int | None, option("repair_turns")] = None,
    read_timeout: Annotated[float | None, option("read_timeout")] = None,
    keep_alive_timeout: Annotated[float | None, option("keep_alive_timeout")] = None,
    max_connections: Annotated[int | None, option("max_connections")] = None,
    max_streams: Annotated[int | None, option("max_streams")] = None,
    allowed_hosts: Annotated[str | None, option("allowed_hosts")] = None,
    protected_paths: ProtectedOpt = None,
    max_cost: MaxCostOpt = None,
    max_cost_hard: MaxCostHardOpt = None,
    token: TokenOpt = None,
    tls_cert: Annotated[Path | None, option("tls_cert")] = None,
    tls_key: Annotated[Path | None, option("tls_key")] = None,
    line_remote: Annotated[str | None, option("line_remote")] = None,
) -> None:
    """Run the coordination server (the one process that owns the database)."""
    settings = settings_of(ctx.params, find_server=False)
    _refuse_unsafe(settings)
    _serve(settings)


def _refuse_unsafe(settings: Settings) -> None:
    """No token on a reachable address, or half a TLS pair: refused before anything starts."""
    if settings.host not in LOOPBACK and not settings.token:
        raise fail(
            f"refusing to bind {settings.host} without a token: anyone who reaches the port could "
            "hand agents work. Set CODEFLEET_TOKEN (or --token), or bind 127.0.0.1."
        )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise fail("--tls-cert and --tls-key go together: give both (https) or neither (http)")


def _serve(settings: Settings) -> None:
    """`serve`'s steps: warn, listen, build the app, run it until stopped."""
    for line in serve_warnings(settings.db, settings.workdir):
        err_console.print(f"warning: {line}", style="yellow", markup=False)
    listener = _listen(settings.host, settings.port)  # a busy port fails here, before any file
    settings = settings.model_copy(update={"port": listener.getsockname()[1]})
    application = _application(settings, listener)
    console.print(
        f"CodeFleet server on {settings.url} · tree {settings.workdir.resolve()} · db {settings.db}",
        markup=False,
    )
    raise_descriptor_limit()  # connections are descriptors: the cap is computed from this
    settle()  # the heap as loaded is frozen: docs/decisions/0065-the-servers-garbage-collector.md, "The server's garbage collector"
    config = uvicorn_config(application, settings.host, settings.port, settings)
    FleetServer(config, application.state.hub).run(sockets=[listener])


def _application(settings: Settings, listener: socket.socket) -> FleetApp:
    """The server's app over its prepared directories; a clear error (and the port closed) if not."""
    try:
        refuse_if_served(settings.workdir)  # before any directory is made for this server
        prepare_dirs(settings.db.parent, settings.run_dir)
        return create_app(settings)
    except (TreeInUse, DatabaseInUse, DatabaseDamaged, NoTreeId) as err:
        listener.close()
        raise fail(str(err)) from None
    except FileNotFoundError as err:
        listener.close()
        hint = (
            "--db or CODEFLEET_DB" if "database" in str(err) else "--workdir or CODEFLEET_WORKDIR"
        )
        raise fail(f"{err}. Set {hint} to a directory that exists.") from None


def _listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound now; a clear error when the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise fail(
            f"cannot listen on {host}:{port}: {err.strerror or err}. Another program (or another "
            "`codefleet serve`) uses it: stop it, or pass --port / set CODEFLEET_PORT."
        ) from None
    sock.set_inheritable(True)
    return sock
