"""`codefleet serve`: the coordination server, the one process that owns the database."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

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
    settings_from,
)
from codefleet.statedir import NoTreeId, prepare_dirs

__all__ = ["serve"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@app.command(rich_help_panel=RUN)
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind [CODEFLEET_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind [CODEFLEET_PORT].")] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite database file [CODEFLEET_DB].")] = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    task_timeout: Annotated[
        float | None, typer.Option(help="Seconds a task attempt may run [CODEFLEET_TASK_TIMEOUT].")
    ] = None,
    question_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds an agent's question (ask_operator) waits for an answer; 0: agents "
            "cannot ask [CODEFLEET_QUESTION_TIMEOUT].",
        ),
    ] = None,
    stale_after: Annotated[
        float | None,
        typer.Option(
            help="Seconds without a heartbeat before a runner is stale [CODEFLEET_STALE_AFTER]."
        ),
    ] = None,
    heartbeat_interval: Annotated[
        float | None,
        typer.Option(help="Seconds between runner heartbeats [CODEFLEET_HEARTBEAT_INTERVAL]."),
    ] = None,
    poll_interval: Annotated[
        float | None,
        typer.Option(help="Long-poll wait for an assignment, seconds [CODEFLEET_POLL_INTERVAL]."),
    ] = None,
    tick_interval: Annotated[
        float | None, typer.Option(help="Reconciliation tick, seconds [CODEFLEET_TICK_INTERVAL].")
    ] = None,
    backoff_base: Annotated[
        float | None,
        typer.Option(help="Retry backoff: seconds per attempt so far [CODEFLEET_BACKOFF_BASE]."),
    ] = None,
    backoff_cap: Annotated[
        float | None, typer.Option(help="Retry backoff ceiling, seconds [CODEFLEET_BACKOFF_CAP].")
    ] = None,
    preimage_max_bytes: Annotated[
        int | None,
        typer.Option(
            help="Largest file a task may lease while rollback is on [CODEFLEET_PREIMAGE_MAX_BYTES]."
        ),
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="Default attempts per task [CODEFLEET_MAX_ATTEMPTS].")
    ] = None,
    keep_failed_edits: Annotated[
        bool | None,
        typer.Option(
            "--keep-failed-edits/--rollback-failed-edits",
            help="Leave a failed attempt's edits in the tree instead of restoring the files [CODEFLEET_KEEP_FAILED_EDITS].",
        ),
    ] = None,
    allow_reset: Annotated[
        bool | None,
        typer.Option(
            "--allow-reset/--no-allow-reset", help="Allow POST /reset [CODEFLEET_ALLOW_RESET]."
        ),
    ] = None,
    interactive_idle: Annotated[
        float | None,
        typer.Option(
            help="Release a person's session's leases after this many seconds without a write [CODEFLEET_INTERACTIVE_IDLE]."
        ),
    ] = None,
    lease_wait: Annotated[
        float | None,
        typer.Option(
            help="Seconds a fleet task's write may wait for a file another fleet task holds, "
            "instead of the veto; 0 = the veto at once [CODEFLEET_LEASE_WAIT]."
        ),
    ] = None,
    read_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a client has to send a whole request once it connects or after its "
            "previous answer, else it is closed [CODEFLEET_READ_TIMEOUT]."
        ),
    ] = None,
    keep_alive_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds an idle keep-alive connection stays open [CODEFLEET_KEEP_ALIVE_TIMEOUT]."
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            help="Open connections at most; past it the one idle longest is closed "
            "[CODEFLEET_MAX_CONNECTIONS]."
        ),
    ] = None,
    max_streams: Annotated[
        int | None,
        typer.Option(
            help="Event streams open at once; past it a new one is refused 503 "
            "[CODEFLEET_MAX_STREAMS]."
        ),
    ] = None,
    allowed_hosts: Annotated[
        str | None,
        typer.Option(
            help="Without a token: the Host names (besides loopback addresses) requests may "
            "use, comma-separated [CODEFLEET_ALLOWED_HOSTS]."
        ),
    ] = None,
    protected_paths: ProtectedOpt = None,
    max_cost: MaxCostOpt = None,
    max_cost_hard: MaxCostHardOpt = None,
    token: TokenOpt = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            help="Serve https with this certificate (PEM); needs --tls-key [CODEFLEET_TLS_CERT]."
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(help="The private key of --tls-cert (PEM) [CODEFLEET_TLS_KEY]."),
    ] = None,
) -> None:
    """Run the coordination server (the one process that owns the database)."""
    from codefleet.cli.output import console, err_console
    from codefleet.errors import DatabaseDamaged
    from codefleet.heap import settle
    from codefleet.server.app import create_app
    from codefleet.server.lock import DatabaseInUse
    from codefleet.server.netfs import serve_warnings
    from codefleet.transport.uvicorn_internals import (
        FleetServer,
        raise_descriptor_limit,
        uvicorn_config,
    )

    settings = settings_from(
        host=host, port=port, db=db, workdir=workdir, run_dir=run_dir, task_timeout=task_timeout,
        question_timeout=question_timeout, stale_after=stale_after, heartbeat_interval=heartbeat_interval,
        poll_interval=poll_interval, tick_interval=tick_interval, max_attempts=max_attempts,
        allow_reset=allow_reset, token=token, keep_failed_edits=keep_failed_edits,
        backoff_base=backoff_base, backoff_cap=backoff_cap, preimage_max_bytes=preimage_max_bytes,
        interactive_idle=interactive_idle, protected_paths=protected_paths, max_cost=max_cost,
        lease_wait=lease_wait,
        max_cost_hard=max_cost_hard, read_timeout=read_timeout,
        keep_alive_timeout=keep_alive_timeout, max_connections=max_connections,
        max_streams=max_streams, allowed_hosts=allowed_hosts, tls_cert=tls_cert, tls_key=tls_key,
    )  # fmt: skip
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise fail("--tls-cert and --tls-key go together: give both (https) or neither (http)")
    if settings.host not in LOOPBACK and not settings.token:
        raise fail(
            f"refusing to bind {settings.host} without a token: anyone who reaches the port could "
            "hand agents work. Set CODEFLEET_TOKEN (or --token), or bind 127.0.0.1."
        )
    for line in serve_warnings(settings.db, settings.workdir):
        err_console.print(f"warning: {line}", style="yellow", markup=False)
    listener = _listen(settings.host, settings.port)  # a busy port fails here, before any file
    settings = settings.model_copy(update={"port": listener.getsockname()[1]})
    try:
        prepare_dirs(settings.db.parent, settings.run_dir)
        application = create_app(settings)
    except (DatabaseInUse, DatabaseDamaged, NoTreeId) as err:
        listener.close()
        raise fail(str(err)) from None
    except FileNotFoundError as err:
        listener.close()
        hint = (
            "--db or CODEFLEET_DB" if "database" in str(err) else "--workdir or CODEFLEET_WORKDIR"
        )
        raise fail(f"{err}. Set {hint} to a directory that exists.") from None
    console.print(
        f"CodeFleet server on {settings.url} · tree {settings.workdir.resolve()} · db {settings.db}",
        markup=False,
    )
    raise_descriptor_limit()  # connections are descriptors: the cap is computed from this
    settle()  # the heap as loaded is frozen: docs/decisions.md, "The server's garbage collector"
    config = uvicorn_config(application, settings.host, settings.port, settings)
    FleetServer(config, application.state.hub).run(sockets=[listener])


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
