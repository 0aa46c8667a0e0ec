"""Accounts: which grants or departmental accounts a charge goes to, at what percentage, on which day
(docs/spec.md "Accounts").

A research computing center charges a grant or a shortcode, not a team: a team, a namespace or a person is
assigned to one or more accounts, each for a period (from and to, both days inclusive), at percentages that add
to 100 on every day they hold. The charge of a day falls on its namespace, its person (where it has one) and its
team; the most specific of them with an assignment that day takes the whole charge (namespace over person over
team), and a charge none of them has an account for goes to the default account.

The assignments come from the configuration today (billing/config/accounts.py) and may come from the directory or
ColdFront later: each source hands on `AccountAssignment`s, and `Accounts.shares` answers for any of them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Literal

SubjectKind = Literal["namespace", "person", "team"]
# the order a charge's subjects are asked in: the first with an account on the day takes the charge
PRECEDENCE: tuple[SubjectKind, ...] = ("namespace", "person", "team")
HUNDRED = Decimal(100)
# a Kubernetes namespace's name (an RFC 1123 label: lower case, digits and '-'); one spelled otherwise (`Robotics`)
# names no namespace, and an assignment of it would charge nothing without a word
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Account:
    """A grant, a shortcode or a departmental account, as the finance office names it."""

    id: str  # G-2231, 1-23456-7890
    name: str  # NSF CNS-2231


@dataclass(frozen=True)
class Subject:
    """What an assignment charges: a team or a person as the directory spells them, or a namespace (of any
    cluster)."""

    kind: SubjectKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class AccountAssignment:
    """A subject charged to an account at a percentage from `first` to `last`, both inclusive (None: no end)."""

    subject: Subject
    account: Account
    percent: Decimal
    first: date
    last: date | None
    source: str = ""  # where it was given, for a sentence naming it: accounts.assignments[3]

    def valid_on(self, day: date) -> bool:
        return self.first <= day and (self.last is None or day <= self.last)


@dataclass(frozen=True)
class Share:
    """The part of a charge one account pays."""

    account: Account
    percent: Decimal


@dataclass(frozen=True)
class Accounts:
    """Every assignment, and the account a charge with none goes to."""

    assignments: tuple[AccountAssignment, ...]
    default: Account

    def shares(self, day: date, team: str, namespace: str, person: str | None) -> tuple[Share, ...]:
        """The accounts the charge of `day` on `namespace` (of `person`, billed to `team`) goes to, with their
        percentages (adding to 100): those of its most specific subject with an assignment valid on the day, else
        the default account."""
        names: dict[SubjectKind, str] = {"namespace": namespace, "person": person or "", "team": team}
        for kind in PRECEDENCE:
            held = self.valid_on(day, Subject(kind, names[kind])) if names[kind] else ()
            if held:
                return tuple(Share(held_one.account, held_one.percent) for held_one in held)
        return (Share(self.default, HUNDRED),)

    def account(self, account_id: str) -> Account:
        """The account of an id (an allocation's statement line names its account by id): as an assignment or the
        default names it, else named by its id."""
        named = {assignment.account.id: assignment.account for assignment in self.assignments}
        return named.get(account_id, self.default if account_id == self.default.id else Account(account_id, account_id))

    def valid_on(self, day: date, subject: Subject) -> tuple[AccountAssignment, ...]:
        """The subject's assignments valid on the day, by account id."""
        return tuple(sorted((a for a in self._by_subject.get(subject, ()) if a.valid_on(day)),
                            key=lambda a: a.account.id))

    @cached_property
    def _by_subject(self) -> dict[Subject, list[AccountAssignment]]:
        """Each subject's assignments, found once: a month's close asks for every row of the month."""
        return by_subject(self.assignments)

    def expiring(self, today: date, within: int) -> list[AccountAssignment]:
        """The assignments whose last day is today or within the next `within` days, soonest first."""
        return sorted((a for a in self.assignments if a.last is not None and today <= a.last <= today
                       + timedelta(days=within)), key=lambda a: (a.last, str(a.subject), a.account.id))


def spelled_otherwise(account: str, names: Iterable[str]) -> str:
    """How accounts.names spells an id it holds only in another case, as a clause ('' if it holds none such): the
    finance office's ids are one account whatever their case, so a mistyped case is named, with the fix."""
    spelled = [name for name in names if name.casefold() == account.casefold()]
    return f" (accounts.names spells it {spelled[0]!r})" if spelled else ""


def misspelled_namespace(name: str) -> str:
    """Why `name` is no Kubernetes namespace; '' when it may be one (or is empty: no namespace given)."""
    if name and not NAMESPACE.fullmatch(name):
        return "is no Kubernetes namespace (lower-case letters, digits and '-', at most 63)"
    return ""


def by_subject(assignments: tuple[AccountAssignment, ...]) -> dict[Subject, list[AccountAssignment]]:
    """Each subject's assignments, in their order."""
    held: dict[Subject, list[AccountAssignment]] = defaultdict(list)
    for assignment in assignments:
        held[assignment.subject].append(assignment)
    return dict(held)


def overlapping(assignments: tuple[AccountAssignment, ...]) -> list[str]:
    """A sentence for each pair of assignments of the same account to the same subject whose periods overlap: the
    account would be charged twice for the days they share."""
    found = []
    by_pair: dict[tuple[Subject, str], list[AccountAssignment]] = defaultdict(list)
    for assignment in assignments:
        by_pair[(assignment.subject, assignment.account.id)].append(assignment)
    for (subject, account), held in by_pair.items():
        held.sort(key=lambda a: a.first)
        reaching = held[0]  # of the assignments so far, the one that ends last
        for later in held[1:]:
            if reaching.last is None or later.first <= reaching.last:
                found.append(f"{later.source} assigns {subject} to account {account} from {later.first}, while "
                             f"{reaching.source} does until {reaching.last or 'no end'}: give each day to one of them")
            if reaching.last is not None and (later.last is None or later.last > reaching.last):
                reaching = later
    return found


def uneven_days(assignments: tuple[AccountAssignment, ...]) -> list[str]:
    """A sentence for each subject with a day on which its valid assignments do not add up to 100 %, naming the
    first such day of each run of days with the same percentages."""
    found = []
    for subject, held in by_subject(assignments).items():
        # the percentages change only where a period starts or the day after one ends
        changes = sorted({a.first for a in held} | {a.last + timedelta(days=1) for a in held if a.last})
        for day in changes:
            valid = sorted((a for a in held if a.valid_on(day)), key=lambda a: a.account.id)
            added = sum((a.percent for a in valid), Decimal(0))
            if valid and added != HUNDRED:
                listed = ", ".join(f"{a.account.id} {a.percent} %" for a in valid)
                found.append(f"{subject}'s accounts add up to {added} % on {day} ({listed}), not 100 %: "
                             f"give the percentages of every day they hold 100 in all")
    return found
