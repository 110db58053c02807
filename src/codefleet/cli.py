"""The `codefleet` command line: `serve`, `load`, `reset` here; the fleet commands in `cli_fleet`.

Every setting is a `CODEFLEET_*` environment variable and a flag; see `cli_common`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from codefleet import cli_fleet  # noqa: F401 - registers run, runner, demo, watch, tasks, doctor
from codefleet.cli_common import (
    CheckOpt,
    JsonOpt,
    RunDirOpt,
    ServerOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    call_server,
    console,
    fail,
    parse_check_options,
    print_json,
    settings_from,
)
from codefleet.graph import GraphError, load_graph

__all__ = ["app"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


# -- serve, load, reset ---------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind [CODEFLEET_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind [CODEFLEET_PORT].")] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite database file [CODEFLEET_DB].")] = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    task_timeout: Annotated[
        float | None, typer.Option(help="Seconds a task attempt may run [CODEFLEET_TASK_TIMEOUT].")
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
    token: TokenOpt = None,
) -> None:
    """Run the coordination server (the one process that owns the database)."""
    import uvicorn

    from codefleet.server import create_app
    from codefleet.serverthread import FleetServer

    settings = settings_from(
        host=host, port=port, db=db, workdir=workdir, run_dir=run_dir, task_timeout=task_timeout,
        stale_after=stale_after, heartbeat_interval=heartbeat_interval,
        poll_interval=poll_interval, tick_interval=tick_interval, max_attempts=max_attempts,
        allow_reset=allow_reset, token=token, keep_failed_edits=keep_failed_edits,
        backoff_base=backoff_base, backoff_cap=backoff_cap, preimage_max_bytes=preimage_max_bytes,
    )  # fmt: skip
    if settings.host not in LOOPBACK and not settings.token:
        raise fail(
            f"refusing to bind {settings.host} without a token: anyone who reaches the port could "
            "hand agents work. Set CODEFLEET_TOKEN (or --token), or bind 127.0.0.1."
        )
    try:
        application = create_app(settings)
    except FileNotFoundError as err:
        raise fail(f"{err}. Set --workdir or CODEFLEET_WORKDIR to your repository.") from None
    console.print(
        f"CodeFleet server on {settings.url} · tree {settings.workdir.resolve()} · db {settings.db}"
    )
    config = uvicorn.Config(
        application, host=settings.host, port=settings.port, log_level="warning"
    )
    FleetServer(config, application.state.hub).run()


@app.command()
def load(
    graph: Annotated[Path, typer.Argument(help="Task graph YAML (see examples/demo-tasks.yaml).")],
    check: CheckOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Post a task graph (and its checks) to the server; the batch lands whole or not at all."""
    try:
        tasks = load_graph(graph, standalone=False)
    except GraphError as err:
        raise fail(str(err)) from None
    checks = {**tasks.checks, **parse_check_options(check)}
    settings = settings_from(server_url=server, token=token)
    created = call_server(settings, lambda c: c.create_tasks(tasks, checks))
    if json_out:
        print_json({"created": created})
    else:
        console.print(f"created {len(created)} task(s): {' '.join(created)}")


@app.command()
def reset(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Delete every task, agent, lease and event. Needs CODEFLEET_ALLOW_RESET=1."""
    if os.environ.get("CODEFLEET_ALLOW_RESET") not in ("1", "true", "yes"):
        raise fail("reset deletes everything; set CODEFLEET_ALLOW_RESET=1 to confirm")
    settings = settings_from(server_url=server, token=token)
    call_server(settings, lambda c: c.reset())
    console.print("reset: the database is empty")


if __name__ == "__main__":
    app()
