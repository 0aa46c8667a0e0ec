"""The day's view model against the hand-worked ledger of tests/helpers/report_ledger.py."""

from datetime import date

import pytest

from billing.config import NamespaceRules
from billing.directory.people import Directory, Person, Team
from billing.ledger.database import open_ledger
from billing.ledger.read import read_rows
from billing.publish.dayview import RenderError, held_table, read_report, slug, summarize, with_directory
from tests.helpers.day_reports import ledger, report, with_workload_costs  # noqa: F401 (pytest fixtures)
from tests.helpers.report_ledger import (
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
# --- what changed since the day before -------------------------------------------------------------------

BEFORE, AFTER = date(2026, 11, 2), date(2026, 11, 3)
#                cluster   namespace  team        owner    cost before, cost after (None: not in the ledger)
MOVING = [
    ("jaguar", "carol", "robotics", "carol", 1885.15, 43.93),  # -1,841.22
    ("jaguar", "dave", "robotics", "dave", None, 100.00),  # appears: +100.00
    ("ibis", "erin", "robotics", "erin", 50.00, None),  # disappears: -50.00
    ("ibis", "same", "robotics", None, 10.00, 10.00),  # no change: not a mover
    ("ibis", "tiny", "robotics", None, 1.000, 1.004),  # less than a cent: not a mover
    ("ibis", "n1", "robotics", None, 1.00, 4.00),  # +3.00
    ("ibis", "n2", "robotics", None, 6.00, 2.00),  # -4.00
    ("ibis", "n3", "robotics", None, 1.00, 1.50),  # +0.50: sixth of robotics, so left out
    ("ibis", "v1", "vision", None, 5.00, 7.00),  # +2.00
]


def moving_ledger(path, days=(BEFORE, AFTER)):
    rows = {day: [(c, ns, team, owner, "cpu", "", 1.0, cost, cost)
                  for c, ns, team, owner, *costs in MOVING if (cost := costs[n]) is not None]
            for n, day in enumerate((BEFORE, AFTER)) if day in days}
    return open_ledger(write_ledger(path, rows))


def movers(changes):
    return [(m.namespace, f"{m.before:.2f}", f"{m.after:.2f}", f"{m.change:+.2f}") for m in changes.namespaces]


def test_what_changed_lists_the_largest_movers_up_and_down(tmp_path):
    report = read_report(moving_ledger(tmp_path / "l.db"), AFTER, "USD", "unallocated")
    assert report.changes.since == BEFORE and report.changes.ran
    assert movers(report.changes) == [
        ("carol", "1885.15", "43.93", "-1841.22"),
        ("dave", "0.00", "100.00", "+100.00"),
        ("erin", "50.00", "0.00", "-50.00"),
        ("n2", "6.00", "2.00", "-4.00"),
        ("n1", "1.00", "4.00", "+3.00"),
    ]
    assert movers(report.team("vision").changes) == [("v1", "5.00", "7.00", "+2.00")]
    assert movers(report.team("robotics").changes) == movers(report.changes)  # v1 is vision's, sixth overall
    assert report.changes.workloads == ()  # no workload costs on either day: namespaces only


def test_what_changed_says_when_the_day_before_never_ran(tmp_path):
    report = read_report(moving_ledger(tmp_path / "l.db", days=(AFTER,)), AFTER, "USD", "unallocated")
    assert not report.changes.ran and report.changes.namespaces == ()
    assert all(not t.changes.ran for t in report.teams)


def workload_movers(changes):
    return [(m.workload, m.namespace, f"{m.change:+.2f}") for m in changes.workloads]


def test_workload_movers_and_each_teams_top_workloads(ledger):
    report = read_report(with_workload_costs(ledger), DAY, "USD", "unallocated")
    assert workload_movers(report.changes) == [
        ("Job/train-b", "alice", "+24.00"),  # new
        ("Job/train-a", "alice", "-12.00"),  # gone
        ("Deployment/notebook", "bob", "+8.85"),  # 2.95 -> 5.90 + 5.90
        ("Pod/x", "stray", "+1.70"),
        ("Pod/debug", "team-robotics", "+1.50"),
    ]
    robotics = report.team("robotics")
    assert workload_movers(robotics.changes) == [
        ("Job/train-b", "alice", "+24.00"), ("Job/train-a", "alice", "-12.00"),
        ("Deployment/notebook", "bob", "+5.90"), ("Pod/debug", "team-robotics", "+1.50"),
        ("Deployment/jupyter", "alice", "+1.20"),
    ]
    assert [(w["workload"], w["owner"], f"{w['cost']:.2f}") for w in robotics.top_workloads] == [
        ("Job/train-b", "alice", "24.00"), ("Deployment/notebook", "bob", "5.90"),
        ("Pod/debug", "", "1.50"), ("Deployment/jupyter", "alice", "1.20"),
    ]
    assert {owner: [w["workload"] for w in top] for owner, top in robotics.owner_workloads.items()} == {
        "alice": ["Job/train-b", "Deployment/jupyter"], "bob": ["Deployment/notebook"], "": ["Pod/debug"]}


def test_workload_movers_need_workload_costs_on_both_days(ledger):
    report = read_report(with_workload_costs(ledger, days=(DAY,)), DAY, "USD", "unallocated")
    assert report.changes.workloads == () and report.changes.namespaces  # not everything shown as new
    assert report.team("robotics").top_workloads  # the day itself has them
    assert read_report(ledger, date(2026, 11, 19), "USD", "unallocated").team("robotics").top_workloads == ()


def held(resource, cost, reason, charged=False):
    return {"team": "robotics", "cluster": "jaguar", "resource": resource, "gpu_model": "", "quantity": 1.0,
            "cost": cost, "reason": reason, "charged": charged}


def test_a_held_table_leaves_out_rows_under_a_cent_counts_them_in_its_total_and_spells_out_reasons():
    """The pages listed "0.00" rows, had no total, and showed a bare dash for an empty reason."""
    table = held_table([held("gpu", 2.404, "ImagePullBackOff"), held("cpu", 0.004, ""), held("cpu", 0.003, "Odd"),
                        held("memory", 0.011, "")])
    assert [(row["resource"], row["reason"], row["kubernetes_reason"]) for row in table.rows] == [
        ("gpu", "image pull failing, retrying", "ImagePullBackOff"), ("memory", "not known", "")]
    assert table.total == pytest.approx(2.422)  # 2.404 + 0.004 + 0.003 + 0.011: 2.42, the rows 2.40 + 0.01 (Rounding 0.01)
    assert table.charged is False and table.charged_total == 0


def test_a_held_table_says_what_was_charged_where_some_rows_were_and_some_not():
    table = held_table([held("gpu", 3.0, "InitContainersRunning", charged=True), held("cpu", 1.0, "SomeNewReason")])
    assert table.charged is None and table.charged_total == 3.0 and table.total == 4.0
    assert [row["reason"] for row in table.rows] == ["init containers running", "some new reason"]
