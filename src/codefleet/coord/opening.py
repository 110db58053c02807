"""Opening and closing an engine over its database: the server never holds the store itself.

The app factory asks for an engine over a database path and gets one, the
database checked and its store opened here; at shutdown it closes it here. So
no module outside `coord` imports the store or reaches `engine.store`
(tests/unit/test_boundaries.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codefleet.coord.engine import Engine
from codefleet.coord.policy.engineconfig import EngineConfig
from codefleet.coord.storage.sqlitefile import check_database
from codefleet.coord.storage.store import Store
from codefleet.paths import TreeRoot

__all__ = ["close_engine", "open_engine"]

log = logging.getLogger(__name__)


def open_engine(
    db: Path,
    tree: TreeRoot,
    config: EngineConfig,
    on_commit: Callable[[list[dict[str, Any]]], None] | None = None,
    *,
    check: bool = True,
    tree_id: str | None = None,
) -> Engine:
    """The engine over `db` (checked first, if `check`); `on_commit` hears each commit's events."""
    if check and not check_database(db):
        log.warning("the check of %s stopped at its time budget; serving it", db)
    store = Store(db, on_commit=on_commit, background_checkpoints=True)
    return Engine(store, tree, config, tree_id=tree_id)


def close_engine(engine: Engine) -> None:
    """Close the engine's database (its last checkpoint included)."""
    engine.store.close()
