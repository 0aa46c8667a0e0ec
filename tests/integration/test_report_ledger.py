"""`billing report` through click against a real ledger database.

The ledger holds a handful of rows written with `replace_day`; every expected
figure below is worked out by hand from them (see LEDGER).
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from billing import frames
from billing.charge.bill import DayBill
from billing.cli import main
from billing.directory.people import Directory, Person, Team, directory_to_json
from billing.ledger.database import open_ledger
from billing.ledger.read import daily_costs
from billing.ledger.write import replace_day
from billing.money import money
from billing.publish.dayview import read_report
from tests.helpers.report_ledger import fill_ledger
from tests.helpers.reports import A100, FORMULA_TEAM, H100, LEDGER, config, database, report, report_json  # noqa: F401 (pytest fixtures)

ROBOTICS_TOTAL = 1300.20  # 57.6 + 1.2 + 0.6 + 29.5 + 9.6 + 1.7 + 1200
RANGE = ["--from", "2026-11-01", "--to", "2026-11-05"]

# --by word -> {group: cost} of team robotics over RANGE
ROBOTICS_BY = {
    "person": {"alice": 1261.10, None: 29.50, "bob": 9.60},
    "namespace": {"alice": 1261.10, "team-robotics": 29.50, "bob": 9.60},
    "cluster": {"jaguar": 1269.00, "ibis": 31.20},
    "resource": {"gpu": 1296.70, "cpu": 2.90, "memory": 0.60},
    "gpu_model": {H100: 1257.60, "": 33.00, A100: 9.60},
    "day": {"2026-11-01": 59.40, "2026-11-02": 39.10, "2026-11-04": 1201.70},
    "team": {"robotics": 1300.20},
}


def test_table_has_units_totals_and_lists_missing_days_on_stderr(config):
    result = report(config, "--team", "robotics", *RANGE)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "team robotics, 2026-11-01 to 2026-11-05, by namespace\n"
        "namespace       GPU-h  core-h   GiB-h  cost USD\n"
        "alice          524.00  150.00  400.00  1,261.10\n"
        "team-robotics   10.00       -       -     29.50\n"
        "bob              6.00       -       -      9.60\n"
        "total          540.00  150.00  400.00  1,300.20\n"
    )
    assert result.stderr == (
        "billing: 1 day was never billed and is not in this report: 2026-11-03\n"
        "billing: Prometheus had no kube-state-metrics data, so pods running then were not billed, "
        "on 2026-11-04 on ibis (7.5 % of the day)\n"
    )


def test_json_has_the_spec_shape_and_the_ledger_rows(config):
    document = report_json(config, "--team", "robotics", *RANGE)
    assert list(document) == ["team", "from", "to", "currency", "total_cost", "total_costs", "missing_days",
                              "incomplete_days",
                              "budget", "forecast", "budget_month", "month_to_date", "month_closed", "leads", "rows"]
    assert (document["team"], document["from"], document["to"]) == ("robotics", "2026-11-01", "2026-11-05")
    assert document["currency"] == "USD"
    assert document["total_cost"] == pytest.approx(ROBOTICS_TOTAL)
    assert document["missing_days"] == ["2026-11-03"]
    assert document["incomplete_days"] == [{"day": "2026-11-04", "cluster": "ibis", "coverage": 0.925}]
    expected = [
        (day.isoformat(), *row[:2], *row[3:])
        for day, rows in LEDGER.items()
        for row in rows
        if row[2] == "robotics"
    ]
    keys = ["day", "cluster", "namespace", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost",
            "list_cost"]
    assert all(list(row) == keys for row in document["rows"])
    got = sorted(tuple(row[k] for k in keys[:-2]) for row in document["rows"])
    assert got == sorted(expected)
    for row in document["rows"]:
        assert row["cost"] == pytest.approx(row["quantity"] * row["unit_price"])


def test_json_has_the_budget_and_the_forecast_of_the_month(config):
    # No budget configured. Days billed up to November 5: 1, 2, 4 and 5 (0.00; 3 never ran): 1,300.20 / 4 =
    # 325.05 a day; not billed yet: the 25 days after the 5th and the 3rd, 26: 1,300.20 + 26 x 325.05 = 9,751.50
    document = report_json(config, "--team", "robotics", *RANGE)
    assert document["budget"] is None and document["budget_month"] == "2026-11"
    assert document["month_to_date"] == pytest.approx(1300.20)
    assert document["forecast"] == pytest.approx(9751.50)
    budgeted = str(Path(config).with_name("budgeted.yaml"))
    Path(budgeted).write_text(Path(config).read_text() + "budgets:\n  monthly:\n    robotics: 60000\n")
    assert report_json(budgeted, "--team", "robotics", *RANGE)["budget"] == 60000.0
    table = report(budgeted, "--team", "robotics", *RANGE).stdout.splitlines()
    # 1,300.20 / 60,000 = 2.167 %; 9,751.50 / 60,000 = 16.25 %
    assert table[-2:] == ["budget November 2026: 60,000.00 USD, 1,300.20 USD (2.2%) spent to 2026-11-05",
                          "forecast for November 30: 9,751.50 USD (16.3%)"]
    page = report(budgeted, "--team", "robotics", *RANGE, "--format", "html").stdout
    assert "Budget November 2026: 60,000.00 USD, 1,300.20 USD (2.2%) spent to 2026-11-05.<br>Forecast" in page
    assert "budget" not in report_json(config, "--all-teams", *RANGE)


@pytest.mark.parametrize("by", sorted(ROBOTICS_BY))
def test_groups_sum_to_the_ungrouped_total(config, by):
    ungrouped = report_json(config, "--team", "robotics", *RANGE)["total_cost"]
    grouped = report_json(config, "--team", "robotics", *RANGE, "--by", by)
    costs = {row[by]: row["cost"] for row in grouped["rows"]}
    assert costs == pytest.approx(ROBOTICS_BY[by])
    assert grouped["total_cost"] == pytest.approx(ungrouped, abs=1e-9)
    assert sum(costs.values()) == pytest.approx(ROBOTICS_TOTAL)


def test_grouped_rows_carry_resource_hours(config):
    rows = report_json(config, "--team", "robotics", *RANGE, "--by", "cluster")["rows"]
    assert rows == [
        {"cluster": "jaguar", "gpu_hours": 530.0, "cpu_core_hours": 100.0, "memory_gib_hours": 400.0,
         "storage_gib_hours": 0.0, "energy_kwh": 0.0, "cost": pytest.approx(1269.0), "list_cost": pytest.approx(1269.0)},
        {"cluster": "ibis", "gpu_hours": 10.0, "cpu_core_hours": 50.0, "memory_gib_hours": 0.0,
         "storage_gib_hours": 0.0, "energy_kwh": 0.0, "cost": pytest.approx(31.2), "list_cost": pytest.approx(31.2)},
    ]


def test_the_unrequested_share_has_its_own_column_and_people_their_names(config, database):
    # 2026-11-06: carol requested 10 H100-hours at 2.40 (24.00); her share of ibis's capacity that nobody
    # requested is 5 GPU-h at 2.95 (14.75). Her 38.75 over 10 GPU-h is not a price of 3.875 a GPU-hour.
    engine = open_ledger(database)
    rows = pd.DataFrame([("jaguar", "carol", "robotics", "carol", "gpu", H100, 10.0, 2.4, 24.0, 24.0),
                         ("ibis", "carol", "robotics", "carol", "unrequested-gpu", "", 5.0, 2.95, 14.75, 14.75)],
                        columns=frames.ROWS.columns)
    directory = Directory.of([Person("carol", "Carol Example", "carol@example.org"),
                              Person("alice", "Alice Example", "alice@example.org")],
                             [Team("robotics", ("carol", "alice"), ("alice",))])
    replace_day(engine, date(2026, 11, 6), DayBill(rows), "USD", snapshot=directory_to_json(directory))
    engine.dispose()
    day = ["--from", "2026-11-06", "--to", "2026-11-06", "--by", "person"]
    document = report_json(config, "--team", "robotics", *day)
    assert document["rows"] == [{"person": "carol", "gpu_hours": 10.0, "cpu_core_hours": 0.0, "memory_gib_hours": 0.0,
                                 "storage_gib_hours": 0.0, "energy_kwh": 0.0, "requested_cost": pytest.approx(24.0), "unrequested_share": pytest.approx(14.75),
                                 "cost": pytest.approx(38.75), "list_cost": pytest.approx(38.75),
                                 "person_name": "Carol Example"}]
    assert document["leads"] == [{"uid": "alice", "name": "Alice Example"}]
    lines = report(config, "--team", "robotics", *day).stdout.splitlines()
    assert lines[1].split() == ["person", "GPU-h", "core-h", "GiB-h", "requested", "USD", "unrequested", "USD",
                                "cost", "USD"]
    assert lines[2].split() == ["carol", "10.00", "-", "-", "24.00", "14.75", "38.75"]
    assert lines[4].startswith("unrequested USD = Unrequested capacity (shared): capacity that no pod requested")
    page = report(config, "--team", "robotics", *day, "--format", "html").stdout
    assert "<td>Carol Example (carol)</td>" in page
    # a report without any such share keeps the columns it always had
    assert "unrequested_share" not in report_json(config, "--team", "robotics", *RANGE, "--by", "person")["rows"][0]


def test_csv_opens_in_a_spreadsheet_and_lists_missing_days_on_stderr(config):
    result = report(config, "--team", "robotics", *RANGE, "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 7
    assert {row["currency"] for row in rows} == {"USD"}
    assert sum(float(row["cost"]) for row in rows) == pytest.approx(ROBOTICS_TOTAL)
    assert "2026-11-03" in result.stderr and "2026-11-03" not in result.stdout


def test_a_formula_in_a_team_name_stays_text_in_csv(config):
    for args in (["--team", FORMULA_TEAM], ["--all-teams"], ["--all-teams", "--by", "team"]):
        result = report(config, *args, *RANGE, "--format", "csv")
        assert result.exit_code == 0, result.output
        cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
        assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
        if "--all-teams" in args:
            assert "'" + FORMULA_TEAM in cells


def test_a_formula_in_a_team_name_stays_text_in_the_focus_export(config):
    """FOCUS CSV goes straight into finance's spreadsheets: its text cells are guarded like the reports'."""
    result = CliRunner().invoke(main, ["export", "--config", config, "--format", "focus", "--from", "2026-11-01",
                                       "--to", "2026-11-01"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert not [cell for row in rows for cell in row.values() if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    evil = next(row for row in rows if row["ResourceName"] == "evil")
    assert evil["BillingAccountId"] == evil["BillingAccountName"] == "'" + FORMULA_TEAM
    assert json.loads(evil["Tags"])["billing/team"] == FORMULA_TEAM  # inside JSON it is no formula, and stays as is
    assert float(evil["BilledCost"]) == 1.0


def test_a_team_named_like_a_formula_is_found_and_escaped_in_html(config):
    table = report(config, "--team", FORMULA_TEAM, *RANGE)
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[-1].split() == ["total", "-", "1.00", "-", "1.00"]
    page = report(config, "--team", FORMULA_TEAM, *RANGE, "--format", "html")
    assert page.exit_code == 0, page.output
    assert "=cmd|&#39; /C calc&#39;!A0" in page.stdout and FORMULA_TEAM not in page.stdout


def test_html_to_a_file_shows_total_and_missing_days(config, tmp_path):
    target = tmp_path / "robotics.html"
    result = report(config, "--team", "robotics", *RANGE, "--format", "html", "--output", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    page = target.read_text()
    assert "1,300.20 USD" in page and "2026-11-03" in page and "2026-11-04 on ibis (7.5 % of the day)" in page
    assert page.count("<tr>") == 5  # header, three namespaces, totals


def test_an_output_file_that_cannot_be_written_is_a_usage_error(config, tmp_path):
    result = report(config, "--team", "robotics", *RANGE, "--output", str(tmp_path / "no" / "such.csv"))
    assert result.exit_code == 2 and "cannot write" in result.stderr and "No such file or directory" in result.stderr


def test_unknown_team_exits_2_naming_the_closest(config):
    result = report(config, "--team", "robotic", *RANGE)
    assert result.exit_code == 2
    assert result.stderr == "billing: no team named 'robotic' in the ledger; closest: robotics\n"
    assert result.stdout == ""


def test_unknown_person_exits_2(config):
    result = report(config, "--person", "alicia", *RANGE)
    assert result.exit_code == 2
    assert "no person named 'alicia'" in result.stderr and "closest: alice" in result.stderr


def test_a_team_without_rows_in_the_range_is_not_unknown(config):
    document = report_json(config, "--team", "vision", "--from", "2026-11-05", "--to", "2026-11-05")
    assert document["rows"] == [] and document["total_cost"] == 0 and document["missing_days"] == []


def test_person_spending_across_teams(config):
    document = report_json(config, "--person", "bob", *RANGE, "--by", "team")
    assert document["person"] == "bob" and document["team"] is None
    assert {row["team"]: row["cost"] for row in document["rows"]} == pytest.approx({"robotics": 9.6, "vision": 9.6})


def test_all_teams(config):
    document = report_json(config, "--all-teams", *RANGE, "--by", "team")
    costs = {row["team"]: row["cost"] for row in document["rows"]}
    assert costs == pytest.approx({"robotics": 1300.2, "vision": 9.72, FORMULA_TEAM: 1.0})


def test_bad_ranges_and_subjects_are_usage_errors(config):
    assert report(config, "--team", "robotics", "--from", "2026-11-05", "--to", "2026-11-01").exit_code == 2
    assert report(config, "--team", "robotics", "--person", "bob").exit_code == 2
    assert report(config, *RANGE).exit_code == 2
    assert report(config, "--team", "robotics", "--from", "yesterday").exit_code == 2


def test_mixed_currencies_are_refused(config, database):
    frame = pd.DataFrame(
        [("jaguar", "alice", "robotics", "alice", "cpu", "", 1.0, 1.0, 1.0, 1.0)],
        columns=["cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost",
                 "list_cost"],
    )
    engine = open_ledger(database)
    replace_day(engine, date(2026, 11, 3), DayBill(frame), "EUR")
    engine.dispose()
    result = report(config, "--team", "robotics", *RANGE)
    assert result.exit_code == 2
    assert "EUR and USD" in result.stderr
    # the team's budget compares one month's spend in one currency: refused for any range of that month; the
    # person's report of days in one currency is not
    assert report(config, "--team", "robotics", "--from", "2026-11-04", "--to", "2026-11-05").exit_code == 2
    assert report(config, "--person", "alice", "--from", "2026-11-04", "--to", "2026-11-05").exit_code == 0


def test_shell_completion_offers_the_ledger_s_teams_and_people(config):
    def complete(words: str) -> list[str]:
        env = {"_BILLING_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        result = CliRunner().invoke(main, [], env=env, prog_name="billing")
        return [line.split(",", 1)[1] for line in result.stdout.splitlines() if line]

    assert complete(f"billing report --config {config} --team r") == ["robotics"]
    assert complete(f"billing report --config {config} --person b") == ["bob"]
    assert complete("billing report --config /nonexistent.yaml --team r") == []


def test_a_page_a_report_and_serve_sum_the_same_cents(database, write_config, monkeypatch):
    """Costs of 0.70, 0.10 and 0.005 are 0.805 and round to 0.81; the database's float sum is
    0.8049999999999999, so `billing report` said 0.80 where the day's page said 0.81. Both kinds of database."""
    day = date(2026, 11, 20)
    fill_ledger(database, {day: [("jaguar", name, "robotics", None, "cpu", "", 1.0, cost, cost)
                                 for name, cost in (("a", 0.7), ("b", 0.1), ("c", 0.005))]})
    config = str(write_config(database=database, currency="USD"))
    answer = CliRunner().invoke(main, ["report", "--team", "robotics", "--from", str(day), "--to", str(day),
                                       "--by", "day", "--config", config])
    assert answer.exit_code == 0, answer.output
    assert [line.split()[-1] for line in answer.stdout.splitlines() if line.startswith(("2026-", "total"))] == [
        "0.81", "0.81"]
    engine = open_ledger(database)
    page = read_report(engine, day, "USD", "unallocated")
    assert money(page.team("robotics").month_to_date, "USD") == money(page.cost, "USD") == "0.81 USD"
    assert money(daily_costs(engine, day, day, team="robotics")["cost"].iloc[0], "USD") == "0.81 USD"  # serve's
