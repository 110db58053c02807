"""One `Settings` object, read from `CODEFLEET_*` environment variables and `.env`.

A setting is declared here (type, default, bounds) and its help once in
`cli.settingopts.FLAGS`, from which its flag and `CODEFLEET_*` name are
derived; `.env.example` lists every one with its default, and the engine's
`EngineConfig` takes the field of the same name. `tests/unit/test_settings_docs.py`
keeps them in step (docs/decisions/0128-a-setting-is-declared-once.md, "A setting is declared once"). Defaults are the
ones in DESIGN §6, except that the tree is the current directory and CodeFleet's
own files go in its `.codefleet/` (DESIGN §10; docs/decisions/0051-the-tree-is-the-current-directory.md, "The tree is
the current directory"). The server URL the clients use is derived from host and
port unless `server_url` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from codefleet.models import (
    DEFAULT_BACKOFF_BASE_S,
    DEFAULT_BACKOFF_CAP_S,
    DEFAULT_HEARTBEAT_INTERVAL_S,
    DEFAULT_INTERACTIVE_IDLE_S,
    DEFAULT_LANDING_BATCH,
    DEFAULT_LANDING_PARALLEL,
    DEFAULT_LEASE_WAIT_S,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_POLL_INTERVAL_S,
    DEFAULT_PREIMAGE_MAX_BYTES,
    DEFAULT_QUESTION_TIMEOUT_S,
    DEFAULT_RECONCILE_ROUNDS,
    DEFAULT_REPAIR_TURNS,
    DEFAULT_STALE_AFTER_S,
    DEFAULT_TASK_TIMEOUT_S,
    DEFAULT_TICK_INTERVAL_S,
    MAX_LEASE_WAIT_S,
    Granularity,
)
from codefleet.paths import DEFAULT_PROTECTED_NAMES, parse_protected_names
from codefleet.statedir import tree_root

__all__ = ["Settings"]

DEFAULT_DB = Path(".codefleet/codefleet.db")
DEFAULT_RUN_DIR = Path(".codefleet/runs")
DEFAULT_MAX_STREAMS = 256  # open event streams; each can hold a few hundred KiB unread


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CODEFLEET_", env_file=".env", extra="ignore", frozen=True
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8099, ge=0, le=65535)
    server_url: str | None = None
    db: Path = DEFAULT_DB  # default: inside the tree, see `_in_the_tree`
    workdir: Path = Path(".")  # the current directory: run CodeFleet inside your repository
    runners: int = Field(default=3, ge=1, le=256)
    model: str | None = None
    task_timeout: float = Field(default=DEFAULT_TASK_TIMEOUT_S, gt=0)
    task_budget_usd: float = Field(default=0.50, gt=0)
    max_turns: int = Field(default=40, ge=1)
    heartbeat_interval: float = Field(default=DEFAULT_HEARTBEAT_INTERVAL_S, gt=0)
    stale_after: float = Field(default=DEFAULT_STALE_AFTER_S, gt=0)
    poll_interval: float = Field(default=DEFAULT_POLL_INTERVAL_S, ge=0)
    tick_interval: float = Field(default=DEFAULT_TICK_INTERVAL_S, gt=0)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=100)
    backoff_base: float = Field(default=DEFAULT_BACKOFF_BASE_S, ge=0)
    backoff_cap: float = Field(default=DEFAULT_BACKOFF_CAP_S, ge=0)
    run_dir: Path = DEFAULT_RUN_DIR  # default: inside the tree, see `_in_the_tree`
    keep_failed_edits: bool = False
    preimage_max_bytes: int = Field(default=DEFAULT_PREIMAGE_MAX_BYTES, ge=0)
    check_timeout: float = Field(default=300.0, gt=0)
    resource_wait: float = Field(default=30.0, ge=0)  # a check waits this long for its resources
    check_dir: Path | None = None
    uv_lock_cache: bool = True  # a `uv run` check resolves once per content (`fleet.views.uvlock`)
    shell: bool = False  # every task gets run_command unless its `shell:` says otherwise
    shell_network: bool = False
    shell_unsandboxed: bool = False  # without bubblewrap, run commands anyway
    shell_max_files: int = Field(default=1000, ge=1)
    shell_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    reconcile_rounds: int = Field(default=DEFAULT_RECONCILE_ROUNDS, ge=0, le=20)
    # repair turns per attempt before a failed verify or landing check reworks the task
    repair_turns: int = Field(default=DEFAULT_REPAIR_TURNS, ge=0, le=5)
    question_timeout: float = Field(default=DEFAULT_QUESTION_TIMEOUT_S, ge=0)  # 0: no asking
    interactive_idle: float = Field(default=DEFAULT_INTERACTIVE_IDLE_S, gt=0)
    max_cost: float | None = Field(default=None, gt=0)
    max_cost_hard: bool = False
    lease_wait: float = Field(default=DEFAULT_LEASE_WAIT_S, ge=0, le=MAX_LEASE_WAIT_S)
    # a fleet write leases its parts, or files; auto: parts where an integration check is set
    lease_granularity: Granularity = Granularity.AUTO
    landing_batch: int = Field(default=DEFAULT_LANDING_BATCH, ge=1, le=1000)
    landing_parallel: int = Field(default=DEFAULT_LANDING_PARALLEL, ge=1, le=64)
    integration: str | None = None  # the check every task's landing must pass (`run`)
    verify_before_landing: bool = False  # a verify naming the integration check runs twice
    landing_stack: bool = True  # a file waiting to land may pass on to its next writer
    allow_reset: bool = False
    token: str | None = None
    tls_cert: Path | None = None  # serve https with this certificate (PEM) and `tls_key`
    tls_key: Path | None = None
    allowed_hosts: str = "localhost"  # Host names a token-less server answers to, comma-separated
    line_remote: str | None = None  # a git remote the server pushes its landed line to
    read_timeout: float = Field(default=15.0, gt=0)
    keep_alive_timeout: float = Field(default=5.0, gt=0)
    max_connections: int = Field(default=2048, ge=16, le=1_000_000)
    max_streams: int = Field(default=DEFAULT_MAX_STREAMS, ge=1, le=1_000_000)
    # Comma-separated names no agent may write, at any depth, case-insensitively (`.git` always).
    protected_paths: str = ",".join(DEFAULT_PROTECTED_NAMES)

    @field_validator("protected_paths")
    @classmethod
    def _protected_names_are_relative(cls, value: str) -> str:
        parse_protected_names(_split(value))
        return value

    @field_validator("token")
    @classmethod
    def _token_is_not_blank(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError(
                "CODEFLEET_TOKEN / --token is empty or has surrounding whitespace; "
                "unset it for no token, or give the real token"
            )
        return value

    @property
    def allowed_host_names(self) -> tuple[str, ...]:
        """`allowed_hosts` as a tuple of names (for `hostcheck.HostNames`)."""
        return _split(self.allowed_hosts)

    @property
    def protected_names(self) -> tuple[str, ...]:
        """`protected_paths` as a tuple of names (for `paths.TreeRoot`)."""
        return _split(self.protected_paths)

    @model_validator(mode="before")
    @classmethod
    def _in_the_tree(cls, data: Any) -> Any:
        """Unless given, the tree is the repository (or served tree) the current directory is
        in (`statedir.tree_root`), and the database and the run directory live in its
        `.codefleet/`."""
        if isinstance(data, dict) and data.get("workdir") in (None, ""):
            root, _ = tree_root(Path.cwd())
            if root != Path.cwd().absolute():  # at the root itself nothing changes: "."
                data = {**data, "workdir": root}
        if isinstance(data, dict) and data.get("workdir") not in (None, ""):
            tree = Path(data["workdir"])
            for name, default in (("db", DEFAULT_DB), ("run_dir", DEFAULT_RUN_DIR)):
                if data.get(name) in (None, ""):
                    data = {**data, name: tree / default}
        return data

    @property
    def url(self) -> str:
        """Base URL of the coordination server, for clients."""
        if self.server_url:
            return self.server_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"{'https' if self.tls_cert else 'http'}://{host}:{self.port}"


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())
