"""Accounts named outside the config (docs/spec.md "Accounts"): by the directory (an accounts attribute on a team's
or a person's entry) and by ColdFront (an allocation's account attribute), turned into the assignments the config
makes, and merged with the config's.

Neither source has dates or percentages: a subject a source names is charged to its accounts on every day, split
equally between them (the rest of an even split to the first, so that three thirds add up to 100), as of the
directory the last run stored. Where the sources disagree, the config wins, then ColdFront (where a PI chose the
account of an allocation), then the directory: a subject the config assigns takes none of ColdFront's or the
directory's accounts, and a subject ColdFront names none of the directory's. An id that `accounts.names` does not
hold is left out with a sentence (a typo in the directory must not become a line the finance office cannot post);
a subject left with none of its ids falls to the next source, or to the default account.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_DOWN, Decimal

from billing.accounts import HUNDRED, Account, AccountAssignment, Accounts, Subject, spelled_otherwise
from billing.config import AccountsConfig
from billing.directory.people import Directory, NamedAccounts

ORIGINS = ("coldfront", "directory")  # which source a subject's accounts come from where both name it
PLACES = Decimal("0.0001")  # the config's percentages' places


@dataclass(frozen=True)
class NamedAssignments:
    """The assignments the directory and ColdFront make, and a sentence for each id no account has."""

    assignments: tuple[AccountAssignment, ...]
    unknown: tuple[str, ...]


def equal_split(count: int) -> list[Decimal]:
    """100 % in `count` parts to four places, adding to exactly 100 (the rest to the first)."""
    part = (HUNDRED / count).quantize(PLACES, rounding=ROUND_DOWN)
    return [HUNDRED - part * (count - 1)] + [part] * (count - 1)


def named_assignments(named: tuple[NamedAccounts, ...], names: dict[str, str]) -> NamedAssignments:
    """Each subject's accounts from the first source naming a known one, split equally, valid on every day."""
    found: list[AccountAssignment] = []
    unknown: list[str] = []
    by_subject: dict[Subject, list[NamedAccounts]] = defaultdict(list)
    for given in named:
        by_subject[Subject(given.kind, given.name)].append(given)
        unknown += [f"{given.source} names account {account!r} for {given.kind} {given.name}, which accounts.names "
                    f"does not hold{spelled_otherwise(account, names)}: name it there, or correct the value"
                    for account in given.accounts if account not in names]
    for subject, held in by_subject.items():
        for origin in ORIGINS:
            sources = [given for given in held if given.origin == origin]
            ids = list(dict.fromkeys(account for given in sources for account in given.accounts if account in names))
            if ids:
                source = "; ".join(given.source for given in sources)
                found += [AccountAssignment(subject, Account(account, names[account]), percent, date.min, None, source)
                          for account, percent in zip(ids, equal_split(len(ids)), strict=True)]
                break
    return NamedAssignments(tuple(found), tuple(unknown))


def accounts_of(section: AccountsConfig, directory: Directory | None) -> Accounts:
    """The config's accounts with those the directory (as the last run stored it, with ColdFront's) names for
    subjects the config does not assign."""
    own = section.accounts()
    if directory is None:
        return own
    assigned = {assignment.subject for assignment in own.assignments}
    given = named_assignments(directory.named_accounts, section.names).assignments
    return Accounts(own.assignments + tuple(a for a in given if a.subject not in assigned), own.default)
