"""`serve` settles its heap before it answers: frozen as loaded, young collections rarer."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from codefleet.cli.serve import GC_YOUNG_THRESHOLD, _settle_heap


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_the_loaded_heap_is_frozen_and_the_young_threshold_raised(restored_collector: None) -> None:
    middle, old = gc.get_threshold()[1:]
    alive = {"loaded": [1, 2]}

    _settle_heap()

    assert gc.get_freeze_count() > 0
    assert not any(o is alive for o in gc.get_objects())  # in the permanent generation now
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, middle, old)
