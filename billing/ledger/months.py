"""The ledger's months: what closing and reopening one read and write (tables closed_months, statement_lines,
month_closings, corrections, invoices). billing/publish/statement.py decides what a statement holds; these
functions take the connection of its transaction, so that a close reads and writes in one."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Row, delete, insert, select

from billing.ledger.tables import (
    LEDGER_COLUMNS,
    chargeback,
    closed_months,
    completed_days,
    corrections,
    invoices,
    month_closings,
    statement_lines,
)
from billing.ledger.write import month_after


def closing_of(conn: Connection, month: date) -> tuple[datetime, str, tuple[date, ...]] | None:
    """(closed_at in UTC, closed_by, the days never run when it was closed) of a closed month; None if open."""
    row = conn.execute(select(closed_months).where(closed_months.c.month == month)).first()
    if row is None:
        return None
    at = row.closed_at  # SQLite hands it back naive (it stored UTC); PostgreSQL in the session's zone
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at, row.closed_by, tuple(date.fromisoformat(d) for d in row.missing_days.split(",") if d)


def month_rows(conn: Connection, first: date, last: date) -> pd.DataFrame:
    """The ledger's rows of the month's days (LEDGER_COLUMNS)."""
    rows = conn.execute(select(chargeback).where(chargeback.c.day.between(first, last))).all()
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def booked_corrections(conn: Connection, month: date) -> pd.DataFrame:
    """The corrections booked in the month, with every column of their table."""
    rows = conn.execute(select(corrections).where(corrections.c.month == month)).all()
    return pd.DataFrame(rows, columns=[c.name for c in corrections.columns])


def completed_between(conn: Connection, first: date, last: date) -> set[date]:
    """The days in the range that a run completed."""
    return {row.day for row in conn.execute(select(completed_days.c.day).where(completed_days.c.day.between(first, last)))}


def stored_lines(conn: Connection, month: date) -> list[Row]:
    """A closed month's statement lines as its close stored them, in their order."""
    return list(conn.execute(select(statement_lines).where(statement_lines.c.month == month)
                             .order_by(statement_lines.c.line)).all())


def store_closing(conn: Connection, month: date, at: datetime, by: str, missing_days: tuple[date, ...] | list[date],
                  lines: list[dict[str, Any]]) -> None:
    """Mark the month closed and store its statement lines (each a row of statement_lines less month and line)."""
    missing = ",".join(day.isoformat() for day in missing_days)
    conn.execute(insert(closed_months).values(month=month, closed_at=at, closed_by=by, missing_days=missing))
    if lines:
        conn.execute(insert(statement_lines), [{"month": month, "line": number, **line}
                                               for number, line in enumerate(lines, 1)])


def log_month(conn: Connection, month: date, action: str, by: str, at: datetime) -> None:
    """Who closed or reopened the month, and when (table month_closings)."""
    conn.execute(insert(month_closings).values(month=month, logged_at=at, action=action, who=by))


def invoiced(conn: Connection, month: date, cluster: str) -> list[float]:
    """The billed cost of each invoice file imported for the cluster's month."""
    query = select(invoices.c.billed_cost).where(invoices.c.month == month, invoices.c.cluster == cluster)
    return list(conn.execute(query).scalars().all())


def latest_closed_after(conn: Connection, month: date) -> date | None:
    """The latest closed month after `month`, if any."""
    row = conn.execute(select(closed_months.c.month).where(closed_months.c.month > month)
                       .order_by(closed_months.c.month.desc())).first()
    return None if row is None else row.month


def delete_closing(conn: Connection, month: date, first: date, last: date) -> None:
    """Open the month again: its stored lines and closing go, and the corrections of its days (first..last)
    booked in later months."""
    conn.execute(delete(statement_lines).where(statement_lines.c.month == month))
    conn.execute(delete(closed_months).where(closed_months.c.month == month))
    conn.execute(delete(corrections).where(corrections.c.corrects.between(first, last),
                                           corrections.c.month >= month_after(month)))
