"""Monthly statements and closing a month, on a small ledger worked out by hand (see OCTOBER).

`closing_scenario` runs on any database URL: here on SQLite, in
tests/integration/test_statement_postgres.py on a real PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.read import read_rows
from billing.ledger.write import replace_day
from billing.publish.statement import Statement, StatementError, StatementLine, build_statement, close_month
from billing.publish.statement_formats import FORMATS, csv_text
from tests.helpers.budgets import budget_job  # noqa: F401 (pytest fixtures)
from tests.helpers.report_ledger import frame
from tests.helpers.statements import (
    NOV,
    NOV_2,
    OCT,
    OCT_5,
    OCT_6,
    cents,
    closing_scenario,
    recovery_scenario,
    write_month,
)


def test_close_rerun_and_reopen_on_sqlite(tmp_path):
    closing_scenario(f"sqlite:///{tmp_path}/ledger.db")


def test_closing_recovers_each_clusters_cost_on_sqlite(tmp_path):
    recovery_scenario(f"sqlite:///{tmp_path}/ledger.db")


def test_a_month_cannot_close_before_it_ends_nor_twice_nor_with_days_never_run(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(engine, date(2026, 11, 2), DayBill(frame(NOV_2)), "USD")
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
    replace_day(engine2, date(2026, 11, 2), DayBill(frame(NOV_2)), "USD")
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
    # robotics by kind: usage 36.00 + 1.20, discount -0.60, pool 48.00, credit -10.00, unrequested 0.60
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
        ("robotics", [("correction", "jaguar", "gpu", "2026-10-15", "5.00")])]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert cents(read_rows(ledger, OCT, date(2026, 10, 31))["cost"].sum()) == "656.00"  # the ledger has the new rows


def test_statement_csv_numbers_have_no_float_noise():
    """A quantity summed in floating point was written as 21.959660000000003."""
    line = StatementLine("robotics", "CC-1", "jaguar", "usage", "gpu", "", None, 0.1 + 21.85966, 0.1 + 0.2)
    text = csv_text(Statement(date(2026, 11, 1), "USD", [line], None, []))
    row = next(csv.DictReader(io.StringIO(text)))
    assert (row["quantity"], row["amount"]) == ("21.95966", "0.3")
