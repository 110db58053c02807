"""The engine's tuning, and the one mapping from the server's `Settings` to it.

`EngineConfig` holds the numbers the engine and its scheduler snapshot use;
its defaults are the shared ones in `models` (the same `Settings` uses), so a
default is written once. A field is copied from the `Settings` field of the
same name; the one that is not (`DERIVED`) says how it is computed:
`--keep-failed-edits` turns rollback off. `tests/unit/test_settings_docs.py`
checks that every other field has its `Settings` twin, with the same default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from codefleet.models import (
    DEFAULT_BACKOFF_BASE_S,
    DEFAULT_BACKOFF_CAP_S,
    DEFAULT_HEARTBEAT_INTERVAL_S,
    DEFAULT_INTERACTIVE_IDLE_S,
    DEFAULT_LANDING_BATCH,
    DEFAULT_LEASE_WAIT_S,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_POLL_INTERVAL_S,
    DEFAULT_PREIMAGE_MAX_BYTES,
    DEFAULT_QUESTION_TIMEOUT_S,
    DEFAULT_STALE_AFTER_S,
    DEFAULT_TASK_TIMEOUT_S,
    DEFAULT_TICK_INTERVAL_S,
)

if TYPE_CHECKING:
    from codefleet.config import Settings

__all__ = ["DERIVED", "EngineConfig", "engine_config"]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    stale_after: float = DEFAULT_STALE_AFTER_S
    task_timeout: float = DEFAULT_TASK_TIMEOUT_S
    question_timeout: float = DEFAULT_QUESTION_TIMEOUT_S
    backoff_base: float = DEFAULT_BACKOFF_BASE_S
    backoff_cap: float = DEFAULT_BACKOFF_CAP_S
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL_S
    poll_interval: float = DEFAULT_POLL_INTERVAL_S
    tick_interval: float = DEFAULT_TICK_INTERVAL_S
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    rollback: bool = True
    preimage_max_bytes: int = DEFAULT_PREIMAGE_MAX_BYTES
    interactive_idle: float = DEFAULT_INTERACTIVE_IDLE_S
    max_cost: float | None = None  # the fleet's budget in USD (None: no cap)
    max_cost_hard: bool = False  # a spent budget also stops running attempts
    lease_wait: float = DEFAULT_LEASE_WAIT_S  # how long a refused write may park (0: never)
    landing_batch: int = DEFAULT_LANDING_BATCH  # how many waiting tasks one landing check takes


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
