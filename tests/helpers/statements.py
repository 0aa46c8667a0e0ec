"""A month of hand-worked days for statements and closing."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from datetime import date, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from billing.accounts import Accounts
from billing.allocations import Allocation
from billing.charge.allocations import allocation_use
from billing.charge.bill import DayBill
from billing.collect.invoices import Invoice, InvoiceError
from billing.config import CostRecovery
from billing.days import days_in_month
from billing.directory.people import Directory, Team, directory_to_json
from billing.ledger.database import fetch
from billing.ledger.read import read_recovery, read_rows, read_workload_costs
from billing.ledger.tables import corrections, month_closings
from billing.ledger.write import record_invoice, replace_day
from billing.publish.focus import broken_down, focus_rows
from billing.publish.statement import StatementError, build_statement, close_month, reopen_month
from billing.publish.statement_formats import FORMATS
from tests.helpers.ledgers import new_ledger
from tests.helpers.report_ledger import frame

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
    ("jaguar", "team-robotics", "robotics", None, "unrequested-cpu", "", 50.0, 0.012, 0.60, 0.60),
]


OCT_6 = [("jaguar", "alice", "robotics", "alice", "gpu", H100, 5.0, 2.40, 12.00, 12.00)]


# October 5 re-run at new prices: H100 3.00 (+6.00 for robotics), heron GPUs 2.50 (vision +2.50, and robotics'
# credit -2.50, its pool's reservation +12.00); unrequested capacity no longer shared (-0.60)
OCT_5_RERUN = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 3.00, 30.00, 30.00),
    ("jaguar", "bob", "robotics", "bob", "cpu", "", 100.0, 0.012, 0.60, 1.20),
    ("heron", "pool:p1", "robotics", None, "reserved-gpu", "", 24.0, 2.50, 60.00, 60.00),
    ("heron", "carol", "vision", "carol", "gpu", "", 5.0, 2.50, 12.50, 12.50),
    ("heron", "carol", "robotics", "carol", "credit-gpu", "", -5.0, 2.50, -12.50, -12.50),
]


NOV_2 = [("jaguar", "team-robotics", "robotics", None, "cpu", "", 10.0, 0.012, 0.12, 0.12)]


# October's statement by hand: robotics 36.00 (H100 15 h) + 1.20 - 0.60 (cpu, discount) + 0.60 (unrequested)
# + 48.00 (pool) - 10.00 (credit) = 75.20; vision 10.00
OCT_LINES = {
    ("robotics", "jaguar", "charge", "gpu", H100): (15.0, "36.00"),
    ("robotics", "jaguar", "charge", "cpu", ""): (100.0, "1.20"),
    ("robotics", "jaguar", "discount", "cpu", ""): (None, "-0.60"),
    ("robotics", "jaguar", "unrequested", "unrequested-cpu", ""): (50.0, "0.60"),
    ("robotics", "heron", "reserved", "reserved-gpu", ""): (24.0, "48.00"),
    ("robotics", "heron", "credit", "credit-gpu", ""): (-5.0, "-10.00"),
    ("vision", "heron", "charge", "gpu", ""): (5.0, "10.00"),
}


OCT_TOTALS = {"robotics": "75.20", "vision": "10.00"}


# what the re-run of October 5 books in November, per (team, cluster, resource)
OCT_5_CORRECTIONS = {
    ("robotics", "jaguar", "gpu"): "6.00",
    ("robotics", "jaguar", "unrequested-cpu"): "-0.60",
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


def write_month(engine, month: date, days: dict[date, list[tuple]], accounts: Accounts | None = None,
                allocations: Sequence[Allocation] = ()) -> None:
    """Every day of the month run (most with no usage), the given days with their rows; each night drawing
    `allocations` of `accounts` down as `billing run` does."""
    day = month
    while day.month == month.month:
        rows = frame(days.get(day, []))
        replace_day(engine, day, DayBill(rows), "USD", snapshot=directory_to_json(DIRECTORY),
                    allocation_use=allocation_use(rows, day, accounts, allocations, ()), allocations=allocations)
        day += timedelta(days=1)


def closed_october(url: str) -> str:
    """The ledger at `url` holding October (OCT_5, OCT_6), closed recovering each cluster's cost (jaguar 100.00,
    heron 60.00); returns the URL."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {},
                recover={"jaguar": CostRecovery(monthly_cost=100.00), "heron": CostRecovery(monthly_cost=60.00)})
    engine.dispose()
    return url


