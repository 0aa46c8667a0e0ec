"""Allocations as people read them (docs/spec.md "Allocations"): each allocation's balance as of a night, and a
month's statement lines of what allocations prepaid and, where `overage: show`, of use beyond them not charged.

The ledger keeps each night's use and draw per allocation, team and cluster (billing/ledger/allocations.py); every
figure here is a sum of those rows, so the pages, serve, `billing mcp`, the emails, the alerts and the statement
read the same balance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from billing.allocations import Allocation
from billing.money import money_sums, total
from billing.resources import ALLOCATION_DRAWN, OVERAGE_NOT_CHARGED

if TYPE_CHECKING:  # the words below are read by `billing report`, which loads no pandas (docs/architecture.md)
    import pandas as pd

# what a statement calls each line, after which the allocation's account is named
ALLOCATION_WORDS = {ALLOCATION_DRAWN: "Allocation drawn", OVERAGE_NOT_CHARGED: "Overage not charged"}
ALLOCATION_SUMS = {ALLOCATION_DRAWN: "Allocations drawn", OVERAGE_NOT_CHARGED: "Overage not charged"}
ALLOCATION_MEANINGS = {
    ALLOCATION_DRAWN: "the charges a prepaid allocation of the account paid (allocations)",
    OVERAGE_NOT_CHARGED: "the charges beyond an allocation with overage: show, shown and not charged (allocations)"}


@dataclass(frozen=True)
class AllocationStatus:
    """An allocation as of a night: what its account used of it and beyond it, in its unit."""

    allocation: Allocation
    as_of: date
    used: float  # the account's share of the charges from its first night to `as_of`, in its unit
    drawn: float  # of it, what the allocation paid
    drawn_in_month: float  # of that, in the month of `as_of`
    teams: tuple[str, ...]  # the teams whose charges drew on it

    @property
    def balance(self) -> float:
        return max(total([self.allocation.amount, -self.drawn]), 0.0)

    @property
    def overage(self) -> float:
        return max(total([self.used, -self.drawn]), 0.0)

    @property
    def percent_drawn(self) -> float:
        return 100 * self.drawn / self.allocation.amount

    def as_dict(self) -> dict:
        """As the JSON of serve and `billing mcp` give it."""
        held = self.allocation
        return {"account": held.account, "from": held.first.isoformat(), "to": held.last.isoformat(),
                "unit": held.unit, "amount": held.amount, "drawn": round(self.drawn, 2),
                "drawn_this_month": round(self.drawn_in_month, 2), "balance": round(self.balance, 2),
                "overage": round(self.overage, 2), "overage_policy": held.overage,
                "percent_drawn": round(self.percent_drawn, 1), "teams": list(self.teams), "as_of": self.as_of.isoformat()}


def statuses(draws: pd.DataFrame, allocations: Sequence[Allocation], day: date,
             assigned: Mapping[str, Iterable[str]] | None = None) -> list[AllocationStatus]:
    """Each allocation that has begun by `day`, as of `day`; `draws` are the ledger's rows of its nights up to
    then (billing/ledger/allocations.py). Its teams are those whose charges drew on it, and those `assigned` to its
    account (account id -> teams), which have drawn nothing yet."""
    found = []
    month = day.replace(day=1)
    for allocation in allocations:
        if allocation.first > day:
            continue
        own = draws[(draws["account"] == allocation.account) & (draws["starts"] == allocation.first)
                    & (draws["day"] >= allocation.first) & (draws["day"] <= min(day, allocation.last))]
        found.append(AllocationStatus(allocation, day, total(own["used"]), total(own["drawn"]),
                                      total(own.loc[own["day"] >= month, "drawn"]),
                                      tuple(sorted({*own["team"], *(assigned or {}).get(allocation.account, ())}))))
    return found


@dataclass(frozen=True)
class AllocationLine:
    """A team's month on a cluster: what an account's allocation paid of it, or its overage not charged (below 0)."""

    team: str
    cluster: str
    kind: str  # ALLOCATION_DRAWN or OVERAGE_NOT_CHARGED
    account: str
    amount: float


def allocation_lines(draws: pd.DataFrame, allocations: Sequence[Allocation]) -> list[AllocationLine]:
    """The month's lines of its nights' `draws`: per allocation, team and cluster what it drew, in money, taken off
    the month; and where its overage is shown only, what was used beyond it, taken off too."""
    found = []
    for allocation in allocations:
        own = draws[(draws["account"] == allocation.account) & (draws["starts"] == allocation.first)]
        if own.empty:
            continue
        sums = money_sums(own, ["team", "cluster"], ["used_cost", "drawn_cost"])
        for team, cluster, used, drawn in sums[["team", "cluster", "used_cost", "drawn_cost"]].itertuples(index=False):
            if drawn > 0:
                found.append(AllocationLine(team, cluster, ALLOCATION_DRAWN, allocation.account, -drawn))
            beyond = total([used, -drawn])
            if allocation.overage == "show" and beyond > 0:
                found.append(AllocationLine(team, cluster, OVERAGE_NOT_CHARGED, allocation.account, -beyond))
    return found
