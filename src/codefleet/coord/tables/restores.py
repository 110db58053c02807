"""The restore steps: put a failed attempt's files back after COMMIT, then release them.

Steps 2 and 3 of the three in `preimages` (step 1, the intent, commits with the
transition that ends the attempt): the pre-images part puts each file back with no
transaction open, then one transaction of its own settles the outcome: the
lease table releases what was restored, and a file that could not be put back
fails its task (`infra`) with its lease still held. The engine finishes the due
restores after every outermost COMMIT, and all of them at start-up, before it
serves anyone. This piece owns only `finishing` (a restore's own transaction
must not start the restores again); it is handed the parts it settles with and
the engine's `transition`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime

from codefleet.coord.tables.leases import LeaseTable
from codefleet.coord.tables.preimages import Preimages
from codefleet.coord.tables.tasktable import TaskTable
from codefleet.models import ErrorKind

__all__ = ["Restores", "Transition"]

log = logging.getLogger(__name__)

# the engine's `transition()`: one store transaction, the restores it asked for after it
Transition = Callable[[], AbstractContextManager[None]]


class Restores:
    """Finishing the restores the pre-images part has due; runs on the engine's thread."""

    def __init__(
        self,
        preimages: Preimages,
        leases: LeaseTable,
        tasks: TaskTable,
        transition: Transition,
        clock: Callable[[], datetime],
    ) -> None:
        self.preimages = preimages
        self.leases = leases
        self.tasks = tasks
        self.transition = transition
        self.clock = clock
        self.finishing = False

    def finish_due(self) -> None:
        """Steps 2 and 3 of every restore not yet tried; a failure leaves them due.

        Called after a transition committed: whatever goes wrong here is not that
        transition's failure (it is stored), so it is logged and the next tick
        tries again.
        """
        due = self.preimages.restores_due()
        if not due or self.finishing:
            return
        self.finishing = True
        try:
            self.finish(due)
        except Exception:  # a loop boundary: the restores stay due, the next tick retries
            log.exception("could not finish the restores of %s; retrying at the next tick", due)
        finally:
            self.finishing = False

    def finish(self, task_ids: Iterable[str] | None = None) -> None:
        """Put back each task's files, then release them (default: every restore not tried)."""
        restoring = self.preimages.restoring
        for task_id in sorted(restoring if task_ids is None else task_ids):
            if task_id in restoring:
                self._finish_one(task_id)

    def _finish_one(self, task_id: str) -> None:
        parts = self.leases.part_names(task_id)
        outcomes = self.preimages.put_back(  # file I/O only
            task_id,
            parts,
            self.leases.holders_on,
            lambda path: self.leases.write_latch.written_by_other(path, task_id),
        )
        with self.transition():
            failed = []
            for outcome in outcomes:
                if outcome.error is None:
                    self.preimages.settle_restored(outcome)
                    keys = self.leases.keys_on(task_id, outcome.row.path)
                    self.leases.drop(task_id, keys, outcome.row.reason)
                else:
                    failed.append(self.preimages.settle_unrestorable(outcome))
            if failed:
                self._fail_unrestored(task_id, failed)

    def _fail_unrestored(self, task_id: str, errors: list[str]) -> None:
        """The attempt's requeue is void: a task whose file cannot be put back fails (`infra`)."""
        task = self.tasks.index.live.get(task_id)
        if task is None:
            return  # already failed or cancelled: the event and the held lease say the rest
        message = (
            f"could not restore {'; '.join(errors)}; the lease stays held until the file is "
            "repaired (then `codefleet retry`, or a server restart, restores and releases it)"
        )
        self.tasks.fail(task, ErrorKind.INFRA, message, self.clock())
