"""Allocations in the ledger (tables allocation_draws and allocation_alerts; docs/spec.md "Allocations").

A night's use of each allocation replaces that night's rows in the day's transaction (billing/ledger/write.py), as
every other table's rows of a day are, so a night run twice draws once. Then each allocation is drawn down again
from its first night in day order (billing/allocations.py `draws`): a night re-run or back-filled before later
nights moves what those drew, and a changed amount is drawn from anew, and every night's draw is the one its
order gives.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, bindparam, delete, insert, select, text, update

from billing import frames
from billing.allocations import Allocation, draws
from billing.ledger.database import fetch_rows, transaction
from billing.ledger.tables import allocation_alerts, allocation_draws, deliveries

# the advisory lock runs of different nights take around drawing allocations down again (PostgreSQL); no day's
# key (days are positive) nor a month's (minus a first day's ordinal, above -800,000)
_DRAWING = -(1 << 40)


def replace_allocation_use(conn: Connection, day: date, use: pd.DataFrame, allocations: Sequence[Allocation],
                           currency: str) -> None:
    """In the day's transaction: the night's use (frames.ALLOCATION_USE) in place of its earlier rows, then every
    allocation drawn down again in day order."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DRAWING})
    conn.execute(delete(allocation_draws).where(allocation_draws.c.day == day))
    frames.ALLOCATION_USE.check(use, "the night's allocation use")
    records: list[dict[str, Any]] = use[frames.ALLOCATION_USE.columns].to_dict("records")  # type: ignore[assignment]  # pandas-stubs: keys are the column names
    if records:
        conn.execute(insert(allocation_draws), [{**record, "day": day, "drawn": 0.0, "drawn_cost": 0.0,
                                                 "currency": currency} for record in records])
    for allocation in allocations:
        _draw_down(conn, allocation)


def _draw_down(conn: Connection, allocation: Allocation) -> None:
    """The allocation's nights drawn in day order; each team's and cluster's part of a night draws its share of the
    night's draw (in money, that share of its cost)."""
    key = (allocation_draws.c.account == allocation.account, allocation_draws.c.starts == allocation.first)
    rows = conn.execute(select(allocation_draws.c.day, allocation_draws.c.team, allocation_draws.c.cluster,
                               allocation_draws.c.used, allocation_draws.c.used_cost)
                        .where(*key, allocation_draws.c.day.between(allocation.first, allocation.last))
                        .order_by(allocation_draws.c.day)).all()
    nights: dict[date, list[Any]] = defaultdict(list)
    for row in rows:
        nights[row.day].append(row)
    used = [sum(part.used for part in parts) for parts in nights.values()]
    changed = []
    for (day, parts), night_used, drawn in zip(nights.items(), used, draws(allocation.amount, used), strict=True):
        fraction = drawn / night_used if night_used > 0 else 0.0
        changed += [{"d": day, "t": part.team, "c": part.cluster, "drawn": part.used * fraction,
                     "drawn_cost": part.used_cost * fraction} for part in parts]
    if changed:
        conn.execute(update(allocation_draws).where(
            *key, allocation_draws.c.day == bindparam("d"), allocation_draws.c.team == bindparam("t"),
            allocation_draws.c.cluster == bindparam("c")), changed)


def allocation_draws_between(conn: Connection | Engine, first: date, last: date) -> pd.DataFrame:
    """Every allocation's rows of the nights from `first` to `last`: account, starts, day, team, cluster, used,
    used_cost, drawn, drawn_cost, currency."""
    query = select(allocation_draws).where(allocation_draws.c.day.between(first, last))
    rows = fetch_rows(conn, query, "the ledger") if isinstance(conn, Engine) else conn.execute(query).all()
    return pd.DataFrame([dict(row._mapping) for row in rows], columns=[c.name for c in allocation_draws.columns])


def alerted(engine: Engine) -> set[tuple[str, date, float]]:
    """(account, starts, threshold) of every allocation alert recorded."""
    query = select(allocation_alerts.c.account, allocation_alerts.c.starts, allocation_alerts.c.threshold)
    return {(row.account, row.starts, row.threshold) for row in fetch_rows(engine, query, "the ledger")}


def recorded_alerts(engine: Engine) -> list[dict[str, Any]]:
    """The allocation alerts recorded, as rows of the table."""
    return [dict(row._mapping) for row in fetch_rows(engine, select(allocation_alerts), "the ledger")]


def record_alerts(engine: Engine, alerts: list[dict[str, Any]], owed: list[dict[str, Any]], at: datetime) -> None:
    """Allocation alerts and the messages they owe, in one transaction (a concurrent run recording one too fails
    instead of sending twice)."""
    with transaction(engine, "recording allocation alerts") as conn:
        conn.execute(insert(allocation_alerts), [{**alert, "sent_at": at} for alert in alerts])
        if owed:
            conn.execute(insert(deliveries), owed)
