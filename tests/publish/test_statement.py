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
from billing.config import CostRecovery
from billing.ledger.database import fetch, open_ledger
from billing.ledger.read import read_rows
from billing.ledger.recovery import NothingToRecoverOver
from billing.ledger.tables import corrections
from billing.ledger.write import replace_day
from billing.money import total
from billing.publish.statement import Statement, StatementError, StatementLine, build_statement, close_month
from billing.publish.statement_formats import FORMATS, csv_text
from tests.helpers.budgets import billed_month, budget_job  # noqa: F401 (pytest fixtures)
from tests.helpers.report_ledger import frame
from tests.helpers.statements import (
    NOV,
    NOV_2,
    OCT,
    OCT_5,
    OCT_6,
    TODAY_DONE,
    cents,
    closing_scenario,
    exported,
    recovered_correction_scenario,
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
                              "quantity", "amount", "service_units", "currency"}
    page = FORMATS["html"](statement)
    assert page.count('<section class="team">') == 2 and "break-after: page" in page
    assert "75.20 USD" in page and "10.00 USD" in page and "Priority-class discount, CPU" in page
    # robotics by kind: usage 36.00 + 1.20, discount -0.60, pool 48.00, credit -10.00, unrequested 0.60
    for label, amount in [("Usage at list price", "37.20"), ("Priority-class discounts", "-0.60"),
                          ("Reserved pools and Kueue quotas", "48.00"), ("Credits for use of reserved pools and quotas", "-10.00"),
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

    billed_month(tmp_path / "ledger.db", OCT)  # as 31 nights of the job bill it
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


def test_billing_run_of_a_closed_day_on_a_recovered_cluster_keeps_its_month_at_its_cost(budget_job, tmp_path):  # noqa: F811
    """Issue 43's path through the commands: jaguar recovers 700.00 a month; October's 31 x 21.00 = 651.00 of charges
    get 49.00 of cost recovery. The GPU price goes to 2.50 and October 15 is run again: +5.00 of GPU (10 GPU-h x
    0.50), and robotics, alone on jaguar, still owes the 700.00: -5.00 of cost recovery. October's statement and
    export both stay 700.00; November has the two corrections and no change of total."""
    config = budget_job()
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["recover"] = {"monthly_cost": 700}
    Path(config).write_text(yaml.safe_dump(settings))
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(main, [*args, "--config", config])
        assert result.exit_code == 0, result.output
        return result.stdout

    def exported(month: str, last: str) -> str:
        rows = csv.DictReader(io.StringIO(invoke("export", "--from", f"{month}-01", "--to", f"{month}-{last}")))
        return cents(sum(float(row["BilledCost"]) for row in rows))

    billed_month(tmp_path / "ledger.db", OCT)  # as 31 nights of the job bill it
    invoke("close", "--month", "2026-10", "--by", "finance")
    october = invoke("statement", "--month", "2026-10", "--format", "json")
    assert cents(json.loads(october)["total"]) == exported("2026-10", "31") == "700.00"

    settings["clusters"][0]["prices"]["gpu_hour"] = 2.5
    Path(config).write_text(yaml.safe_dump(settings))
    invoke("run", "--date", "2026-10-15")

    assert invoke("statement", "--month", "2026-10", "--format", "json") == october
    assert exported("2026-10", "31") == "700.00"
    november = json.loads(invoke("statement", "--month", "2026-11", "--format", "json"))
    assert [(t["team"], [(line["kind"], line["cluster"], line["resource"], line["corrects"], cents(line["amount"]))
                         for line in t["lines"]]) for t in november["teams"]] == [
        ("robotics", [("correction", "jaguar", "gpu", "2026-10-15", "5.00"),
                      ("correction", "jaguar", "recovery", "2026-10-15", "-5.00")])]
    assert cents(november["total"]) == "0.00"


def test_statement_csv_numbers_have_no_float_noise():
    """A quantity summed in floating point was written as 21.959660000000003."""
    line = StatementLine("robotics", "CC-1", "jaguar", "usage", "gpu", "", None, 0.1 + 21.85966, 0.1 + 0.2)
    text = csv_text(Statement(date(2026, 11, 1), "USD", [line], None, []))
    row = next(csv.DictReader(io.StringIO(text)))
    assert (row["quantity"], row["amount"]) == ("21.95966", "0.3")


def test_a_correction_on_a_recovered_cluster_keeps_its_month_at_its_cost_on_sqlite(tmp_path):
    recovered_correction_scenario(f"sqlite:///{tmp_path}/ledger.db")


def test_corrections_on_a_recovered_cluster_add_up_to_zero_where_its_cost_splits_in_thirds(tmp_path):
    """jaguar costs 100.00; three teams charged 1.00 each recover 97.00 in thirds (each pays 100/3). October 5 again
    with audio charged 1.01: robotics and vision owe 100 x 1/3.01 each, 1/9.03 = 0.110742 less than 100/3, audio
    100 x 1.01/3.01, 2/9.03 = 0.221484 more (0.01 of CPU, the rest cost recovery). The corrections add up to
    exactly zero, to the billionth, and October's export stays 100.00."""
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    cpu = [("jaguar", f"team-{team}", team, None, "cpu", "", 10.0, 0.10, 1.00, 1.00)
           for team in ("robotics", "vision", "audio")]
    write_month(engine, OCT, {date(2026, 10, 5): cpu})
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover={"jaguar": CostRecovery(monthly_cost=100.00)})
    audio_more = [*cpu[:2], ("jaguar", "team-audio", "audio", None, "cpu", "", 10.1, 0.10, 1.01, 1.01)]
    replace_day(engine, date(2026, 10, 5), DayBill(frame(audio_more)), "USD")

    moves: dict[str, float] = {}
    for row in fetch(engine, corrections.select()):
        moves[row["team"]] = moves.get(row["team"], 0.0) + row["amount"]
    assert moves == pytest.approx({"robotics": -1 / 9.03, "vision": -1 / 9.03, "audio": 2 / 9.03}, abs=1e-9)
    assert total(row["amount"] for row in fetch(engine, corrections.select())) == 0.0
    november = build_statement(engine, NOV, "USD", {})
    assert [(row["cluster"], row["corrected"]) for row in november.clusters()] == [("jaguar", 0.0)]
    assert {team: cents(sum(line.amount for line in lines)) for team, _, lines in november.teams()} == {
        "robotics": "-0.11", "vision": "-0.11", "audio": "0.22"}
    # each team its share of the 100.00: 100/3.01 = 33.2226 twice and 101/3.01 = 33.5548
    assert exported(engine, OCT) == {"robotics": "33.22", "vision": "33.22", "audio": "33.55", "in all": "100.00"}


def test_a_rerun_that_leaves_a_recovered_cluster_no_charges_in_its_closed_month_is_refused(tmp_path):
    """There would be nothing to split jaguar's cost over: the run is refused (exit 2) and nothing is written."""
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, OCT, {date(2026, 10, 6): OCT_6})
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover={"jaguar": CostRecovery(monthly_cost=100.00)})
    with pytest.raises(NothingToRecoverOver, match=r"^re-running 2026-10-06 would leave cluster jaguar no charges in "
                                                   r"2026-10, a closed month that recovered its cost of 100.00 over "
                                                   r"them; reopen it first \(billing close --reopen\)$") as refused:
        replace_day(engine, date(2026, 10, 6), DayBill(frame([])), "USD")
    assert refused.value.exit_status == 2
    assert read_rows(engine, OCT, date(2026, 10, 31))["cost"].sum() == 12.00
    assert fetch(engine, corrections.select()) == []