def all_formats(engine, month: date) -> dict[str, str]:
    statement = build_statement(engine, month, "USD", {"robotics": "CC-4711"})
    return {name: render(statement) for name, render in FORMATS.items()}


def team_totals(engine, month: date) -> dict[str, str]:
    document = json.loads(all_formats(engine, month)["json"])
    return {team["team"]: cents(team["total"]) for team in document["teams"]}


def booked(engine, month: date) -> dict[tuple, str]:
    rows = fetch(engine, corrections.select().where(corrections.c.month == month))
    sums: dict[tuple, float] = {}
    for row in rows:
        key = (row["team"], row["cluster"], row["resource"])
        sums[key] = sums.get(key, 0.0) + row["amount"]
    return {key: cents(value) for key, value in sums.items() if cents(value) != "0.00"}


def closing_scenario(url: str) -> None:
    """Close October, re-run one of its days at new prices: October stays, November gets the difference."""
    engine = new_ledger(url)
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

    replace_day(engine, date(2026, 10, 5), DayBill(frame(OCT_5_RERUN)), "USD")
    assert read_rows(engine, date(2026, 10, 5), date(2026, 10, 5))["cost"].sum() == pytest.approx(90.60)  # new rows
    assert all_formats(engine, OCT) == before  # byte for byte, every format
    assert booked(engine, NOV) == OCT_5_CORRECTIONS
    assert {r["corrects"] for r in fetch(engine, corrections.select())} == {date(2026, 10, 5)}
    assert team_totals(engine, NOV) == NOV_TOTALS
    november = json.loads(all_formats(engine, NOV)["json"])
    robotics = next(t for t in november["teams"] if t["team"] == "robotics")
    assert robotics["cost_center"] == "CC-4711"
    assert {(line["cluster"], line["resource"], line["corrects"], cents(line["amount"])) for line in robotics["lines"]
            if line["kind"] == "correction"} == {("jaguar", "gpu", "2026-10-05", "6.00"),
                                              ("jaguar", "unrequested-cpu", "2026-10-05", "-0.60"),
                                              ("heron", "reserved-gpu", "2026-10-05", "12.00"),
                                              ("heron", "credit-gpu", "2026-10-05", "-2.50")}
    ledger_nov = read_rows(engine, NOV, date(2026, 11, 30))["cost"].sum()
    assert cents(november["total"]) == cents(ledger_nov + 6.00 - 0.60 + 12.00 - 2.50 + 2.50) == "17.52"

    replace_day(engine, date(2026, 10, 5), DayBill(frame(OCT_5_RERUN)), "USD")  # the same re-run again: no change, no booking
    assert booked(engine, NOV) == OCT_5_CORRECTIONS

    # November closed too: a correction of October now goes to December, and back to the old prices it cancels out
    close_month(engine, NOV, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"})
    replace_day(engine, date(2026, 10, 5), DayBill(frame(OCT_5)), "USD")
    assert booked(engine, DEC) == {key: cents(-float(value)) for key, value in OCT_5_CORRECTIONS.items()}
    assert all_formats(engine, OCT) == before

    with pytest.raises(StatementError, match="2026-11 is closed too; reopen the latest closed month first"):
        reopen_month(engine, OCT, "alice")
    reopen_month(engine, NOV, "alice")
    reopen_month(engine, OCT, "alice")  # its statement is the ledger again; corrections of it are dropped
    assert fetch(engine, corrections.select()) == []
    assert team_totals(engine, OCT) == OCT_TOTALS  # the ledger holds October 5 at its old prices again
    assert team_totals(engine, NOV) == {"robotics": "0.12"}
    log = [(r["month"], r["action"], r["who"]) for r in fetch(engine, month_closings.select()
                                                              .order_by(month_closings.c.logged_at))]
    assert log == [(OCT, "close", "finance-bot"), (NOV, "close", "finance-bot"), (NOV, "reopen", "alice"),
                   (OCT, "reopen", "alice")]


# Cost recovery of October by hand (docs/spec.md "Prices over time and cost recovery"). Charges per cluster:
# jaguar: robotics 36.00 + 1.20 - 0.60 + 0.60 = 37.20; heron: robotics 48.00 - 10.00 = 38.00, vision 10.00, 48.00 in
# all. jaguar cost 100.00: robotics alone recovers 62.80; heron cost 60.00: 12.00 more, 38/48 of it (9.50) to
# robotics and 10/48 (2.50) to vision.
OCT_COSTS = {"jaguar": 100.00, "heron": 60.00}
OCT_RECOVERY = {("robotics", "jaguar"): "62.80", ("robotics", "heron"): "9.50", ("vision", "heron"): "2.50"}
OCT_RECOVERED_TOTALS = {"robotics": "147.50", "vision": "12.50"}


def recovery_scenario(url: str) -> None:
    """Close October recovering each cluster's cost: lines by hand, each cluster's month adds up to its cost to the
    cent, reopening and closing again gives the same lines; an invoice cluster waits for its import; a cluster
    with no charges in the month is refused at close, and the month stays open."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    write_month(engine, NOV, {date(2026, 11, 2): NOV_2})
    recover = {"jaguar": CostRecovery(monthly_cost=100.00), "heron": CostRecovery(invoice_match={"Tags.cluster": "heron"})}
    with pytest.raises(StatementError, match="cluster heron recovers its invoice, and none was imported for 2026-10: "
                                             "billing invoice import --cluster heron --month 2026-10 FILE"):
        close_month(engine, OCT, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"}, recover=recover)
    record_invoice(engine, OCT, "heron", Invoice(Decimal("60.00"), "USD", "october.csv", "ab" * 32, 3, 2), "finance-bot")

    closed = close_month(engine, OCT, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"}, recover=recover)
    lines = {(line.team, line.cluster): cents(line.amount) for line in closed.lines if line.kind == "recovery"}
    assert lines == OCT_RECOVERY
    for cluster, cost in OCT_COSTS.items():
        on_cluster = sum(line.amount for line in closed.lines if line.cluster == cluster)
        assert cents(on_cluster) == cents(cost)
    assert team_totals(engine, OCT) == OCT_RECOVERED_TOTALS
    statement = all_formats(engine, OCT)
    assert "Cost recovery" in statement["html"] and "recovery" in statement["csv"]
    # "our October chargeback on jaguar adds up to the 100.00 it cost", from the statement itself
    clusters = {row["cluster"]: [cents(row[part]) for part in ("charged", "recovered", "total")]
                for row in json.loads(statement["json"])["clusters"]}
    assert clusters == {"jaguar": ["37.20", "62.80", "100.00"], "heron": ["48.00", "12.00", "60.00"]}
    assert '<table id="clusters">' in statement["html"]

    with pytest.raises(InvoiceError, match="2026-10 is closed; reopen it"):
        record_invoice(engine, OCT, "heron", Invoice(Decimal("70.00"), "USD", "late.csv", "cd" * 32, 1, 1), "x")
    # the export has each recovery line as an Adjustment of the whole month, only where the range holds the month
    october = (OCT, date(2026, 10, 31))
    exported = focus_rows(broken_down(read_rows(engine, *october), read_workload_costs(engine, *october)),
                          ZoneInfo("UTC"), read_recovery(engine, *october))
    recovery = exported[exported["ChargeCategory"] == "Adjustment"]
    assert sorted(recovery["BilledCost"].map(cents)) == sorted(OCT_RECOVERY.values())
    assert cents(exported["BilledCost"].sum()) == cents(sum(OCT_COSTS.values()))
    assert read_recovery(engine, date(2026, 10, 2), date(2026, 10, 31)).empty

    reopen_month(engine, OCT, "alice")
    assert team_totals(engine, OCT) == OCT_TOTALS  # open again: the charges at the prices
    close_month(engine, OCT, "finance-bot", TODAY_DONE, "USD", {"robotics": "CC-4711"}, recover=recover)
    again = all_formats(engine, OCT)
    assert json.loads(again["json"])["teams"] == json.loads(statement["json"])["teams"]

    with pytest.raises(StatementError, match="cluster heron has no charges in 2026-11 to spread its cost of "
                                             "60.00 over"):
        close_month(engine, NOV, "finance-bot", TODAY_DONE, "USD", {}, recover={"heron": CostRecovery(monthly_cost=60)})
    assert build_statement(engine, NOV, "USD", {}).closing is None


# A correction on a recovered cluster (docs/spec.md "Corrections on a recovered cluster"), by hand. October:
# jaguar recovers its monthly_cost of 1,200.00, heron its invoice of 90.00; an H100-hour costs 3.00 until October 19
# and 2.00 from October 20, but October 5 was priced 2.00 by mistake.
#   jaguar charges: robotics 100.00 (Oct 5) + 200.00 (Oct 20) = 300.00, vision 100.00; 400.00 in all, so 800.00 is
#   recovered: robotics 300/400 of it = 600.00, vision 200.00; robotics pays 900.00 of jaguar, vision 300.00.
#   heron charges: vision 20.00, robotics 10.00; 60.00 recovered: vision 40.00, robotics 20.00 (60.00 and 30.00).
REC_OCT_5 = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 50.0, 2.00, 100.00, 100.00),
    ("jaguar", "vera", "vision", "vera", "gpu", H100, 50.0, 2.00, 100.00, 100.00),
    ("heron", "vera", "vision", "vera", "gpu", "", 10.0, 2.00, 20.00, 20.00),
    ("heron", "team-robotics", "robotics", None, "cpu", "", 100.0, 0.10, 10.00, 10.00),
]
REC_OCT_20 = [("jaguar", "alice", "robotics", "alice", "gpu", H100, 100.0, 2.00, 200.00, 200.00)]
REC_COSTS = {"jaguar": 1200.00, "heron": 90.00}
REC_OCT_TOTALS = {"robotics": "930.00", "vision": "360.00"}


# First correction: October 5 again at 3.00 an H100-hour, with a pod of robotics on heron it missed (100 core-h more).
#   jaguar: robotics +50.00 and vision +50.00 of GPU; charges now robotics 350.00, vision 150.00 of 500.00, so
#   robotics' share of the 1,200.00 is 840.00 (-60.00 from 900.00) and vision's 360.00 (+60.00): cost recovery
#   corrections robotics -60.00 - 50.00 = -110.00, vision +60.00 - 50.00 = +10.00.
#   heron: robotics +10.00 of CPU; charges vision 20.00, robotics 20.00 of 40.00, shares of the 90.00 45.00 each:
#   robotics +15.00 (from 30.00), vision -15.00 (from 60.00); cost recovery robotics 15.00 - 10.00 = +5.00, vision -15.00.
REC_OCT_5_FIXED = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 50.0, 3.00, 150.00, 150.00),
    ("jaguar", "vera", "vision", "vera", "gpu", H100, 50.0, 3.00, 150.00, 150.00),
    ("heron", "vera", "vision", "vera", "gpu", "", 10.0, 2.00, 20.00, 20.00),
    ("heron", "team-robotics", "robotics", None, "cpu", "", 200.0, 0.10, 20.00, 20.00),
]
# Second correction: October 20 again, namespace dana now owned by audio, which had no charge in October.
#   jaguar: robotics -50.00, audio +50.00 of GPU; charges robotics 300.00, vision 150.00, audio 50.00 of 500.00:
#   shares 720.00 (-120.00 from 840.00), 360.00 (no change), 120.00 (+120.00 from nothing): cost recovery
#   robotics -120.00 + 50.00 = -70.00, audio 120.00 - 50.00 = +70.00, none for vision.
REC_OCT_20_FIXED = [
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, 75.0, 2.00, 150.00, 150.00),
    ("jaguar", "dana", "audio", "dana", "gpu", H100, 25.0, 2.00, 50.00, 50.00),
]
REC_NOV_2 = [("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.00, 20.00, 20.00)]
# (team, cluster, resource, day corrected) -> amount, all booked in November; they add up to zero on each cluster
REC_CORRECTIONS = {
    ("robotics", "jaguar", "gpu", "2026-10-05"): "50.00",
    ("robotics", "jaguar", "recovery", "2026-10-05"): "-110.00",
    ("vision", "jaguar", "gpu", "2026-10-05"): "50.00",
    ("vision", "jaguar", "recovery", "2026-10-05"): "10.00",
    ("robotics", "heron", "cpu", "2026-10-05"): "10.00",
    ("robotics", "heron", "recovery", "2026-10-05"): "5.00",
    ("vision", "heron", "recovery", "2026-10-05"): "-15.00",
    ("robotics", "jaguar", "gpu", "2026-10-20"): "-50.00",
    ("robotics", "jaguar", "recovery", "2026-10-20"): "-70.00",
    ("audio", "jaguar", "gpu", "2026-10-20"): "50.00",
    ("audio", "jaguar", "recovery", "2026-10-20"): "70.00",
}
# November: robotics 20.00 + 50.00 - 110.00 + 10.00 + 5.00 - 50.00 - 70.00 = -145.00, vision 50.00 + 10.00 - 15.00 =
# 45.00, audio 50.00 + 70.00 = 120.00: 20.00 in all, November's own charge, as the corrections move cost only.
REC_NOV_TOTALS = {"robotics": "-145.00", "vision": "45.00", "audio": "120.00"}
# October in the export, the ledger as corrected: each team its share of each cluster's cost as re-split; robotics
# 720.00 + 45.00, vision 360.00 + 45.00, audio 120.00: 1,290.00, the cost, as the closed statement says.
REC_OCT_EXPORTED = {"robotics": "765.00", "vision": "405.00", "audio": "120.00", "in all": "1290.00"}


def export_of(engine, month: date) -> pd.DataFrame:
    """The FOCUS export of the month, as `billing export` writes it."""
    last = month.replace(day=days_in_month(month))
    return focus_rows(broken_down(read_rows(engine, month, last), read_workload_costs(engine, month, last)),
                      ZoneInfo("UTC"), read_recovery(engine, month, last))


def exported(engine, month: date) -> dict[str, str]:
    """The FOCUS export of the month summed per team (BillingAccountId), and in all."""
    focus = export_of(engine, month)
    per_team = focus.groupby("BillingAccountId")["BilledCost"].sum()
    return {**{team: cents(cost) for team, cost in per_team.items()}, "in all": cents(focus["BilledCost"].sum())}


def format_totals(engine, month: date) -> dict[str, str]:
    """The month's total as each format of its statement gives it: JSON's, CSV's lines summed, the HTML's team
    totals summed."""
    formats = all_formats(engine, month)
    html_totals = re.findall(r'<tfoot><tr><td>Total</td><td class="num">(-?[\d,.]+) USD</td></tr></tfoot>',
                             formats["html"])
    return {"json": cents(json.loads(formats["json"])["total"]),
            "csv": cents(sum(float(row["amount"]) for row in csv.DictReader(io.StringIO(formats["csv"])))),
            "html": cents(sum(float(amount.replace(",", "")) for amount in html_totals))}


def booked_lines(engine, month: date) -> dict[tuple, str]:
    """(team, cluster, resource, day corrected) -> amount of the corrections booked in the month."""
    rows = fetch(engine, corrections.select().where(corrections.c.month == month))
    return {(r["team"], r["cluster"], r["resource"], r["corrects"].isoformat()): cents(r["amount"]) for r in rows}


def recovered_correction_scenario(url: str) -> None:
    """Close October recovering jaguar's monthly cost and heron's invoice, then correct two of its days: the
    corrections move cost between teams, add up to zero on each cluster, and October stays 1,290.00 in its statement
    and in the export, November its own 20.00 in both, in every format."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): REC_OCT_5, date(2026, 10, 20): REC_OCT_20})
    write_month(engine, NOV, {date(2026, 11, 2): REC_NOV_2})
    record_invoice(engine, OCT, "heron", Invoice(Decimal("90.00"), "USD", "october.csv", "ab" * 32, 3, 2), "finance")
    recover = {"jaguar": CostRecovery(monthly_cost=1200.00), "heron": CostRecovery(invoice_match={"Tags.cluster": "heron"})}
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover=recover)
    assert team_totals(engine, OCT) == REC_OCT_TOTALS
    closed = all_formats(engine, OCT)

    replace_day(engine, date(2026, 10, 5), DayBill(frame(REC_OCT_5_FIXED)), "USD")
    replace_day(engine, date(2026, 10, 20), DayBill(frame(REC_OCT_20_FIXED)), "USD")

    assert all_formats(engine, OCT) == closed  # the closed statement stays, byte for byte
    assert booked_lines(engine, NOV) == REC_CORRECTIONS
    november = json.loads(all_formats(engine, NOV)["json"])
    assert {row["cluster"]: cents(row["corrected"]) for row in november["clusters"]} == {"jaguar": "0.00",
                                                                                       "heron": "0.00"}
    assert team_totals(engine, NOV) == REC_NOV_TOTALS
    page = all_formats(engine, NOV)["html"]
    assert "Correction of 2026-10-20, Cost recovery" in page and "add up to zero on the cluster" in page
    assert format_totals(engine, OCT) == {"json": "1290.00", "csv": "1290.00", "html": "1290.00"}
    assert format_totals(engine, NOV) == {"json": "20.00", "csv": "20.00", "html": "20.00"}
    assert exported(engine, OCT) == REC_OCT_EXPORTED
    assert exported(engine, NOV) == {"robotics": "20.00", "in all": "20.00"}

    replace_day(engine, date(2026, 10, 20), DayBill(frame(REC_OCT_20_FIXED)), "USD")  # the same again: nothing booked
    assert booked_lines(engine, NOV) == REC_CORRECTIONS

    # each team ends where closing October again with its days corrected puts it
    reopen_month(engine, OCT, "finance")
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover=recover)
    assert team_totals(engine, OCT) == {team: cents(float(amount)) for team, amount in REC_OCT_EXPORTED.items()
                                        if team != "in all"}


