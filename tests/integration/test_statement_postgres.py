"""On a real PostgreSQL: closing, re-running and reopening, recovering costs (the SQLite tests' scenarios), and closing
beside a run or an invoice import."""

import math
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone

import pytest
from sqlalchemy import insert, select, text

from billing import frames
from billing.collect.invoices import InvoiceError
from billing.ledger.database import fetch, open_ledger
from billing.ledger.tables import chargeback, closed_months, invoices
from billing.ledger.write import record_invoice
from billing.publish.statement import close_month
from tests.helpers.invoices import (
    close_october,
    invoice,
    non_finite_invoice_scenario,
    non_finite_row_scenario,
    october,
    several_files_scenario,
)
from tests.helpers.statements import (
    OCT,
    OCT_5,
    OCT_6,
    TODAY_DONE,
    cents,
    closing_scenario,
    recovery_scenario,
    write_month,
)


def test_close_rerun_and_reopen_on_postgres(postgres_url):
    closing_scenario(postgres_url)


def test_closing_recovers_each_clusters_cost_on_postgres(postgres_url):
    recovery_scenario(postgres_url)


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


def test_a_bill_in_several_files_is_recovered_as_their_sum_on_postgres(postgres_url):
    several_files_scenario(postgres_url)


@pytest.mark.parametrize("cost", [math.nan, math.inf])
def test_closing_refuses_a_non_finite_invoice_and_writes_nothing_on_postgres(postgres_url, cost):
    non_finite_invoice_scenario(postgres_url, cost)


def test_closing_refuses_a_nan_ledger_row_and_writes_nothing_on_postgres(postgres_url):
    non_finite_row_scenario(postgres_url, math.nan)


def waiting(engine, sessions: int) -> None:
    """Until `sessions` sessions of the database wait for a lock (10 s at most)."""
    for _ in range(100):
        with engine.connect() as conn:
            if conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar() >= sessions:
                return
        time.sleep(0.1)
    raise AssertionError(f"{sessions} session(s) never waited for a lock")


def test_an_invoice_import_waits_for_a_close_in_progress_and_is_refused_after_it(postgres_url):
    """A close of October holds its first day's lock (as close_month does) while October's invoice is imported again:
    the import waits, then finds the month closed; the invoice stays as the close recovered it."""
    engine = october(postgres_url)
    record_invoice(engine, OCT, "heron", invoice("60.00", "october.csv"), "finance")
    importing = ThreadPoolExecutor(1)
    with engine.begin() as conn:  # the close, from its locks to its commit
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": OCT.toordinal()})
        late = importing.submit(record_invoice, engine, OCT, "heron", invoice("70.00", "corrected.csv"), "finance",
                                replace=True)
        time.sleep(1.0)
        assert not late.done()  # waiting for the close
        conn.execute(insert(closed_months).values(month=OCT, closed_at=datetime.now(timezone.utc), closed_by="finance",
                                                  missing_days=""))
    with pytest.raises(InvoiceError, match="2026-10 is closed; reopen it"):
        late.result(timeout=30)
    assert [row["billed_cost"] for row in fetch(engine, select(invoices))] == [60.0]


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
