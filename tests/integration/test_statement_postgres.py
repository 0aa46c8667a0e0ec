"""On a real PostgreSQL: closing, re-running and reopening, recovering costs, correcting a recovered cluster (the SQLite
tests' scenarios), and closing beside a run or an invoice import; the invoices per account."""

import math
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from sqlalchemy import select, text

from billing import frames
from billing.charge.bill import DayBill
from billing.collect.invoices import Invoice
from billing.config import CostRecovery
from billing.ledger.database import fetch, open_ledger
from billing.ledger.tables import chargeback, corrections, invoices
from billing.ledger.write import record_invoice, replace_day
from billing.publish.statement import build_statement, close_month
from tests.helpers.account_invoices import worked_invoices_scenario
from tests.helpers.invoices import (
    close_october,
    import_during_close_scenario,
    invoice,
    non_finite_invoice_scenario,
    non_finite_row_scenario,
    october,
    several_files_scenario,
)
from tests.helpers.journals import allocated_close_scenario, reclose_scenario
from tests.helpers.locks import waiting
from tests.helpers.report_ledger import frame
from tests.helpers.statements import (
    NOV,
    OCT,
    OCT_5,
    OCT_6,
    REC_OCT_5,
    REC_OCT_5_FIXED,
    REC_OCT_20,
    REC_OCT_20_FIXED,
    TODAY_DONE,
    cents,
    closing_scenario,
    recovered_correction_scenario,
    recovery_scenario,
    write_month,
)


def test_close_rerun_and_reopen_on_postgres(postgres_url):
    closing_scenario(postgres_url)


def test_closing_recovers_each_clusters_cost_on_postgres(postgres_url):
    recovery_scenario(postgres_url)


def test_a_correction_on_a_recovered_cluster_keeps_its_month_at_its_cost_on_postgres(postgres_url):
    recovered_correction_scenario(postgres_url)


def test_the_journal_is_written_once_and_reversed_on_a_reclose_on_postgres(postgres_url, tmp_path):
    reclose_scenario(postgres_url, tmp_path)


def test_each_accounts_invoice_is_its_part_of_the_statement_on_postgres(postgres_url, tmp_path):
    worked_invoices_scenario(postgres_url, tmp_path)


def test_the_worked_month_s_allocation_drawn_once_and_journalled_on_postgres(postgres_url, tmp_path):
    allocated_close_scenario(postgres_url, tmp_path)


def test_closing_waits_for_a_run_of_one_of_its_days_in_progress(postgres_url):
    """A run of October 6 holds its day (as replace_day does) while finance closes October: the closing waits and
    its statement has the run's rows, so no run lands between the lines read and the month marked closed."""
    engine = open_ledger(postgres_url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5})
    closing = ThreadPoolExecutor(1)
    with engine.begin() as conn:  # the run, from its lock to its commit
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": date(2026, 10, 6).toordinal()})
        closed = closing.submit(close_month, engine, OCT, "finance", TODAY_DONE, "USD", {})
        time.sleep(1.0)
        assert not closed.done()  # waiting for the run
        conn.execute(chargeback.insert(), [{**dict(zip(frames.ROWS.columns, OCT_6[0])), "day": date(2026, 10, 6),
                                            "currency": "USD", "computed_at": datetime.now(timezone.utc)}])
    statement = closed.result(timeout=30)
    assert cents(statement.total) == "85.20"  # October 5's 73.20 and the run's 12.00 of October 6
    assert [line.quantity for line in statement.lines if line.resource == "gpu" and line.team == "robotics"] == [15.0]


def test_corrections_of_one_recovered_month_wait_for_each_other(postgres_url):
    """October closed as in `recovered_correction_scenario`. A run of October 20 is correcting it (namespace dana now
    audio's) and has not committed when October 5 is run again at 3.00: October 5's correction waits for it, and
    re-splits the cost over what it booked. By hand, October 20 first: jaguar's charges robotics 100.00 + 150.00,
    vision 100.00, audio 50.00, shares of 1,200.00 750.00, 300.00, 150.00: GPU -50.00 and +50.00, cost recovery
    -100.00 (750 - 900 + 50) for robotics and +100.00 for audio. Then October 5 ends where both corrections end in
    either order: robotics 720.00, vision 360.00, audio 120.00 of jaguar."""
    engine = open_ledger(postgres_url)
    write_month(engine, OCT, {date(2026, 10, 5): REC_OCT_5, date(2026, 10, 20): REC_OCT_20})
    record_invoice(engine, OCT, "heron", Invoice(Decimal("90.00"), "USD", "october.csv", "ab" * 32, 3, 2), "finance")
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover={
        "jaguar": CostRecovery(monthly_cost=1200.00), "heron": CostRecovery(invoice_match={"Tags.cluster": "heron"})})
    correcting = ThreadPoolExecutor(1)
    now = datetime.now(timezone.utc)
    with engine.begin() as conn:  # the run of October 20, from its locks to its commit
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": date(2026, 10, 20).toordinal()})
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": -OCT.toordinal()})
        corrected = correcting.submit(replace_day, engine, date(2026, 10, 5), DayBill(frame(REC_OCT_5_FIXED)), "USD")
        time.sleep(1.0)
        assert not corrected.done()  # waiting for October 20's correction
        conn.execute(chargeback.delete().where(chargeback.c.day == date(2026, 10, 20)))
        conn.execute(chargeback.insert(), [{**dict(zip(frames.ROWS.columns, row)), "day": date(2026, 10, 20),
                                            "currency": "USD", "computed_at": now} for row in REC_OCT_20_FIXED])
        conn.execute(corrections.insert(), [
            {"month": NOV, "corrects": date(2026, 10, 20), "team": team, "cluster": "jaguar", "resource": resource,
             "booked_at": now, "amount": amount, "currency": "USD"}
            for team, resource, amount in [("robotics", "gpu", -50.0), ("robotics", "recovery", -100.0),
                                           ("audio", "gpu", 50.0), ("audio", "recovery", 100.0)]])
    corrected.result(timeout=30)
    billed: dict[str, float] = {}
    for line in build_statement(engine, OCT, "USD", {}).lines + build_statement(engine, NOV, "USD", {}).lines:
        if line.cluster == "jaguar":
            billed[line.team] = billed.get(line.team, 0.0) + line.amount
    assert {team: cents(amount) for team, amount in billed.items()} == {
        "robotics": "720.00", "vision": "360.00", "audio": "120.00"}


