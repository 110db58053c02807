"""The engine's tuning, and the one mapping from the server's `Settings` to it.

`EngineConfig` holds the numbers the engine and its scheduler snapshot use;
each default is read from the `Settings` field's own default, so a default is
written once, in `config.Settings`. A field is copied from the `Settings` field of the
same name; the one that is not (`DERIVED`) says how it is computed:
`--keep-failed-edits` turns rollback off. `tests/unit/test_settings_docs.py`
checks that every other field has its `Settings` twin, with the same default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from codefleet.config import Settings
from codefleet.models import Granularity

__all__ = ["DERIVED", "EngineConfig", "engine_config"]


def _default(name: str) -> Any:
    """The default of the `Settings` field `name`: the one place a default is written."""
    return Settings.model_fields[name].default


@dataclass(frozen=True, slots=True)
class EngineConfig:
    stale_after: float = _default("stale_after")
    task_timeout: float = _default("task_timeout")
    question_timeout: float = _default("question_timeout")
    backoff_base: float = _default("backoff_base")
    backoff_cap: float = _default("backoff_cap")
    heartbeat_interval: float = _default("heartbeat_interval")
    poll_interval: float = _default("poll_interval")
    tick_interval: float = _default("tick_interval")
    max_attempts: int = _default("max_attempts")
    rollback: bool = not _default("keep_failed_edits")  # `DERIVED`, as from the settings
    preimage_max_bytes: int = _default("preimage_max_bytes")
    interactive_idle: float = _default("interactive_idle")
    max_cost: float | None = _default("max_cost")  # the fleet's budget in USD (None: no cap)
    max_cost_hard: bool = _default("max_cost_hard")  # a spent budget also stops running attempts
    lease_wait: float = _default("lease_wait")  # how long a refused write may park (0: never)
    landing_batch: int = _default("landing_batch")  # waiting tasks one landing check takes
    landing_parallel: int = _default("landing_parallel")  # landing steps in flight at once
    # a verify that is the integration check runs at the session's end too (else: at landing)
    verify_before_landing: bool = _default("verify_before_landing")
    # a file held by a task waiting to land may pass on to its next writer (`policy.stacks`)
    landing_stack: bool = _default("landing_stack")
    # a blamed task's session repairs its change this many times before it is reworked
    repair_turns: int = _default("repair_turns")
    # what a write leases for a task that names none (`auto` resolved at assignment); an
    # enum member is immutable, so a shared default is safe
    lease_granularity: Granularity = _default("lease_granularity")  # noqa: RUF009


# The fields that are not a `Settings` field of the same name, from the settings.
DERIVED: dict[str, Callable[[Settings], Any]] = {
    "rollback": lambda settings: not settings.keep_failed_edits,
}


def engine_config(settings: Settings) -> EngineConfig:
    """The engine's configuration from the server's settings (the one copy of the mapping)."""
    return EngineConfig(
        **{
            field.name: DERIVED[field.name](settings)
            if field.name in DERIVED
            else getattr(settings, field.name)
            for field in fields(EngineConfig)
        }
    )
