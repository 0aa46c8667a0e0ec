"""An invoice per account of a closed month, for the PI or department that holds it (docs/spec.md "Accounts"): the
account's part of each line of the month's statement, credits and subsidies as lines taking money off, and the
total due, which is what the month's journal debits the account, to the cent.

`billing close` writes them beside the journal, in the close's transaction (`post_invoices`): from the statement it
stores and the very rows it was made from, so the invoices, the journal and the statement are one split of one
month. An account's part of a line depends on the days its rows fall on (a grant ending on the 15th), which the
stored statement does not hold; a day re-run after the close changes those rows, so an invoice made later would
not be the close's. Each invoice is numbered as the close's journal posting (`2026-11-1/NIH-R01`): a month reopened
and closed again gets new invoices, as it gets a new journal, and each says which invoice it replaces.

Written as HTML (the Jinja2 template `reports/account_invoice.html.j2`) and as PDF from the same HTML by
WeasyPrint, which needs Debian's Pango (cronjob/Dockerfile installs it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection

from billing.accounts import Account, Accounts
from billing.config import AccountInvoicesConfig, AccountsConfig, ClusterConfig
from billing.ledger.journals import Posting, postings
from billing.ledger.months import month_rows
from billing.money import cents
from billing.private import write_whole
from billing.publish.account_split import LinePart, line_parts
from billing.publish.formatting import quantity, su_text
from billing.publish.journal import account_parts
from billing.publish.pages import render_template
from billing.publish.statement import Statement, StatementError, StatementLine, month_range
from billing.publish.statement_formats import describe

INVOICES = "invoices"  # under output_dir
JOURNAL = "journal"  # the kind of posting an invoice is numbered as (the other: its reversal)


@dataclass(frozen=True)
class InvoiceLine:
    """An account's part of a statement line: money to the cent (the exact part rounded once), resource-hours and
    SU (None where the line has none)."""

    line: StatementLine
    amount: Decimal
    quantity: Decimal | None
    service_units: Decimal | None

    @property
    def description(self) -> str:
        return describe(self.line)

    @property
    def quantity_text(self) -> str:
        return "" if self.quantity is None else quantity(float(self.quantity), self.line.resource)

    @property
    def service_units_text(self) -> str:
        return su_text(None if self.service_units is None else float(self.service_units))


@dataclass(frozen=True)
class AccountInvoice:
    """What one account is charged for a closed month."""

    number: str  # the journal's posting and the account: 2026-11-1/NIH-R01
    account: Account
    month: date  # first day
    currency: str
    issued: date  # the day of the close
    lines: tuple[InvoiceLine, ...]  # by team, cluster and the statement's order
    posted: tuple[tuple[str, Decimal], ...]  # (object code, amount): the journal's lines of the account
    replaces: str  # the account's invoice of the month's latest earlier close, '' if none

    @property
    def total(self) -> Decimal:
        """The total due: what the journal debits the account (less what it credits), to the cent."""
        return sum((amount for _, amount in self.posted), Decimal(0))

    @property
    def rounding(self) -> Decimal:
        """What the lines, each rounded on its own, miss of the total: the invoice's Rounding row."""
        return self.total - sum((line.amount for line in self.lines), Decimal(0))

    @property
    def service_units(self) -> Decimal | None:
        """The SU of the lines that have any; None: no line has SU."""
        units = [line.service_units for line in self.lines if line.service_units is not None]
        return sum(units, Decimal(0)) if units else None

    @property
    def teams(self) -> list[tuple[str, str, list[InvoiceLine]]]:
        """(team, cost centre, lines) in the lines' order."""
        grouped: dict[tuple[str, str], list[InvoiceLine]] = {}
        for line in self.lines:
            grouped.setdefault((line.line.team, line.line.cost_center), []).append(line)
        return [(team, center, lines) for (team, center), lines in grouped.items()]


