from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from billing.days import billing_day, day_runs, days_between, yesterday


@pytest.mark.parametrize(
    "zone, day, start_utc, hours",
    [
        ("UTC", date(2026, 11, 20), datetime(2026, 11, 20, 0, 0), 24),
        # Berlin springs forward at 02:00 on the last Sunday of March: 23 hours, starting at CET midnight
        ("Europe/Berlin", date(2026, 3, 29), datetime(2026, 3, 28, 23, 0), 23),
        # ... and falls back on the last Sunday of October: 25 hours, starting at CEST midnight
        ("Europe/Berlin", date(2026, 10, 25), datetime(2026, 10, 24, 22, 0), 25),
        # Havana jumps from 00:00 to 01:00: the day starts at 01:00 CDT = 05:00 UTC
        ("America/Havana", date(2026, 3, 8), datetime(2026, 3, 8, 5, 0), 23),
        ("Asia/Kathmandu", date(2026, 1, 1), datetime(2025, 12, 31, 18, 15), 24),
    ],
)
def test_billing_day_bounds(zone, day, start_utc, hours):
    period = billing_day(day, ZoneInfo(zone))
    assert period.start == start_utc.replace(tzinfo=timezone.utc)
    assert period.seconds == hours * 3600
    # consecutive days tile time with no gap and no overlap
    assert billing_day(date.fromordinal(day.toordinal() + 1), ZoneInfo(zone)).start == period.end


def test_yesterday_is_local():
    # 23:30 UTC on the 20th is already the 21st in Berlin, so yesterday there is the 20th
    now = datetime(2026, 11, 20, 23, 30, tzinfo=timezone.utc)
    assert yesterday(ZoneInfo("Europe/Berlin"), now) == date(2026, 11, 20)
    assert yesterday(ZoneInfo("UTC"), now) == date(2026, 11, 19)


def test_days_between_is_inclusive():
    assert days_between(date(2026, 2, 27), date(2026, 3, 1)) == [date(2026, 2, 27), date(2026, 2, 28), date(2026, 3, 1)]
    assert days_between(date(2026, 3, 1), date(2026, 2, 27)) == []


def test_day_runs_join_consecutive_days_across_months_and_ignore_order():
    days = [date(2026, 11, 2), date(2026, 10, 31), date(2026, 11, 1), date(2026, 11, 9), date(2026, 11, 3)]
    assert day_runs(days) == [(date(2026, 10, 31), date(2026, 11, 3)), (date(2026, 11, 9), date(2026, 11, 9))]
    assert day_runs([]) == []