def test_a_bill_in_several_files_is_recovered_as_their_sum_on_postgres(postgres_url):
    several_files_scenario(postgres_url)


@pytest.mark.parametrize("cost", [math.nan, math.inf])
def test_closing_refuses_a_non_finite_invoice_and_writes_nothing_on_postgres(postgres_url, cost):
    non_finite_invoice_scenario(postgres_url, cost)


def test_closing_refuses_a_nan_ledger_row_and_writes_nothing_on_postgres(postgres_url):
    non_finite_row_scenario(postgres_url, math.nan)



def test_an_invoice_import_waits_for_a_close_in_progress_and_is_refused_after_it(postgres_url):
    """A close of October holds its first day's lock (as close_month does) while October's invoice is imported again:
    the import waits, then finds the month closed; the invoice stays as the close recovered it."""
    engine = october(postgres_url)

    @contextmanager
    def close_holding():  # the close, from its locks to its commit
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": OCT.toordinal()})
            yield conn

    import_during_close_scenario(engine, close_holding)


def test_an_invoice_import_that_began_before_a_close_is_recovered_as_it_commits(postgres_url):
    """The issue's race, made deterministic: an import of October's invoice (60.00 replaced by 70.00) is held after
    its check that October is open, on the old invoice's row, which another session locks; October is closed
    meanwhile. The close must wait for the import, so that the closed statement recovers the invoice the ledger
    keeps (by hand: heron cost 70.00), not the one the import was replacing (60.00)."""
    engine = october(postgres_url)
    record_invoice(engine, OCT, "heron", invoice("60.00", "october.csv"), "finance")
    both = ThreadPoolExecutor(2)
    with engine.begin() as conn:
        conn.execute(select(invoices).with_for_update())
        importing = both.submit(record_invoice, engine, OCT, "heron", invoice("70.00", "corrected.csv"), "finance",
                                replace=True)
        waiting(engine, 1)  # the import, on the row
        closing = both.submit(close_october, engine)
        time.sleep(1.0)
        assert not closing.done()  # waiting for the import
    assert importing.result(timeout=30) == 70.00
    closed = closing.result(timeout=30)
    assert [row["billed_cost"] for row in fetch(engine, select(invoices))] == [70.0]
    assert cents(sum(line.amount for line in closed.lines if line.cluster == "heron")) == "70.00"


def test_a_night_written_while_another_is_drawing_waits_and_draws_what_it_left_on_postgres(postgres_url):
    """An allocation of 5.00 of NIH-R01 (4.204 a night): while the 1st draws in a transaction the test holds open,
    a run of the 2nd waits for it (an advisory lock), then draws the 0.796 the 1st left, not a stale 4.204."""
    from billing.allocations import Allocation
    from billing.charge.allocations import allocation_use
    from billing.ledger.allocations import allocation_draws_between, replace_allocation_use
    from tests.helpers.journals import NOVEMBER, WORKED

    five = (Allocation("NIH-R01", NOV, date(2026, 11, 30), 5.0, "USD"),)
    engine = open_ledger(postgres_url)
    first, second = NOV, NOV.replace(day=2)

    def use(day: date):
        return allocation_use(frame(NOVEMBER[day]), day, WORKED.accounts(), five, ())

    with ThreadPoolExecutor(1) as pool, engine.begin() as conn:  # the transaction ends first, then the run
        replace_allocation_use(conn, first, use(first), five, "USD")
        running = pool.submit(lambda: replace_day(engine, second, DayBill(frame(NOVEMBER[second])), "USD",
                                                  allocation_use=use(second), allocations=five))
        waiting(engine, 1)
    running.result()
    drawn = allocation_draws_between(engine, NOV, date(2026, 11, 30)).groupby("day")["drawn"].sum()
    assert [round(drawn[day], 9) for day in (first, second)] == [4.204, 0.796]
    engine.dispose()
