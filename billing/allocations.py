"""Allocations: prepaid service units or money of an account for a period, drawn down night by night (docs/spec.md
"Allocations").

A research computing center sells an account an allocation (10,000 SU, or 5,000.00 of use) for a period. Each
night's charges that go to the account (its share of them, billing/accounts.py) draw it down, in SU where the
allocation is in SU, in money otherwise, until nothing is left; what is used beyond it is the overage, charged to
the account as usual or shown only (`overage`). This module holds the allocation as a typed value and the one
piece of arithmetic every reader shares, `draws`: a night's draw is its use up to what the nights before left.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from billing.accounts import Accounts, spelled_otherwise

SU = "SU"  # the unit of an allocation of service units; any other unit is the configured currency
# what is used beyond an allocation: charged to the account as usual, or shown and not charged
Overage = Literal["charge", "show"]


@dataclass(frozen=True)
class Allocation:
    """An account's prepaid `amount` of `unit` (SU, or the currency) from `first` to `last`, both days inclusive."""

    account: str  # an id of accounts.names
    first: date
    last: date
    amount: float
    unit: str  # SU or the currency, USD
    thresholds: tuple[float, ...] = (50.0, 80.0, 100.0)  # percent drawn that alerts
    overage: Overage = "charge"
    source: str = ""  # where it was given, for a sentence naming it: allocations[2]

    @property
    def in_su(self) -> bool:
        return self.unit == SU

    def holds(self, day: date) -> bool:
        return self.first <= day <= self.last

    def __str__(self) -> str:
        return f"{self.account}'s allocation of {self.first} to {self.last}"


def draws(amount: float, uses: Iterable[float]) -> list[float]:
    """Each night's draw, nights in day order: its use up to what the nights before left of `amount`. A night whose
    use is below 0 (the account credited more than charged) draws nothing and gives nothing back, so the draws add
    up to min(amount, the uses above 0)."""
    found, drawn = [], 0.0
    for use in uses:
        draw = min(max(use, 0.0), max(amount - drawn, 0.0))
        found.append(draw)
        drawn = math.fsum([drawn, draw])
    return found


def overlapping_allocations(allocations: Sequence[Allocation]) -> list[str]:
    """A sentence for each allocation of an account whose period overlaps an earlier one's: a night's charge would
    draw on both."""
    found = []
    by_account: dict[str, list[Allocation]] = defaultdict(list)
    for allocation in allocations:
        by_account[allocation.account].append(allocation)
    for held in by_account.values():
        held.sort(key=lambda a: a.first)
        for before, after in zip(held, held[1:]):
            if after.first <= before.last:
                found.append(f"{after.source} gives account {after.account} an allocation from {after.first}, while "
                             f"{before.source} holds until {before.last}: end one before the other starts")
    return found


def unknown_accounts(allocations: Sequence[Allocation], names: Iterable[str]) -> list[str]:
    """A sentence for each allocation of an account accounts.names does not have: nothing would draw on it."""
    known = set(names)
    return [f"{a.source}.account {a.account!r} is not in accounts.names{spelled_otherwise(a.account, known)}: name it "
            f"there, or correct its id" for a in allocations if a.account not in known]


def undrawn(allocations: Sequence[Allocation], accounts: Accounts, day: date) -> list[str]:
    """A sentence for each allocation holding `day` whose account nothing is charged to that day (no assignment of
    the config, the directory or ColdFront, nor the default account): it was paid for, and nothing draws on it."""
    charged = {a.account.id for a in accounts.assignments if a.valid_on(day)} | {accounts.default.id}
    return [f"{a.source} ({a}): no assignment, directory entry or ColdFront allocation charges account {a.account} "
            f"on {day}, so nothing draws on it: assign the account, or correct the allocation's"
            for a in allocations if a.holds(day) and a.account not in charged]
