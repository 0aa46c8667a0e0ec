"""billing/jobs/backfill.py: days collected at once, written one at a time in date order; a failed day stops no other.

run_day is replaced by one that "collects" for a while (later days faster, so that they finish collecting
first) and records when it is in its turn; the real run is tested in tests/integration/test_backfill_prometheus.py.
"""

from __future__ import annotations

import threading
import time
from datetime import date, timedelta

import pytest

import billing.jobs.backfill
from billing.collect.prometheus import PrometheusError
from billing.jobs.backfill import DateOrder, backfill
from billing.jobs.run import RunSummary

DAYS = [date(2026, 11, 1) + timedelta(days=n) for n in range(6)]


class FakeRuns:
    """run_day's stand-in: collects for (6 - n) * 20 ms, then writes within its turn; tracks what overlapped."""

    def __init__(self, failing: set[date] = frozenset(), failing_in_turn: set[date] = frozenset()):
        self.failing, self.failing_in_turn = failing, failing_in_turn
        self.collecting = self.most_collecting = 0
        self.in_turn = 0
        self.written: list[date] = []
        self.summaries: dict[date, str] = {}
        self.lock = threading.Lock()

    def __call__(self, config, day, require_coverage, turn, summaries="send"):
        self.summaries[day] = summaries
        with self.lock:
            self.collecting += 1
            self.most_collecting = max(self.most_collecting, self.collecting)
        time.sleep((len(DAYS) - DAYS.index(day)) * 0.02)
        with self.lock:
            self.collecting -= 1
        if day in self.failing:
            raise PrometheusError(f"no answer for {day}")
        with turn:
            with self.lock:
                self.in_turn += 1
                assert self.in_turn == 1, "two days wrote at once"
            time.sleep(0.005)
            with self.lock:
                self.in_turn -= 1
            if day in self.failing_in_turn:
                raise PrometheusError(f"ledger write of {day} failed")
            self.written.append(day)
        return RunSummary(day, 1, 1.0, {}, {}, undelivered=(f"mail of {day}",))


@pytest.mark.parametrize("parallel", [1, 3, 6])
def test_days_are_collected_at_once_and_written_oldest_first(monkeypatch, parallel):
    runs = FakeRuns()
    monkeypatch.setattr(billing.jobs.backfill, "run_day", runs)
    heard = []
    outcomes = backfill(None, DAYS, 0.0, parallel, heard.append)
    assert runs.written == DAYS
    assert runs.most_collecting == parallel
    assert [o.day for o in outcomes] == DAYS and not any(o.failure for o in outcomes)
    assert [o.undelivered for o in outcomes] == [(f"mail of {day}",) for day in DAYS]
    assert sorted(o.day for o in heard) == DAYS  # the progress bar hears of every day once


def test_days_before_the_first_mailed_one_send_no_summaries(monkeypatch):
    runs = FakeRuns()
    monkeypatch.setattr(billing.jobs.backfill, "run_day", runs)
    backfill(None, DAYS, 0.0, 2, mailed_from=DAYS[4])
    assert runs.summaries == {day: "backfilled" if day < DAYS[4] else "send" for day in DAYS}


def test_a_failing_day_is_reported_and_the_others_are_billed(monkeypatch):
    """The first day fails while collecting, the fourth in its turn: the days after them do not wait forever."""
    runs = FakeRuns(failing={DAYS[0]}, failing_in_turn={DAYS[3]})
    monkeypatch.setattr(billing.jobs.backfill, "run_day", runs)
    outcomes = backfill(None, DAYS, 0.0, 3)
    assert runs.written == [DAYS[1], DAYS[2], DAYS[4], DAYS[5]]
    assert [o.failure for o in outcomes] == [f"no answer for {DAYS[0]}", "", "", f"ledger write of {DAYS[3]} failed",
                                             "", ""]
    assert outcomes[0].undelivered == ()


def test_a_bug_stops_the_backfill_and_no_further_day_starts(monkeypatch):
    started = []

    def run_day(config, day, require_coverage, turn, summaries="send"):
        started.append(day)
        time.sleep(0.1 if day != DAYS[0] else 0)
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(billing.jobs.backfill, "run_day", run_day)
    with pytest.raises(ZeroDivisionError):
        backfill(None, DAYS, 0.0, 1)
    time.sleep(0.3)
    assert started[0] == DAYS[0] and len(started) <= 2  # the one worker may have taken the next day already


def test_date_order_gives_turns_in_order_and_skips_finished_days():
    order = DateOrder(DAYS[:3])
    entered = []

    def take(day):
        with order.turn(day):
            entered.append(day)

    third = threading.Thread(target=take, args=(DAYS[2],))
    third.start()
    time.sleep(0.05)
    assert entered == []  # waiting for the first two
    order.finish(DAYS[0])  # failed before its turn
    take(DAYS[1])
    third.join(timeout=5)
    assert entered == [DAYS[1], DAYS[2]]
