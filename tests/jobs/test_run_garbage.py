"""What a night holds: the garbage collector as it sets it (billing.jobs.run.collect_garbage_for_a_night), and what
it lets go of before the pages."""

from __future__ import annotations

import gc
import weakref
from datetime import date

import billing.collect.day
import billing.jobs.run
from billing.config import load_config
from billing.directory.people import Directory
from billing.jobs.run import YOUNGEST_COLLECTED_AFTER, collect_garbage_for_a_night, run_day
from tests.helpers.config import stub_node_metrics
from tests.helpers.run_summaries import usages


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


def test_the_pages_are_made_without_the_collected_day_or_its_bill(write_config, tmp_path, monkeypatch):
    """What the store said and the bill made of it are in the ledger when the pages are made, which read the day from
    there: a big cluster's day is not held through them too (docs/performance.md "The night's resident
    size")."""
    config = load_config(write_config(database=f"sqlite:///{tmp_path / 'ledger.db'}"))
    monkeypatch.setattr(billing.jobs.run, "prometheus_source", lambda name, prometheus: name)
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *args: usages()[0])
    stub_node_metrics(monkeypatch)
    monkeypatch.setattr(billing.jobs.run, "load_directory", lambda directory: Directory({}, {}))
    billed, make_pages = billing.jobs.run.bill_day, billing.jobs.run.render_day
    watched: list[weakref.ref] = []

    def bill_day(collected, *args):
        bill = billed(collected, *args)
        watched.extend(weakref.ref(held) for held in (*collected, collected[0].usage, bill))
        return bill

    def render_day(config, day):
        assert watched and all(held() is None for held in watched)
        return make_pages(config, day)

    monkeypatch.setattr(billing.jobs.run, "bill_day", bill_day)
    monkeypatch.setattr(billing.jobs.run, "render_day", render_day)
    assert run_day(config, date(2026, 11, 20), summaries="none").rows == 5
