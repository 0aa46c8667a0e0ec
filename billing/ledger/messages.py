"""The ledger's record of messages: budget alerts told, and each message's delivery (claimed, delivered).

billing/notify/ decides what to send and when; these functions are the only ones that read or write the
tables `budget_alerts` and `deliveries`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, Row, and_, insert, select, update
from sqlalchemy.exc import IntegrityError

from billing.ledger.database import fetch_rows, transaction
from billing.ledger.tables import budget_alerts, deliveries


def alerted(engine: Engine, month: date) -> set[tuple[str, float]]:
    """(team, threshold) of every budget alert recorded for the month."""
    query = select(budget_alerts.c.team, budget_alerts.c.threshold).where(budget_alerts.c.month == month)
    return {(row.team, row.threshold) for row in fetch_rows(engine, query, "the ledger")}


def recorded_alerts(engine: Engine, month: date) -> list[dict[str, Any]]:
    """The budget alerts recorded for the month, as rows of the table."""
    query = select(budget_alerts).where(budget_alerts.c.month == month)
    return [dict(row._mapping) for row in fetch_rows(engine, query, "the ledger")]


def record_alerts(engine: Engine, alerts: list[dict[str, Any]], owed: list[dict[str, Any]]) -> None:
    """Budget alerts and the messages they owe, in one transaction (a concurrent run recording one too fails
    instead of sending twice)."""
    with transaction(engine, "recording budget alerts") as conn:
        conn.execute(insert(budget_alerts), alerts)
        if owed:
            conn.execute(insert(deliveries), owed)


def undelivered(engine: Engine, day: date) -> dict[str, str]:
    """message -> address of the day's messages not delivered yet."""
    query = (select(deliveries.c.message, deliveries.c.address)
             .where(deliveries.c.day == day, deliveries.c.delivered_at.is_(None)))
    return {row.message: row.address for row in fetch_rows(engine, query, "the ledger")}


def _key(day: date, message: str) -> ColumnElement[bool]:
    return and_(deliveries.c.day == day, deliveries.c.message == message)


def claim_new(ledger: Engine, day: date, message: str, address: str, now: datetime, message_id: str) -> bool:
    """Claim a message no run has a row of; False if a row is there (delivered, owed, being sent, or left by a
    run that stopped)."""
    try:
        with ledger.begin() as connection:
            connection.execute(insert(deliveries).values(
                day=day, message=message, address=address, claimed_at=now, delivered_at=None, message_id=message_id))
    except IntegrityError:
        return False
    return True


def delivery(connection: Connection, day: date, message: str) -> Row | None:
    """The message's row, if any."""
    return connection.execute(select(deliveries).where(_key(day, message))).one_or_none()


def take_claim(connection: Connection, day: date, message: str, found: Row, values: dict[str, Any]) -> bool:
    """Claim the message with `values` if its row is still as `found` read it; False if another run claimed or
    delivered it meanwhile."""
    unchanged = and_(*(column.is_(None) if value is None else column == value
                       for column, value in [(deliveries.c.claimed_at, found.claimed_at),
                                             (deliveries.c.delivered_at, found.delivered_at)]))
    taken = connection.execute(update(deliveries).where(_key(day, message), unchanged).values(**values))
    return taken.rowcount == 1


def record_delivery(ledger: Engine, day: date, message: str, values: dict[str, Any]) -> None:
    """The message delivered, or released for the next try (`values` says which)."""
    with ledger.begin() as connection:
        connection.execute(update(deliveries).where(_key(day, message)).values(**values))
