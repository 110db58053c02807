"""The executable's start-up: `quiet_gc` around the heavy imports."""

from __future__ import annotations

import gc

from codefleet.cli.launch import quiet_gc


def test_quiet_gc_turns_the_collector_off_then_freezes_what_the_block_made() -> None:
    assert gc.isenabled()
    try:
        with quiet_gc():
            assert not gc.isenabled()
            made = [{"n": n} for n in range(100)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(made)
    finally:
        gc.unfreeze()  # back to the oldest generation, as if never frozen


def test_quiet_gc_leaves_a_collector_that_was_off_off() -> None:
    gc.disable()
    try:
        with quiet_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