def corrected_october(url: str) -> str:
    """The ledger at `url` holding October (OCT_5, OCT_6) closed unrecovered (robotics 75.20, vision 10.00), then
    October 5 run again at new prices (OCT_5_RERUN), which books its changes in November beside November 2's 0.12
    of CPU (NOV_2); returns the URL."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    write_month(engine, NOV, {date(2026, 11, 2): NOV_2})
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {})
    replace_day(engine, date(2026, 10, 5), DayBill(frame(OCT_5_RERUN)), "USD")
    engine.dispose()
    return url


def recovered_october(url: str) -> str:
    """The ledger at `url` holding the recovered October (jaguar 1,200.00 by its monthly cost, heron 90.00 by the
    invoice imported, closed as robotics 930.00 and vision 360.00) with October 5 and 20 corrected, which books in
    November robotics -165.00 (beside its own 20.00 of REC_NOV_2), vision +45.00 and audio +120.00; returns the URL."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): REC_OCT_5, date(2026, 10, 20): REC_OCT_20})
    write_month(engine, NOV, {date(2026, 11, 2): REC_NOV_2})
    record_invoice(engine, OCT, "heron", Invoice(Decimal("90.00"), "USD", "october.csv", "ab" * 32, 3, 2), "finance")
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover={
        "jaguar": CostRecovery(monthly_cost=1200.00), "heron": CostRecovery(invoice_match={"Tags.cluster": "heron"})})
    replace_day(engine, date(2026, 10, 5), DayBill(frame(REC_OCT_5_FIXED)), "USD")
    replace_day(engine, date(2026, 10, 20), DayBill(frame(REC_OCT_20_FIXED)), "USD")
    engine.dispose()
    return url
