"""The garbage collector as a night sets it (billing.jobs.run.collect_garbage_for_a_night)."""

from __future__ import annotations

import gc
import weakref

from billing.jobs.run import YOUNGEST_COLLECTED_AFTER, collect_garbage_for_a_night


class _Node:
    """An object that can be in a reference cycle and be watched with a weak reference."""

    other: _Node | None = None


def test_a_night_leaves_what_lives_at_its_start_out_of_the_collectors_walks():
    kept = _Node()
    before = gc.get_freeze_count()
    collect_garbage_for_a_night()
    assert gc.get_freeze_count() > before and gc.is_tracked(kept)
    assert not any(found is kept for generation in range(3) for found in gc.get_objects(generation))
    assert gc.get_threshold()[0] == YOUNGEST_COLLECTED_AFTER


def test_garbage_made_during_the_night_is_still_collected():
    collect_garbage_for_a_night()
    cycle = _Node()
    cycle.other = cycle
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert gone() is None
