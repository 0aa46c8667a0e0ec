"""Each account's exact part of each line of a month's statement (docs/spec.md "Accounts"): the one split that the
finance office's journal sums per account and object code (billing/publish/journal.py) and that an account's invoice
lists line by line (billing/publish/account_invoices.py), so the two cannot disagree.

A line drawn from the ledger's rows of the month's days (a charge, its discount, a reserved pool, a credit, a share
of unrequested capacity) follows its rows, day by day, to the accounts of each row's namespace, person and team; a
correction goes to its team's accounts of the day it corrects; an allocation's line (drawn, or overage not charged)
to the account its model names; any other line (cost recovery, a subsidy, a monthly
credit) is split as the team's own charges of the month were split, or by its accounts on the month's last day where
those add up to nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd

from billing.accounts import Account, Accounts
from billing.charge.service_units import service_units
from billing.config import ClusterConfig
from billing.days import days_in_month
from billing.money import exact
from billing.publish.statement import CORRECTION, KINDS, PREPAID, Statement, StatementLine

DRAWN = {*KINDS.values(), "discount"}  # the kinds of line made from the ledger's rows of the month's days
_Key = tuple[str, str, str, str]  # team, cluster, resource, GPU model: a drawn line's rows


@dataclass(frozen=True)
class LinePart:
    """An account's part of a statement line, exact (to the billionth, as the ledger's sums): its money, and of a
    charge its resource-hours and service units (None where the line has none)."""

    line: StatementLine
    account: Account
    amount: Decimal
    quantity: Decimal | None
    service_units: Decimal | None


@dataclass
class _Drawn:
    """A key's rows' parts for one account: list cost, cost, resource-hours and SU."""

    list_cost: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    quantity: Decimal = Decimal(0)
    service_units: Decimal = Decimal(0)


def line_parts(statement: Statement, rows: pd.DataFrame, accounts: Accounts,
               clusters: Sequence[ClusterConfig] = ()) -> list[LinePart]:
    """Every account's part of every line of `statement`, in the lines' order, then the accounts' ids. `rows` are
    the ledger's rows of the month's days (LEDGER_COLUMNS); `clusters`' price sets weigh their SU."""
    drawn, teams = _split_rows(rows, accounts, clusters)
    last = statement.month.replace(day=days_in_month(statement.month))
    parts = []
    for line in statement.lines:
        key = (line.team, line.cluster, line.resource, line.gpu_model)
        if line.kind in DRAWN and key in drawn:
            parts += [_drawn_part(line, account, held) for account, held in sorted(drawn[key].items(), key=_by_id)]
            continue
        if line.kind in PREPAID:  # what an allocation paid is its account's alone, named in the line's model
            parts.append(LinePart(line, accounts.account(line.gpu_model), exact(line.amount), None, None))
            continue
        if line.kind == CORRECTION and line.corrects is not None:
            weights = {share.account: share.percent for share in accounts.shares(line.corrects, line.team, "", None)}
        else:
            weights = teams.get(line.team, {})
            if not sum(weights.values(), Decimal(0)):
                weights = {share.account: share.percent for share in accounts.shares(last, line.team, "", None)}
        whole = sum(weights.values(), Decimal(0))
        parts += [LinePart(line, account, exact(line.amount) * weight / whole, None, None)
                  for account, weight in sorted(weights.items(), key=_by_id)]
    return parts


def _by_id(item: tuple[Account, Any]) -> str:
    return item[0].id


def _split_rows(rows: pd.DataFrame, accounts: Accounts, clusters: Sequence[ClusterConfig]
                ) -> tuple[dict[_Key, dict[Account, _Drawn]], dict[str, dict[Account, Decimal]]]:
    """Each row to the accounts of its day, namespace, person and team: per drawn line's key and account its parts,
    and per team and account its cost (the weights of the team's lines not drawn from rows)."""
    drawn: dict[_Key, dict[Account, _Drawn]] = defaultdict(lambda: defaultdict(_Drawn))
    teams: dict[str, dict[Account, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    units = service_units(rows, clusters)
    row: Any  # a row of the frame's named columns
    for row, su in zip(rows.itertuples(index=False), units, strict=True):
        cost, list_cost = exact(row.cost), exact(row.list_cost)
        for share in accounts.shares(row.day, row.team, row.namespace, row.owner):
            held = drawn[(row.team, row.cluster, row.resource, row.gpu_model)][share.account]
            held.list_cost += list_cost * share.percent / 100
            held.cost += cost * share.percent / 100
            held.quantity += exact(row.quantity) * share.percent / 100
            held.service_units += (Decimal(0) if math.isnan(su) else exact(su)) * share.percent / 100
            teams[row.team][share.account] += cost * share.percent / 100
    return drawn, teams


def _drawn_part(line: StatementLine, account: Account, held: _Drawn) -> LinePart:
    """A drawn line's part: a discount is the rows' cost less their list cost, every other line its list cost with
    its resource-hours and SU."""
    if line.kind == "discount":
        return LinePart(line, account, held.cost - held.list_cost, None, None)
    return LinePart(line, account, held.list_cost, held.quantity,
                    None if line.service_units is None else held.service_units)
