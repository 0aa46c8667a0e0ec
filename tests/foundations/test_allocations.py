"""The one piece of allocations' arithmetic every reader shares (billing/allocations.py `draws`), by hand, and the
allocations nothing draws on."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from billing.accounts import Account, AccountAssignment, Accounts, Subject
from billing.allocations import Allocation, draws, undrawn


def test_each_night_draws_its_use_up_to_what_the_nights_before_left():
    assert draws(10.0, [4.0, 4.0, 4.0, 4.0]) == [4.0, 4.0, 2.0, 0.0]
    assert draws(10.0, [3.0, -2.0, 5.0]) == [3.0, 0.0, 5.0]  # a night credited more than charged gives nothing back
    assert draws(10.0, []) == []


def test_an_allocation_whose_account_nothing_is_charged_to_is_named_on_the_days_it_holds():
    robotics = AccountAssignment(Subject("team", "robotics"), Account("G-1", "NSF"), Decimal(100), date(2026, 11, 1),
                                 date(2026, 11, 15), "accounts.assignments[0]")
    accounts = Accounts((robotics,), Account("RC", "Research computing"))
    held = [Allocation(account, date(2026, 11, 1), date(2026, 11, 30), 100.0, "EUR", source=f"allocations[{number}]")
            for number, account in enumerate(("G-1", "G-2", "RC"))]
    assert undrawn(held, accounts, date(2026, 11, 15)) == [
        "allocations[1] (G-2's allocation of 2026-11-01 to 2026-11-30): no assignment, directory entry or ColdFront "
        "allocation charges account G-2 on 2026-11-15, so nothing draws on it: assign the account, or correct the "
        "allocation's"]
    assert [sentence[:14] for sentence in undrawn(held, accounts, date(2026, 11, 16))] == [  # G-1's grant ended
        "allocations[0]", "allocations[1]"]
    assert undrawn(held, accounts, date(2026, 12, 1)) == []  # none holds
