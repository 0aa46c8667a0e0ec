"""The day's view model against the hand-worked ledger of tests/report_ledger.py."""

from datetime import date

import pytest

from billing.config import NamespaceRules
from billing.dayview import RenderError, read_report, slug, summarize, with_directory
from billing.directory import Directory, Person, Team
from billing.ledger import open_ledger, read_rows
from tests.report_ledger import (
    DAY,
    DAY_CHANGE,
    DAY_TOTAL,
    MISSING_IN_MONTH,
    MONTH_TOTAL,
    TEAM_CHANGE,
    TEAM_COST,
    TEAM_MONTH,
    write_ledger,
)


@pytest.fixture
def ledger(tmp_path):
    return open_ledger(write_ledger(tmp_path / "ledger.db"))


@pytest.fixture
def report(ledger):
    return read_report(ledger, DAY, "USD", "unallocated")


def test_day_figures_match_the_hand_worked_ledger(report):
    assert f"{report.cost:.2f}" == DAY_TOTAL
    assert f"{report.cost - report.previous:+.2f}" == DAY_CHANGE
    assert f"{report.month_to_date:.2f}" == MONTH_TOTAL
    assert report.missing_in_month == MISSING_IN_MONTH
    assert [t.team for t in report.teams] == ["robotics", "vision", "unallocated", "platform"]
    for team in report.teams:
        assert f"{team.cost:.2f}" == TEAM_COST[team.team]
        assert f"{team.cost - team.previous:+.2f}" == TEAM_CHANGE[team.team]
        assert f"{team.month_to_date:.2f}" == TEAM_MONTH[team.team]


def test_trend_tells_never_run_days_from_zero_cost_days(report):
    trend = {t.day: t.cost for t in report.team("robotics").trend}
    assert len(trend) == 30 and min(trend) == date(2026, 10, 22) and max(trend) == DAY
    assert trend[date(2026, 10, 25)] == pytest.approx(240.0)
    assert trend[date(2026, 11, 10)] == 0.0  # run, nothing used
    assert trend[date(2026, 11, 9)] is None  # never run
    assert trend[DAY] == pytest.approx(32.60)


def test_a_day_never_run_is_refused_not_shown_as_zero(ledger):
    with pytest.raises(RenderError, match="no run of 2026-11-18"):
        read_report(ledger, date(2026, 11, 18), "USD", "unallocated")


def test_costs_in_another_currency_are_not_added_up(ledger):
    rows = read_rows(ledger, date(2026, 10, 22), DAY)
    rows.loc[rows["day"] == date(2026, 10, 25), "currency"] = "EUR"
    with pytest.raises(RenderError, match="EUR"):
        summarize(rows, set(rows["day"]), DAY, "USD", "unallocated")


def test_file_names_of_teams_are_safe_and_distinct():
    assert slug("robotics") == "robotics"
    names = [slug(n) for n in ("../x", "a/b", "a-b", "A-B", ".", "")]
    assert len(set(names)) == len(names)
    assert all(n and "/" not in n and not n.startswith(".") for n in names)


DIRECTORY = Directory.of(
    [Person("alice", "Alice Example", "alice@example.org"), Person("bob", "Bob Example", "bob@example.org"),
     Person("erin", "Erin Example", "erin@example.org")],
    [Team("robotics", ("alice", "bob"), ("erin", "alice")), Team("vision", ("bob",), ())],
)


def test_the_directory_names_people_and_leads_and_says_why_a_namespace_is_unallocated(report):
    named = with_directory(report, DIRECTORY, NamespaceRules())
    assert named.team("robotics").leads == ("erin", "alice") and named.team("vision").leads == ()
    assert named.team("platform").leads == ()  # an override's team that the directory does not have
    # owners of the day and leads, by their directory names
    assert named.people == {"alice": "Alice Example", "bob": "Bob Example", "erin": "Erin Example"}
    assert named.unallocated == [{"cluster": "ibis", "namespace": "stray", "owner": "", "cost": pytest.approx(1.70),
                                  "reason": "no person 'stray' in the directory"}]
    assert with_directory(report, None, NamespaceRules()) == report  # no run stored a directory yet
