"""Monthly statements and closing a month, on a small ledger worked out by hand (see OCTOBER).

`closing_scenario` runs on any database URL: here on SQLite, in
tests/integration/test_statement_postgres.py on a real PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from billing.cli import main
from billing.directory.people import Directory, Team, directory_to_json
from billing.ledger.database import fetch, open_ledger
from billing.ledger.read import read_rows
from billing.ledger.tables import adjustments, month_closings
from billing.ledger.write import replace_day
from billing.publish.statement import StatementError, build_statement, close_month, reopen_month
from billing.publish.statement_formats import FORMATS
from tests.helpers.report_ledger import frame
from tests.publish.test_budgets import budget_job  # noqa: F401  (a fixture)

H100 = "NVIDIA-H100-80GB-HBM3"
OCT, NOV, DEC = date(2026, 10, 1), date(2026, 11, 1), date(2026, 12, 1)
TODAY_DONE = date(2026, 12, 20)  # the last complete day when closing: October and November have ended

#       cluster   namespace  team        owner    resource        gpu_model quantity unit_price cost   list_cost
OCT_5 = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.40, 24.00, 24.00),
    ("jaguar", "bob", "robotics", "bob", "cpu", "", 100.0, 0.012, 0.60, 1.20),  # backfill class: half price
    ("heron", "pool:p1", "robotics", None, "reserved-gpu", "", 24.0, 2.00, 48.00, 48.00),
    ("heron", "carol", "vision", "carol", "gpu", "", 5.0, 2.00, 10.00, 10.00),
    ("heron", "carol", "robotics", "carol", "credit-gpu", "", -5.0, 2.00, -10.00, -10.00),
    ("jaguar", "team-robotics", "robotics", None, "idle-cpu", "", 50.0, 0.012, 0.60, 0.60),
]
OCT_6 = [("jaguar", "alice", "robotics", "alice", "gpu", H100, 5.0, 2.40, 12.00, 12.00)]
# October 5 re-run at new prices: H100 3.00 (+6.00 for robotics), heron GPUs 2.50 (vision +2.50, and robotics'
# credit -2.50, its pool's reservation +12.00); idle no longer shared (-0.60)
OCT_5_RERUN = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 3.00, 30.00, 30.00),
    ("jaguar", "bob", "robotics", "bob", "cpu", "", 100.0, 0.012, 0.60, 1.20),
    ("heron", "pool:p1", "robotics", None, "reserved-gpu", "", 24.0, 2.50, 60.00, 60.00),
    ("heron", "carol", "vision", "carol", "gpu", "", 5.0, 2.50, 12.50, 12.50),
    ("heron", "carol", "robotics", "carol", "credit-gpu", "", -5.0, 2.50, -12.50, -12.50),
]
NOV_2 = [("jaguar", "team-robotics", "robotics", None, "cpu", "", 10.0, 0.012, 0.12, 0.12)]

# October's statement by hand: robotics 36.00 (H100 15 h) + 1.20 - 0.60 (cpu, discount) + 0.60 (idle)
# + 48.00 (pool) - 10.00 (credit) = 75.20; vision 10.00
OCT_LINES = {
    ("robotics", "jaguar", "charge", "gpu", H100): (15.0, "36.00"),
    ("robotics", "jaguar", "charge", "cpu", ""): (100.0, "1.20"),
    ("robotics", "jaguar", "discount", "cpu", ""): (None, "-0.60"),
    ("robotics", "jaguar", "idle", "idle-cpu", ""): (50.0, "0.60"),
    ("robotics", "heron", "reserved", "reserved-gpu", ""): (24.0, "48.00"),
    ("robotics", "heron", "credit", "credit-gpu", ""): (-5.0, "-10.00"),
    ("vision", "heron", "charge", "gpu", ""): (5.0, "10.00"),
}
OCT_TOTALS = {"robotics": "75.20", "vision": "10.00"}
# what the re-run of October 5 books in November, per (team, cluster, resource)
OCT_5_ADJUSTMENTS = {
    ("robotics", "jaguar", "gpu"): "6.00",
    ("robotics", "jaguar", "idle-cpu"): "-0.60",
    ("robotics", "heron", "reserved-gpu"): "12.00",
    ("robotics", "heron", "credit-gpu"): "-2.50",
    ("vision", "heron", "gpu"): "2.50",
}
# November: robotics 0.12 + 6.00 - 0.60 + 12.00 - 2.50 = 15.02; vision 2.50
NOV_TOTALS = {"robotics": "15.02", "vision": "2.50"}
DIRECTORY = Directory({}, {"robotics": Team("robotics", (), (), cost_center="CC-4711"),
                           "vision": Team("vision", (), ())})


def cents(value: float) -> str:
    return str(Decimal(repr(float(value))).quantize(Decimal("0.01")) + 0)


def write_month(engine, month: date, days: dict[date, list[tuple]]) -> None:
    """Every day of the month run (most with no usage), the given days with their rows."""
    day = month
    while day.month == month.month:
        replace_day(engine, day, frame(days.get(day, [])), "USD", snapshot=directory_to_json(DIRECTORY))
        day += timedelta(days=1)


def all_formats(engine, month: date) -> dict[str, str]:
    statement = build_statement(engine, month, "USD", {"robotics": "CC-4711"})
    return {name: render(statement) for name, render in FORMATS.items()}


def team_totals(engine, month: date) -> dict[str, str]:
    document = json.loads(all_formats(engine, month)["json"])
    return {team["team"]: cents(team["total"]) for team in document["teams"]}


def booked(engine, month: date) -> dict[tuple, str]:
    rows = fetch(engine, adjustments.select().where(adjustments.c.month == month))
    sums: dict[tuple, float] = {}
    for row in rows:
        key = (row["team"], row["cluster"], row["resource"])
        sums[key] = sums.get(key, 0.0) + row["amount"]
    return {key: cents(value) for key, value in sums.items() if cents(value) != "0.00"}


def closing_scenario(url: str) -> None:
    """Close October, re-run one of its days at new prices: October stays, November gets the difference."""
    engine = open_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    write_month(engine, NOV, {date(2026, 11, 2): NOV_2})

    october = build_statement(engine, OCT, "USD", {"robotics": "CC-4711"})
    assert {(line.team, line.cluster, line.kind, line.resource, line.gpu_model): (line.quantity, cents(line.amount))
            for line in october.lines} == OCT_LINES
    assert team_totals(engine, OCT) == OCT_TOTALS
    ledger_total = read_rows(engine, OCT, date(2026, 10, 31))["cost"].sum()
    assert cents(october.total) == cents(ledger_total) == "85.20"  # the statement adds up to the ledger

    open_json = json.loads(all_formats(engine, OCT)["json"])
    close_month(engine, OCT, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"})
    before = all_formats(engine, OCT)
    closed_json = json.loads(before["json"])
    assert closed_json.pop("closed")["closed_by"] == "finance-bot" and open_json.pop("closed") is None
    assert closed_json == open_json  # closing changes no figure

    replace_day(engine, date(2026, 10, 5), frame(OCT_5_RERUN), "USD")
    assert read_rows(engine, date(2026, 10, 5), date(2026, 10, 5))["cost"].sum() == pytest.approx(90.60)  # new rows
    assert all_formats(engine, OCT) == before  # byte for byte, every format
    assert booked(engine, NOV) == OCT_5_ADJUSTMENTS
    assert {r["corrects"] for r in fetch(engine, adjustments.select())} == {date(2026, 10, 5)}
    assert team_totals(engine, NOV) == NOV_TOTALS
    november = json.loads(all_formats(engine, NOV)["json"])
    robotics = next(t for t in november["teams"] if t["team"] == "robotics")
    assert robotics["cost_center"] == "CC-4711"
    assert {(line["cluster"], line["resource"], line["corrects"], cents(line["amount"])) for line in robotics["lines"]
            if line["kind"] == "adjustment"} == {("jaguar", "gpu", "2026-10-05", "6.00"),
                                              ("jaguar", "idle-cpu", "2026-10-05", "-0.60"),
                                              ("heron", "reserved-gpu", "2026-10-05", "12.00"),
                                              ("heron", "credit-gpu", "2026-10-05", "-2.50")}
    ledger_nov = read_rows(engine, NOV, date(2026, 11, 30))["cost"].sum()
    assert cents(november["total"]) == cents(ledger_nov + 6.00 - 0.60 + 12.00 - 2.50 + 2.50) == "17.52"

    replace_day(engine, date(2026, 10, 5), frame(OCT_5_RERUN), "USD")  # the same re-run again: no change, no booking
    assert booked(engine, NOV) == OCT_5_ADJUSTMENTS

    # November closed too: a correction of October now goes to December, and back to the old prices it cancels out
    close_month(engine, NOV, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"})
    replace_day(engine, date(2026, 10, 5), frame(OCT_5), "USD")
    assert booked(engine, DEC) == {key: cents(-float(value)) for key, value in OCT_5_ADJUSTMENTS.items()}
    assert all_formats(engine, OCT) == before

    with pytest.raises(StatementError, match="2026-11 is closed too; reopen the latest closed month first"):
        reopen_month(engine, OCT, "alice")
    reopen_month(engine, NOV, "alice")
    reopen_month(engine, OCT, "alice")  # its statement is the ledger again; corrections of it are dropped
    assert fetch(engine, adjustments.select()) == []
    assert team_totals(engine, OCT) == OCT_TOTALS  # the ledger holds October 5 at its old prices again
    assert team_totals(engine, NOV) == {"robotics": "0.12"}
    log = [(r["month"], r["action"], r["who"]) for r in fetch(engine, month_closings.select()
                                                              .order_by(month_closings.c.logged_at))]
    assert log == [(OCT, "close", "finance-bot"), (NOV, "close", "finance-bot"), (NOV, "reopen", "alice"),
                   (OCT, "reopen", "alice")]


def test_close_rerun_and_reopen_on_sqlite(tmp_path):
    closing_scenario(f"sqlite:///{tmp_path}/ledger.db")


def test_a_month_cannot_close_before_it_ends_nor_twice_nor_with_days_never_run(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(engine, date(2026, 11, 2), frame(NOV_2), "USD")
    with pytest.raises(StatementError, match="2026-11 has not ended yet"):
        close_month(engine, NOV, "bob", date(2026, 11, 29), "USD", {})
    with pytest.raises(StatementError, match=r"2026-11 has 29 day\(s\) never run, first 2026-11-01"):
        close_month(engine, NOV, "bob", date(2026, 11, 30), "USD", {})
    closed = close_month(engine, NOV, "bob", date(2026, 11, 30), "USD", {}, allow_missing=True)
    assert closed.missing_days[:2] == [NOV, date(2026, 11, 3)]
    with pytest.raises(StatementError, match="2026-11 was closed on .* by bob; reopen it first"):
        close_month(engine, NOV, "bob", date(2026, 11, 30), "USD", {})
    assert json.loads(FORMATS["json"](build_statement(engine, NOV, "USD", {})))["missing_days"][0] == "2026-11-01"
    engine2 = open_ledger(f"sqlite:///{tmp_path}/other.db")
    replace_day(engine2, date(2026, 11, 2), frame(NOV_2), "USD")
    in_progress = build_statement(engine2, NOV, "USD", {}, last_complete_day=date(2026, 11, 3))
    assert in_progress.missing_days == [NOV, date(2026, 11, 3)]  # November 4 and later have not ended


def test_statement_formats(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    statement = build_statement(engine, OCT, "USD", {"robotics": "=CC"})
    rows = list(csv.DictReader(io.StringIO(FORMATS["csv"](statement))))
    assert sum(float(r["amount"]) for r in rows) == pytest.approx(85.20)
    assert {r["cost_center"] for r in rows} == {"'=CC", ""}  # a formula stays text
    assert rows[0].keys() == {"month", "team", "cost_center", "cluster", "kind", "resource", "gpu_model", "corrects",
                              "quantity", "amount", "currency"}
    page = FORMATS["html"](statement)
    assert page.count('<section class="team">') == 2 and "break-after: page" in page
    assert "75.20 USD" in page and "10.00 USD" in page and "Priority-class discount, CPU" in page
    # robotics by kind: usage 36.00 + 1.20, discount -0.60, pool 48.00, credit -10.00, idle 0.60
    for label, amount in [("Usage at list price", "37.20"), ("Priority-class discounts", "-0.60"),
                          ("Reserved pools", "48.00"), ("Credits for use of reserved pools", "-10.00"),
                          ("Unrequested capacity (shared)", "0.60")]:
        assert f'<td>{label}</td><td class="num">{amount} USD</td>' in page
    with pytest.raises(StatementError, match="no team named 'robotic' on the statement of 2026-10; closest: robotics"):
        build_statement(engine, OCT, "USD", {}, team="robotic")


def test_cli_statement_close_and_reopen(tmp_path, write_config):
    url = f"sqlite:///{tmp_path}/ledger.db"
    engine = open_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    config = str(write_config(database=url, currency="USD"))
    runner = CliRunner()
    first = runner.invoke(main, ["statement", "--month", "2026-10", "--format", "json", "--config", config])
    assert first.exit_code == 0, first.output
    document = json.loads(first.output)
    assert document["closed"] is None and cents(document["total"]) == "85.20"
    assert {t["team"]: t["cost_center"] for t in document["teams"]} == {"robotics": "CC-4711", "vision": ""}

    closed = runner.invoke(main, ["close", "--month", "2026-10", "--by", "finance", "--config", config])
    assert closed.exit_code == 0 and "closed 2026-10 (by finance): 2 teams, 7 lines, total 85.20 USD" in closed.output
    again = runner.invoke(main, ["close", "--month", "2026-10", "--config", config])
    assert again.exit_code == 2 and "reopen it first" in again.output
    team = runner.invoke(main, ["statement", "--month", "2026-10", "--team", "vision", "--format", "csv",
                                "--config", config])
    assert team.exit_code == 0 and team.output.count("\n") == 2  # header and vision's one line

    bad = runner.invoke(main, ["statement", "--month", "2026-13", "--config", config])
    assert bad.exit_code == 2 and "'2026-13' is not a month like 2026-11" in bad.output
    reopened = runner.invoke(main, ["close", "--reopen", "--month", "2026-10", "--by", "alice", "--config", config])
    assert reopened.exit_code == 0 and "reopened 2026-10 (by alice)" in reopened.output
    not_closed = runner.invoke(main, ["close", "--reopen", "--month", "2026-10", "--config", config])
    assert not_closed.exit_code == 2 and "2026-10 is not closed" in not_closed.output


def test_billing_run_of_a_closed_day_at_a_new_price_books_the_difference(budget_job, tmp_path):  # noqa: F811
    """Through the commands: 21.00 a day (10 GPU-h at 2.00, 100 core-h at 0.01); October closed, then the GPU price
    goes to 2.50 and October 15 is run again: +5.00 (10 GPU-h x 0.50) booked in November, October as it was."""
    config = budget_job()
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(main, [*args, "--config", config])
        assert result.exit_code == 0, result.output
        return result.stdout

    invoke("backfill", "--from", "2026-10-01", "--to", "2026-10-31")
    invoke("close", "--month", "2026-10", "--by", "finance")
    october = {form: invoke("statement", "--month", "2026-10", "--format", form) for form in FORMATS}
    assert cents(json.loads(october["json"])["total"]) == "651.00"  # 31 x 21.00

    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["prices"]["gpu_hour"] = 2.5
    Path(config).write_text(yaml.safe_dump(settings))
    invoke("run", "--date", "2026-10-15")

    assert {form: invoke("statement", "--month", "2026-10", "--format", form) for form in FORMATS} == october
    november = json.loads(invoke("statement", "--month", "2026-11", "--format", "json"))
    assert [(t["team"], [(line["kind"], line["cluster"], line["resource"], line["corrects"], cents(line["amount"]))
                         for line in t["lines"]]) for t in november["teams"]] == [
        ("robotics", [("adjustment", "jaguar", "gpu", "2026-10-15", "5.00")])]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert cents(read_rows(ledger, OCT, date(2026, 10, 31))["cost"].sum()) == "656.00"  # the ledger has the new rows
