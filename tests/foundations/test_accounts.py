"""billing/accounts.py: which accounts a day's charge goes to, and the assignments that cannot be right."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from billing.accounts import Account, AccountAssignment, Accounts, Share, Subject, overlapping, uneven_days

NSF, NIH, DEPT, UNFUNDED = (Account("NSF-2231", "NSF CNS-2231"), Account("NIH-R01", "NIH R01 GM-1"),
                            Account("DEPT-PHYS", "Physics"), Account("RC-UNFUNDED", "Research computing"))
VISION, ALICE, SCAN = Subject("team", "vision"), Subject("person", "alice"), Subject("namespace", "scan")


def assigned(subject: Subject, account: Account, percent: int, first: str, last: str | None = None,
             source: str = "") -> AccountAssignment:
    return AccountAssignment(subject, account, Decimal(percent), date.fromisoformat(first),
                             date.fromisoformat(last) if last else None, source)


# docs/billing.md's worked month: vision 60/40 between NSF and NIH until NSF ends on November 15, then the
# department takes NSF's 60
WORKED = Accounts((assigned(VISION, NSF, 60, "2026-09-01", "2026-11-15"),
                   assigned(VISION, NIH, 40, "2026-09-01", "2027-08-31"),
                   assigned(VISION, DEPT, 60, "2026-11-16", "2027-08-31")), UNFUNDED)


def test_a_team_splits_by_the_accounts_valid_on_the_day():
    assert WORKED.shares(date(2026, 11, 15), "vision", "scan", "alice") == (
        Share(NIH, Decimal(40)), Share(NSF, Decimal(60)))
    assert WORKED.shares(date(2026, 11, 16), "vision", "scan", "alice") == (
        Share(DEPT, Decimal(60)), Share(NIH, Decimal(40)))


def test_a_charge_with_no_valid_account_goes_to_the_default():
    assert WORKED.shares(date(2026, 11, 3), "nlp", "corpus", None) == (Share(UNFUNDED, Decimal(100)),)
    assert WORKED.shares(date(2026, 8, 31), "vision", "scan", "alice") == (Share(UNFUNDED, Decimal(100)),)


def test_namespace_wins_over_person_and_person_over_team():
    accounts = Accounts((*WORKED.assignments, assigned(ALICE, DEPT, 100, "2026-11-01", "2026-11-30"),
                         assigned(SCAN, NIH, 100, "2026-11-10", "2026-11-10")), UNFUNDED)
    assert accounts.shares(date(2026, 11, 10), "vision", "scan", "alice") == (Share(NIH, Decimal(100)),)
    assert accounts.shares(date(2026, 11, 11), "vision", "scan", "alice") == (Share(DEPT, Decimal(100)),)
    # bob's charge in the same namespace on another day is the team's
    assert accounts.shares(date(2026, 11, 11), "vision", "other", "bob") == (
        Share(NIH, Decimal(40)), Share(NSF, Decimal(60)))


def test_expiring_assignments_are_those_ending_within_the_days_given():
    # November 15 is 14 days after November 1: within 14 days, not within 13
    assert WORKED.expiring(date(2026, 11, 1), 13) == []
    assert [a.account for a in WORKED.expiring(date(2026, 11, 1), 14)] == [NSF]
    assert WORKED.expiring(date(2026, 11, 16), 0) == []
    assert WORKED.expiring(date(2026, 11, 16), 365) == [WORKED.assignments[2], WORKED.assignments[1]]


def test_overlapping_assignments_of_one_account_are_named():
    twice = (assigned(VISION, NSF, 60, "2026-09-01", "2026-11-15", "accounts.assignments[0]"),
             assigned(VISION, NSF, 40, "2026-10-01", "2026-10-05", "accounts.assignments[1]"),
             assigned(VISION, NSF, 40, "2026-11-10", None, "accounts.assignments[2]"),
             assigned(ALICE, NSF, 100, "2026-10-01", None, "accounts.assignments[3]"))
    assert overlapping(twice) == [
        "accounts.assignments[1] assigns team vision to account NSF-2231 from 2026-10-01, while "
        "accounts.assignments[0] does until 2026-11-15: give each day to one of them",
        "accounts.assignments[2] assigns team vision to account NSF-2231 from 2026-11-10, while "
        "accounts.assignments[0] does until 2026-11-15: give each day to one of them"]
    assert overlapping(WORKED.assignments) == []


def test_a_day_whose_percentages_do_not_add_to_100_is_named_with_its_subject():
    # NSF ends on the 15th and the department starts on the 17th: the 16th holds NIH's 40 % alone
    gap = (assigned(VISION, NSF, 60, "2026-09-01", "2026-11-15"), assigned(VISION, NIH, 40, "2026-09-01"),
           assigned(VISION, DEPT, 60, "2026-11-17"))
    assert uneven_days(gap) == ["team vision's accounts add up to 40 % on 2026-11-16 (NIH-R01 40 %), not 100 %: "
                                "give the percentages of every day they hold 100 in all"]
    assert uneven_days(WORKED.assignments) == []
    # a day with no assignment at all is no mistake: its charges go to the default account
    assert uneven_days((assigned(ALICE, DEPT, 100, "2026-11-01", "2026-11-02"),)) == []
