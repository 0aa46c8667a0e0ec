"""Billing days: local calendar dates turned into UTC intervals."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

# the days a ledger can hold: none before Unix time began, and the day after each must exist too (a page reaches a
# day past its range)
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9999, 12, 30)


class NotADay(ValueError):
    """A day or month as a person typed it that is none of billing's; the message says why, naming the value."""


def parse_day(value: str) -> date:
    """YYYY-MM-DD between FIRST_DAY and LAST_DAY, for the command line and `billing serve` alike.

    Only that form: Python would also take 20261120 and 2026-W47-5, which no one means by a billing day.
    """
    try:
        day = date.fromisoformat(value) if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value) else None
    except ValueError:  # 2026-02-30
        day = None
    if day is None:
        raise NotADay(f"{value!r} is not a date like 2026-11-20")
    if not FIRST_DAY <= day <= LAST_DAY:
        raise NotADay(f"{value!r} is not a day between {FIRST_DAY} and {LAST_DAY}")
    return day


def parse_month(value: str) -> date:
    """YYYY-MM of a year between FIRST_DAY's and LAST_DAY's, as the month's first day."""
    if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", value) or not FIRST_DAY.year <= int(value[:4]) <= LAST_DAY.year:
        raise NotADay(f"{value!r} is not a month like 2026-11")
    return date(int(value[:4]), int(value[5:]), 1)


@dataclass(frozen=True)
class BillingDay:
    """The half-open interval [start, end) of one local date, as UTC instants."""

    date: date
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def _first_instant(day: date, zone: ZoneInfo) -> datetime:
    # fold=0 maps a wall time that a DST jump skips onto the jump itself, which
    # is exactly the first instant of a day whose midnight does not exist.
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(timezone.utc)


def billing_day(day: date, zone: ZoneInfo) -> BillingDay:
    """Local midnight to local midnight; 23 or 25 hours on DST changes."""
    return BillingDay(day, _first_instant(day, zone), _first_instant(day + timedelta(days=1), zone))


def yesterday(zone: ZoneInfo, now: datetime | None = None) -> date:
    """The last complete local day: the default day of a nightly run."""
    now = now or datetime.now(timezone.utc)
    return now.astimezone(zone).date() - timedelta(days=1)


def days_between(first: date, last: date) -> list[date]:
    """Every date from first to last, inclusive."""
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def days_in_month(day: date) -> int:
    """28 to 31: the days of the month `day` is in."""
    return calendar.monthrange(day.year, day.month)[1]


def day_runs(days: Iterable[date]) -> list[tuple[date, date]]:
    """Consecutive days as (first, last) runs, oldest first: how missing days are named in one line."""
    runs: list[list[date]] = []
    for day in sorted(days):
        if runs and day - runs[-1][-1] == timedelta(days=1):
            runs[-1].append(day)
        else:
            runs.append([day])
    return [(run[0], run[-1]) for run in runs]