def account_invoices(statement: Statement, rows: pd.DataFrame, section: AccountsConfig,
                     clusters: Sequence[ClusterConfig], number: int, issued: date, earlier: Posting | None = None,
                     accounts: Accounts | None = None) -> list[AccountInvoice]:
    """Every account with a part of the statement, in id order: its lines (`line_parts`) and what the journal of
    posting `number` books it (`account_parts`); an account the `earlier` journal of the month booked says that it
    replaces that close's invoice. `accounts`: the config's with the directory's and ColdFront's (else the config's)."""
    accounts = section.accounts() if accounts is None else accounts
    by_account: dict[Account, list[LinePart]] = defaultdict(list)
    for part in line_parts(statement, rows, accounts, clusters):
        by_account[part.account].append(part)
    posted: dict[str, list[tuple[str, Decimal]]] = defaultdict(list)
    for (account_id, code), amount in sorted(account_parts(statement, rows, section, accounts).items()):
        posted[account_id].append((code, amount))
    month = f"{statement.month:%Y-%m}"
    booked = {line.account for line in earlier.lines} if earlier else set()
    return [AccountInvoice(f"{month}-{number}/{account.id}", account, statement.month, statement.currency, issued,
                           tuple(_invoice_line(part) for part in parts), tuple(posted.get(account.id, ())),
                           f"{month}-{earlier.number}/{account.id}" if earlier and account.id in booked else "")
            for account, parts in sorted(by_account.items(), key=lambda item: item[0].id)]


def _invoice_line(part: LinePart) -> InvoiceLine:
    return InvoiceLine(part.line, cents(float(part.amount)), part.quantity, part.service_units)


def html(invoice: AccountInvoice, issuer: AccountInvoicesConfig) -> str:
    """The invoice as a page to read and print, every name escaped; the same bytes for the same invoice."""
    first, last = month_range(invoice.month)
    return render_template("account_invoice.html.j2", invoice=invoice, issuer=issuer, first=first, last=last)


def pdf(page: str) -> bytes:
    """The page as PDF, laid out by WeasyPrint from the same HTML and CSS (its print rules: A4 or Letter alike)."""
    try:
        from weasyprint import HTML  # loads Pango: only where an invoice is written
    except (ImportError, OSError) as exc:  # OSError: WeasyPrint found no Pango library to load
        raise StatementError(f"cannot lay out the invoices as PDF: WeasyPrint does not load ({exc}); install it "
                             f"with billing's dependencies and Debian's libpango-1.0-0 and libpangoft2-1.0-0, then "
                             f"close the month again") from None
    return HTML(string=page).write_pdf()


def post_invoices(conn: Connection, statement: Statement, section: AccountsConfig, issuer: AccountInvoicesConfig,
                  clusters: Sequence[ClusterConfig], output_dir: Path, accounts: Accounts | None = None) -> list[Path]:
    """In the close's transaction, after its journal is posted: each account's invoice of the month as HTML and PDF
    under `<output_dir>/invoices/<YYYY-MM-N>/`, numbered as the journal; returns the files written. A file that
    cannot be written fails the close, as the journal's does."""
    month = statement.month
    journals = [posting for posting in postings(conn, month) if posting.kind == JOURNAL]
    if not journals:  # the close posts its journal first: invoices without one would be numbered as nothing
        raise StatementError(f"no journal was posted for {month:%Y-%m}; invoices are numbered as the journal")
    rows = month_rows(conn, *month_range(month))
    number = journals[-1].number
    invoices = account_invoices(statement, rows, section, clusters, number, datetime.now(timezone.utc).date(),
                                journals[-2] if len(journals) > 1 else None, accounts)
    folder = output_dir / INVOICES / f"{month:%Y-%m}-{number}"
    names = _file_names([invoice.account.id for invoice in invoices], month)
    written = []
    for invoice in invoices:
        page = html(invoice, issuer)
        for suffix, content in ((".html", page.encode("utf-8")), (".pdf", pdf(page))):
            path = folder / f"{names[invoice.account.id]}{suffix}"
            try:
                write_whole(path, content)
            except OSError as exc:  # the close's transaction is rolled back: the month stays open
                raise StatementError(f"cannot write the invoice of account {invoice.account.id} for {month:%Y-%m} to "
                                     f"{path} ({exc.strerror or exc}); make output_dir writable and close the month "
                                     f"again") from None
            written.append(path)
    return written


def _file_names(ids: list[str], month: date) -> dict[str, str]:
    """Each account id as a file name: its letters, digits, dots, dashes and underscores, any other character an
    underscore; two ids that would share a name are refused rather than one invoice written over the other."""
    names = {account: re.sub(r"[^A-Za-z0-9._-]", "_", account).lstrip(".") or "_" for account in ids}
    seen: dict[str, str] = {}
    for account, name in names.items():
        if name in seen:
            raise StatementError(f"accounts {seen[name]!r} and {account!r} would both have their invoice of "
                                 f"{month:%Y-%m} in {name}.pdf; rename one of them in accounts.names")
        seen[name] = account
    return names
