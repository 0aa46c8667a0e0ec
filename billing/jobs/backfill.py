"""`billing backfill`: a range of days, several collected at once, each written as `billing run` writes it.

Collecting a day is nearly all of its time, and most of that is waiting for
the store; so `parallel` days are collected at once, and each store still
answers no more than its `max_queries_in_flight` queries at a time, however
many days ask (billing/collect/prometheus.py). Writing is not parallel: days enter
the ledger, their pages and their emails one at a time in date order, as in
a serial backfill, so every day's pages and budget alerts see the days
before it. Each day is still its own transaction.

A day that fails is logged at once and the others go on; the caller learns
which failed from the outcomes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date

from billing.config import Config
from billing.errors import RunFailed
from billing.jobs.run import run_day

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DayOutcome:
    """How one day of a backfill ended."""

    day: date
    failure: str = ""  # the sentence saying why the day failed; '' when it was billed
    undelivered: tuple[str, ...] = ()  # one sentence per summary email that failed on a billed day


class DateOrder:
    """Turns in the order of a list of days: a day's turn comes when every earlier day has had its turn or
    has finished without one (failed before writing)."""

    def __init__(self, days: list[date]):
        self._position = {day: number for number, day in enumerate(days)}
        self._finished: set[int] = set()
        self._next = 0
        self._changed = threading.Condition()

    @contextmanager
    def turn(self, day: date) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self._next == self._position[day])
        try:
            yield
        finally:
            self.finish(day)

    def finish(self, day: date) -> None:
        with self._changed:
            self._finished.add(self._position[day])
            while self._next in self._finished:
                self._next += 1
            self._changed.notify_all()


def backfill(config: Config, days: list[date], require_coverage: float, parallel: int,
             done: Callable[[DayOutcome], None] = lambda outcome: None,
             mailed_from: date = date.min) -> list[DayOutcome]:
    """Run every day, `parallel` at a time, writing in date order; `done` hears of each day as it ends. Days
    before `mailed_from` send no daily summaries.

    The outcomes come back in date order. An error that is not a day's failure (a bug, Ctrl-C) cancels the
    days not started and is raised at once (the running days' transactions are rolled back when the process
    ends)."""
    order = DateOrder(days)

    def run(day: date) -> DayOutcome:
        try:
            summary = run_day(config, day, require_coverage, order.turn(day),
                              summaries="send" if day >= mailed_from else "backfilled")
        except RunFailed as exc:  # exit status 1; a usage or configuration error (2) or a bug stops everything
            log.error("backfill: %s failed: %s", day, exc)
            return DayOutcome(day, failure=str(exc))
        finally:
            order.finish(day)  # after a failure before its turn, the next day need not wait for it
        return DayOutcome(day, undelivered=summary.undelivered)

    outcomes: dict[date, DayOutcome] = {}
    pool = ThreadPoolExecutor(parallel, thread_name_prefix="backfill")
    futures = {pool.submit(run, day): day for day in days}
    try:
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[outcome.day] = outcome
            done(outcome)
    finally:  # after a bug or Ctrl-C: the days not started never start, and the running ones are not waited for
        for future, day in futures.items():
            if future.cancel():
                order.finish(day)
        pool.shutdown(wait=False)
    return [outcomes[day] for day in days]
