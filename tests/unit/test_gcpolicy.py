"""The collector's policy (`codefleet.gcpolicy`): off during bulk work, the server's heap settled."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from codefleet.gcpolicy import YOUNG_THRESHOLD, collector_off, settle


@pytest.fixture(autouse=True)
def restored_collector() -> Iterator[None]:
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()  # back to the oldest generation, as if never frozen
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()


def test_the_collector_is_off_inside_and_on_again_after_nothing_frozen() -> None:
    frozen = gc.get_freeze_count()
    with collector_off():
        assert not gc.isenabled()
        made = [{"n": n} for n in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    assert any(o is made for o in gc.get_objects())  # still walked by later collections


def test_freeze_moves_what_the_block_left_alive_out_of_the_collectors_walk() -> None:
    with collector_off(freeze=True):
        made = [{"n": n} for n in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)
    assert not any(o is made for o in gc.get_objects())


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_off(freeze=True):
        pass
    assert not gc.isenabled()


def test_settle_freezes_the_loaded_heap_and_raises_only_the_young_threshold() -> None:
    middle, old = gc.get_threshold()[1:]
    alive = {"loaded": [1, 2]}

    settle()

    assert gc.get_freeze_count() > 0
    assert not any(o is alive for o in gc.get_objects())  # in the permanent generation now
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)
