"""The garbage collector as a night sets it (billing.jobs.run.collect_garbage_for_a_night)."""

from __future__ import annotations

import gc
import weakref

from billing.jobs.run import YOUNGEST_COLLECTED_AFTER, collect_garbage_for_a_night


class _Node:
    """An object that can be in a reference cycle and be watched with a weak reference."""

    other: _Node | None = None


def test_a_night_collects_what_is_garbage_then_leaves_the_rest_out_of_the_collectors_walks():
    cycle = _Node()
    cycle.other = cycle
    gone = weakref.ref(cycle)
    kept = _Node()
    del cycle  # garbage in a cycle: only the collector frees it
    collect_garbage_for_a_night()
    assert gone() is None  # collected, not frozen with the living
    assert gc.get_freeze_count() > 0 and gc.is_tracked(kept)
    assert gc.get_threshold()[0] == YOUNGEST_COLLECTED_AFTER


def test_garbage_made_during_the_night_is_still_collected():
    collect_garbage_for_a_night()
    cycle = _Node()
    cycle.other = cycle
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert gone() is None
