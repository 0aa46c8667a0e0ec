"""The finance office's journals of closed months (table journal_lines): each close's posting, recorded in the
close's transaction. billing/publish/journal.py decides what a journal holds; these functions take the connection
of the close, so that a month is closed and its journal recorded together or not at all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import Connection, insert, select

from billing.ledger.tables import journal_lines


@dataclass(frozen=True)
class PostedLine:
    """A journal line as the ledger keeps it: money in whole cents."""

    account: str
    object_code: str
    debit_cents: int
    credit_cents: int
    reference: str


@dataclass(frozen=True)
class Posting:
    month: date  # first day
    number: int  # 1, 2, ... in the order posted
    kind: str  # 'journal' or 'reversal'
    lines: tuple[PostedLine, ...]


def postings(conn: Connection, month: date) -> list[Posting]:
    """The month's postings, oldest first."""
    rows = conn.execute(select(journal_lines).where(journal_lines.c.month == month)
                        .order_by(journal_lines.c.posting, journal_lines.c.line)).all()
    found: dict[int, Posting] = {}
    for row in rows:
        line = PostedLine(row.account, row.object_code, row.debit_cents, row.credit_cents, row.reference)
        held = found.get(row.posting)
        found[row.posting] = Posting(month, row.posting, row.kind, (*held.lines, line) if held else (line,))
    return list(found.values())


def record_posting(conn: Connection, posting: Posting, at: datetime) -> None:
    """Keep a posting (its number the next of its month's)."""
    conn.execute(insert(journal_lines), [
        {"month": posting.month, "posting": posting.number, "line": number, "kind": posting.kind, "posted_at": at,
         "account": line.account, "object_code": line.object_code, "debit_cents": line.debit_cents,
         "credit_cents": line.credit_cents, "reference": line.reference}
        for number, line in enumerate(posting.lines, 1)])
