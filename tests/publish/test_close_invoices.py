"""Closing a month beside invoice imports, and refusing money that is no finite amount, on SQLite (on PostgreSQL:
tests/integration/test_statement_postgres.py)."""

import math
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest
from sqlalchemy import insert, select

from billing.collect.invoices import InvoiceError
from billing.ledger.database import fetch, writing
from billing.ledger.tables import closed_months, invoices
from billing.ledger.write import record_invoice
from tests.helpers.invoices import (
    invoice,
    non_finite_invoice_scenario,
    non_finite_row_scenario,
    october,
    several_files_scenario,
)
from tests.helpers.statements import OCT


def test_a_bill_in_several_files_is_recovered_as_their_sum_on_sqlite(tmp_path):
    several_files_scenario(f"sqlite:///{tmp_path}/ledger.db")


def test_closing_refuses_an_infinite_invoice_and_writes_nothing_on_sqlite(tmp_path):
    # SQLite stores NaN as NULL, which the table refuses: only PostgreSQL can hold a NaN invoice
    non_finite_invoice_scenario(f"sqlite:///{tmp_path}/ledger.db", math.inf)


def test_closing_refuses_an_infinite_ledger_row_and_writes_nothing_on_sqlite(tmp_path):
    non_finite_row_scenario(f"sqlite:///{tmp_path}/ledger.db", -math.inf)


def test_an_invoice_import_waits_for_a_close_in_progress_and_is_refused_after_it_on_sqlite(tmp_path):
    """A close of October holds the database (BEGIN IMMEDIATE, as close_month does) while an import of October's
    invoice starts: the import waits, then finds the month closed; the invoice stays as the close recovered it."""
    engine = october(f"sqlite:///{tmp_path}/ledger.db?timeout=30")
    record_invoice(engine, OCT, "heron", invoice("60.00", "october.csv"), "finance")
    importing = ThreadPoolExecutor(1)
    with writing(engine) as conn:  # the close, from its first statement to its commit
        late = importing.submit(record_invoice, engine, OCT, "heron", invoice("70.00", "corrected.csv"), "finance",
                                replace=True)
        time.sleep(1.0)
        assert not late.done()  # waiting for the close
        conn.execute(insert(closed_months).values(month=OCT, closed_at=datetime.now(timezone.utc), closed_by="finance",
                                                  missing_days=""))
    with pytest.raises(InvoiceError, match="2026-10 is closed; reopen it"):
        late.result(timeout=30)
    assert [row["billed_cost"] for row in fetch(engine, select(invoices))] == [60.0]
