"""`billing invoice import`: a cloud provider's bill read (billing/collect/invoices.py) and kept as what a cluster
cost in a month (billing/ledger/write.py), which `billing close` recovers from its teams."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from billing.collect.invoices import Invoice, InvoiceError, read_invoice
from billing.config import Config
from billing.ledger.database import open_ledger
from billing.ledger.write import record_invoice
from billing.money import money


@dataclass(frozen=True)
class Imported:
    """What an import read and kept: the cluster's part of the file, and the month's invoice in all (None: this very
    file was imported already, and nothing changed)."""

    cluster: str
    month: date
    bill: Invoice
    month_cost: float | None
    added: bool  # the file was added to the month's others (--add)

    def line(self) -> str:
        """What the command says it did, in one line."""
        bill, month = self.bill, f"{self.month:%Y-%m}"
        named = f"{bill.file_name} (sha256 {bill.sha256[:12]}…)"
        if self.month_cost is None:
            return f"the invoice of cluster {self.cluster} for {month} has {named} imported already; nothing changed"
        in_all = f"; the month's invoice is {money(self.month_cost, bill.currency)} in all" if self.added else ""
        return (f"imported the invoice of cluster {self.cluster} for {month}: "
                f"{money(float(bill.billed_cost), bill.currency)} from {bill.rows_matched:,} of {bill.rows_read:,} "
                f"rows of {named}{in_all}")


def import_invoice(config: Config, cluster: str, month: date, file: Path, by: str, replace: bool = False,
                   add: bool = False) -> Imported:
    """Sum the cluster's rows of the provider's FOCUS export (those its recover.invoice_match selects) and keep the
    sum as the month's cost; InvoiceError for a cluster the config does not have or cannot recover by invoice."""
    configured = next((c for c in config.clusters if c.name == cluster), None)
    if configured is None:
        raise InvoiceError(f"no cluster named {cluster!r} in the config (--cluster)")
    if configured.recover is None or not configured.recover.invoice_match:
        raise InvoiceError(f"cluster {cluster} has no recover.invoice_match in the config: nothing says which rows of "
                           "the bill are its")
    bill = read_invoice(file, configured.recover.invoice_match, config.currency, month)
    month_cost = record_invoice(open_ledger(config.database), month, cluster, bill, by, replace, add)
    return Imported(cluster, month, bill, month_cost, add)
