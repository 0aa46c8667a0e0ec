"""Cloud bills as FOCUS exports, and invoice imports against a closing month, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import csv
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from billing.collect.invoices import Invoice, InvoiceError
from billing.config import CostRecovery
from billing.ledger.database import fetch
from billing.ledger.tables import chargeback, closed_months, invoices, statement_lines
from billing.ledger.write import record_invoice
from billing.publish.statement import StatementError, build_statement, close_month
from tests.helpers.ledgers import new_ledger
from tests.helpers.statements import OCT, OCT_5, OCT_6, TODAY_DONE, write_month

HEADER = ["BilledCost", "BillingCurrency", "BillingPeriodStart", "ChargePeriodStart", "ProviderName", "Tags"]
IBIS = {"ProviderName": "Microsoft", "Tags.cluster": "ibis"}
NOVEMBER = "2026-11-01T00:00:00Z"


def write_export(path: Path, rows: list[tuple], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def row(cost: str, cluster: str = "ibis", currency: str = "CHF", provider: str = "Microsoft",
        period: str = NOVEMBER) -> tuple:
    return (cost, currency, period, period, provider, json.dumps({"cluster": cluster, "team": "x"}))


def invoice(cost: str, name: str) -> Invoice:
    """An invoice as read from a file `name` (its checksum made of the name: another name, another file)."""
    return Invoice(Decimal(cost), "USD", name, name.encode().hex().ljust(64, "0")[:64], 2, 1)


HERON = {"heron": CostRecovery(invoice_match={"Tags.cluster": "heron"})}


def october(url: str):
    """October of tests.helpers.statements (heron charged 48.00 in all), not closed."""
    engine = new_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    return engine


def close_october(engine):
    return close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover=HERON)


def nothing_closed(engine) -> bool:
    return fetch(engine, select(closed_months)) == [] and fetch(engine, select(statement_lines)) == []


def several_files_scenario(url: str) -> None:
    """A bill in two files is their sum at close; the same file (by name or content) is not added twice."""
    engine = october(url)
    assert record_invoice(engine, OCT, "heron", invoice("45.00", "part-1.csv"), "finance") == 45.00
    assert record_invoice(engine, OCT, "heron", invoice("15.00", "part-2.csv"), "finance", add=True) == 60.00
    assert record_invoice(engine, OCT, "heron", invoice("15.00", "part-2.csv"), "finance", add=True) is None  # kept
    for twice in (Invoice(Decimal("15.00"), "USD", "copy.csv", invoice("15.00", "part-2.csv").sha256, 1, 1),
                  Invoice(Decimal("1.00"), "USD", "part-2.csv", "f" * 64, 1, 1)):
        with pytest.raises(InvoiceError, match="already has part-2.csv .*a file is added once"):
            record_invoice(engine, OCT, "heron", twice, "finance", add=True)
    closed = close_october(engine)
    # by hand: heron cost 45.00 + 15.00 = 60.00 and charged 48.00: 12.00 recovered (as OCT_RECOVERY)
    assert sum(line.amount for line in closed.lines if line.cluster == "heron") == pytest.approx(60.00)


def non_finite_invoice_scenario(url: str, cost: float) -> None:
    """An invoice stored as NaN or infinite by an earlier billing: the close is refused, nothing is written."""
    engine = october(url)
    with engine.begin() as conn:
        conn.execute(insert(invoices).values(month=OCT, cluster="heron", sha256="ab" * 32, billed_cost=cost,
                                             currency="USD", file_name="october.csv", rows_read=1, rows_matched=1,
                                             imported_at=datetime.now(timezone.utc), imported_by="finance"))
    with pytest.raises(StatementError, match=rf"the invoice of cluster heron for 2026-10 in the ledger \(table invoices\) "
                                             rf"is {cost}, no amount; import it again"):
        close_october(engine)
    assert nothing_closed(engine)


def non_finite_row_scenario(url: str, cost: float) -> None:
    """A ledger row of the month stored as NaN or infinite: its statement and its close are refused."""
    engine = october(url)
    with engine.begin() as conn:
        conn.execute(insert(chargeback).values(day=date(2026, 10, 7), cluster="heron", namespace="dave", team="vision",
                                               owner="dave", resource="gpu", gpu_model="", quantity=1.0, unit_price=2.0,
                                               cost=cost, list_cost=cost, currency="USD",
                                               computed_at=datetime.now(timezone.utc)))
    reason = rf"table chargeback holds quantity 1.0, cost {cost}, list_cost {cost} for team vision on cluster heron " \
             rf"\(2026-10-07\) in 2026-10, no amount; run 2026-10-07 again"
    with pytest.raises(StatementError, match=reason):
        build_statement(engine, OCT, "USD", {})
    with pytest.raises(StatementError, match=reason):
        close_month(engine, OCT, "finance", TODAY_DONE, "USD", {}, recover={"heron": CostRecovery(monthly_cost=60)})
    assert nothing_closed(engine)


def import_during_close_scenario(engine, close_holding) -> None:
    """A close of October holds what it holds (`close_holding`: a context manager giving the close's connection,
    from its locks to its commit) while October's invoice is imported again: the import waits, then finds the month
    closed; the invoice stays as the close recovered it."""
    record_invoice(engine, OCT, "heron", invoice("60.00", "october.csv"), "finance")
    importing = ThreadPoolExecutor(1)
    with close_holding() as conn:
        late = importing.submit(record_invoice, engine, OCT, "heron", invoice("70.00", "corrected.csv"), "finance",
                                replace=True)
        time.sleep(1.0)
        assert not late.done()  # waiting for the close
        conn.execute(insert(closed_months).values(month=OCT, closed_at=datetime.now(timezone.utc), closed_by="finance",
                                                  missing_days=""))
    with pytest.raises(InvoiceError, match="2026-10 is closed; reopen it"):
        late.result(timeout=30)
    assert [row["billed_cost"] for row in fetch(engine, select(invoices))] == [60.0]
