"""Cost recovery's arithmetic, shared by closing a month and by correcting a closed one.

Closing gives a recovered cluster's teams its month's cost in proportion to their
charges there. A re-run of one of the month's days later must not change that
cost, only who pays it: the cost is split again over the charges as they are
now, and each team's correction is the difference to what it was billed, so the
corrections on the cluster add up to zero (docs/spec.md "Corrections on a
recovered cluster").
"""

from __future__ import annotations

import math
from datetime import date
from typing import TypeVar

from sqlalchemy import Connection, func, select

from billing.days import days_in_month
from billing.errors import UsageError
from billing.ledger.tables import chargeback, corrections, statement_lines
from billing.money import BILLIONTHS, in_billionths
from billing.resources import RECOVERY

Key = TypeVar("Key", str, tuple[str, str])  # a team, or a team and its cost centre


class NothingToRecoverOver(UsageError):
    """A re-run would leave a recovered cluster no charges in its closed month to split the month's cost over."""


def shares(amount: float, weights: dict[Key, float]) -> dict[Key, float]:
    """`amount` split in proportion to `weights`, in their keys' sorted order, the last taking what the others
    leave, so that the shares add up to `amount` exactly."""
    whole, booked, split = math.fsum(weights.values()), 0.0, {}
    keys = sorted(weights)
    for key in keys:
        share = amount - booked if key == keys[-1] else amount * weights[key] / whole
        booked += share
        split[key] = share
    return split


def resplit(conn: Connection, day: date, new_costs: dict[tuple[str, str], float],
            changes: dict[tuple[str, str, str], float]) -> dict[tuple[str, str], float]:
    """Per (team, cluster) that the closed month of `day` recovered: the cost recovery correction that, beside the
    re-run's `changes` per (team, cluster, resource), brings the team to its share of the cluster's cost split over
    the month's charges with the day's `new_costs` per (team, cluster); the cluster's corrections add up to exactly
    zero in billionths, as statements sum them. None where it would be zero."""
    month = day.replace(day=1)
    costs = _recovered_costs(conn, month)
    if not costs:
        return {}
    billed = _billed(conn, month)
    charges = _charges_besides(conn, month, day)
    for key, cost in new_costs.items():
        charges[key] = charges.get(key, 0.0) + cost
    recovered: dict[tuple[str, str], float] = {}
    for cluster, cost in sorted(costs.items()):
        on_cluster = {team: charge for (team, where), charge in charges.items() if where == cluster}
        charged = math.fsum(on_cluster.values())
        if abs(charged) < 0.005:  # nothing left to the cent
            raise NothingToRecoverOver(
                f"re-running {day} would leave cluster {cluster} no charges in {month:%Y-%m}, a closed month that "
                f"recovered its cost of {cost:,.2f} over them; reopen it first (billing close --reopen)")
        due = {team: on_cluster[team] + share
               for team, share in shares(cost - charged, on_cluster).items()}
        teams = sorted(due.keys() | {team for team, where in billed if where == cluster})
        moves = {team: in_billionths(due.get(team, 0.0) - billed.get((team, cluster), 0.0)) for team in teams}
        moves[teams[-1]] -= sum(moves.values())  # the last takes what rounding to billionths left over
        for team, move in moves.items():
            changed = sum(in_billionths(amount) for (who, where, _), amount in changes.items()
                          if (who, where) == (team, cluster))
            if move != changed:
                recovered[team, cluster] = (move - changed) / BILLIONTHS
    return recovered


def _recovered_costs(conn: Connection, month: date) -> dict[str, float]:
    """Per cluster the closed month recovered: its cost as the statement has it, every line on it but the
    corrections of earlier months (what closing recovered, whether a monthly cost or an invoice)."""
    recovered = select(statement_lines.c.cluster).where(statement_lines.c.month == month,
                                                        statement_lines.c.kind == RECOVERY)
    query = (select(statement_lines.c.cluster, func.sum(statement_lines.c.amount))
             .where(statement_lines.c.month == month, statement_lines.c.kind != "correction",
                    statement_lines.c.cluster.in_(recovered))
             .group_by(statement_lines.c.cluster))
    return {cluster: cost for cluster, cost in conn.execute(query)}


def _billed(conn: Connection, month: date) -> dict[tuple[str, str], float]:
    """Per (team, cluster), what the team has been billed for the month: its closed statement's lines but the
    corrections of earlier months, and the corrections booked since for the month's days."""
    billed: dict[tuple[str, str], float] = {}
    lines = (select(statement_lines.c.team, statement_lines.c.cluster, func.sum(statement_lines.c.amount))
             .where(statement_lines.c.month == month, statement_lines.c.kind != "correction")
             .group_by(statement_lines.c.team, statement_lines.c.cluster))
    booked = (select(corrections.c.team, corrections.c.cluster, func.sum(corrections.c.amount))
              .where(corrections.c.corrects.between(month, month.replace(day=days_in_month(month))))
              .group_by(corrections.c.team, corrections.c.cluster))
    for query in (lines, booked):
        for team, cluster, amount in conn.execute(query):
            billed[team, cluster] = billed.get((team, cluster), 0.0) + amount
    return billed


def _charges_besides(conn: Connection, month: date, day: date) -> dict[tuple[str, str], float]:
    """Per (team, cluster), the ledger's cost of the month's other days."""
    query = (select(chargeback.c.team, chargeback.c.cluster, func.sum(chargeback.c.cost))
             .where(chargeback.c.day.between(month, month.replace(day=days_in_month(month))), chargeback.c.day != day)
             .group_by(chargeback.c.team, chargeback.c.cluster))
    return {(team, cluster): cost for team, cluster, cost in conn.execute(query)}
