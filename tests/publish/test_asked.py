"""billing/publish/asked.py: what a person typed read once, refused in the same words by every interface."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from billing.publish.asked import ReportError, bounded_range, breakdown, day, month, report_range, subject
from billing.publish.report import Subject

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    "now, expected",
    [
        (datetime(2026, 11, 20, 12, tzinfo=timezone.utc), (date(2026, 11, 1), date(2026, 11, 19))),
        # on the 1st: all of the previous month
        (datetime(2026, 11, 1, 8, tzinfo=timezone.utc), (date(2026, 10, 1), date(2026, 10, 31))),
        # 23:30 UTC on Oct 31 is already Nov 1 in Berlin
        (datetime(2026, 10, 31, 23, 30, tzinfo=timezone.utc), (date(2026, 10, 1), date(2026, 10, 31))),
        # on the 2nd: just the 1st
        (datetime(2026, 1, 2, 8, tzinfo=timezone.utc), (date(2026, 1, 1), date(2026, 1, 1))),
    ],
)
def test_default_range_is_the_month_to_yesterday(now, expected):
    assert report_range(BERLIN, None, None, now) == expected


def test_range_from_to_only_starts_on_the_first_of_that_month():
    assert report_range(BERLIN, None, date(2026, 2, 14)) == (date(2026, 2, 1), date(2026, 2, 14))


def test_range_ending_before_it_starts_is_refused():
    with pytest.raises(ReportError, match="ends"):
        report_range(BERLIN, date(2026, 3, 2), date(2026, 3, 1))


@pytest.mark.parametrize("by", [None, "team", "day", "workload", "label:experiment"])
def test_groupings_and_breakdowns_of_configured_labels_are_taken(by):
    assert breakdown(by, ["experiment"]) == by


@pytest.mark.parametrize("by, cost_labels, says", [
    ("label:project", ["experiment", "team"], "'project': it is not in the config key cost_labels, which names "
                                              "experiment, team"),
    ("label:experiment", [], "cost_labels, which is empty"),
    ("label:", ["experiment"], "by label ''"),
    ("owner", ["experiment"], "cannot group by 'owner': give one of team, person, namespace"),
])
def test_other_groupings_are_refused_naming_the_cost_labels(by, cost_labels, says):
    with pytest.raises(ReportError, match=re.escape(says)):
        breakdown(by, cost_labels)


@pytest.mark.parametrize("value, name, says", [
    ("2026-02-30", "", "'2026-02-30' is not a date like 2026-11-20"),
    ("2026-02-30", "to", "to='2026-02-30' is not a date like 2026-11-20"),
    ("1969-12-31", "first_day", "first_day='1969-12-31' is not a day between 1970-01-01 and 9999-12-30"),
    ("", "", "'' is not a date like 2026-11-20"),  # the command line's --date "" is no day; serve's empty is none
])
def test_a_day_that_is_none_is_refused_naming_the_argument(value, name, says):
    with pytest.raises(ReportError) as refused:
        day(value, name)
    assert str(refused.value) == says


def test_a_day_not_given_is_none_and_a_day_is_its_date():
    assert day(None, "to") is None
    assert day("2026-11-20", "to") == date(2026, 11, 20)


@pytest.mark.parametrize("value, name, says", [
    ("2026-13", "", "'2026-13' is not a month like 2026-11"),
    ("2026-1", "month", "month='2026-1' is not a month like 2026-11"),
    ("0999-12", "month", "month='0999-12' is not a month like 2026-11"),  # before the first day a ledger holds
])
def test_a_month_that_is_none_is_refused_naming_the_argument(value, name, says):
    with pytest.raises(ReportError) as refused:
        month(value, name)
    assert str(refused.value) == says


def test_a_month_is_its_first_day():
    assert month("2026-11") == date(2026, 11, 1) and month("9999-12") == date(9999, 12, 1)


def test_a_bounded_range_takes_empty_as_not_given_and_366_days_at_most():
    now_range = report_range(BERLIN, None, None)
    assert bounded_range(BERLIN, "", None, ("from", "to")) == now_range
    assert bounded_range(BERLIN, "2025-11-20", "2026-11-20", ("from", "to")) == (date(2025, 11, 20), date(2026, 11, 20))
    with pytest.raises(ReportError, match=re.escape("the range 2025-11-19 to 2026-11-20 is longer than 366 days")):
        bounded_range(BERLIN, "2025-11-19", "2026-11-20", ("from", "to"))
    with pytest.raises(ReportError, match=re.escape("last_day='x' is not a date")):
        bounded_range(BERLIN, None, "x", ("first_day", "last_day"))


def test_a_subject_is_the_one_named_or_none():
    assert subject("robotics", None) == Subject("team", "robotics")
    assert subject(None, "alice") == Subject("person", "alice")
    assert subject(None, None, everyone=True) == Subject("all")
    assert subject(None, None) is None


@pytest.mark.parametrize("team, person, everyone, names, says", [
    ("robotics", "alice", False, ("team=", "person="), "give team= or person=, not both"),
    ("robotics", None, True, ("--team", "--person", "--all-teams"),
     "give --team, --person or --all-teams, not more than one"),
])
def test_a_subject_named_twice_is_refused_in_the_interfaces_words(team, person, everyone, names, says):
    with pytest.raises(ReportError) as refused:
        subject(team, person, everyone, names)
    assert str(refused.value) == says
