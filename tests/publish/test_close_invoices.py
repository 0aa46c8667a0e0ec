"""Closing a month beside invoice imports, and refusing money that is no finite amount, on SQLite (on PostgreSQL:
tests/integration/test_statement_postgres.py)."""

import math

from billing.ledger.database import writing
from tests.helpers.invoices import (
    import_during_close_scenario,
    non_finite_invoice_scenario,
    non_finite_row_scenario,
    october,
    several_files_scenario,
)


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
    import_during_close_scenario(engine, lambda: writing(engine))  # the close, from its first statement to its commit
