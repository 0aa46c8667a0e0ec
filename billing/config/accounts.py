"""The accounts a research computing center charges (docs/spec.md "Accounts"): grants and departmental accounts by
id and name, which team, namespace or person each is charged for and when, the default account of charges with
none, and what the finance office's journal at `billing close` books them under."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from billing.accounts import (
    Account,
    AccountAssignment,
    Accounts,
    Subject,
    misspelled_namespace,
    overlapping,
    spelled_otherwise,
    uneven_days,
)
from billing.config.prices import Day, finite_number
from billing.config.section import Section
from billing.resources import registered

Name = Annotated[str, Field(min_length=1)]


def written_as_text(value: object) -> object:
    """An id or code is text as the finance office writes it; YAML reads unquoted digits as a number (012345 as the
    octal 5349, 1e5 as 100000.0), which would not be the id any more."""
    if isinstance(value, int | float):
        raise ValueError(f"YAML read this as the number {value!r}: quote it (e.g. '012345') so that the id is kept as "
                         f"written")
    return value


# an account id or an object code: 1-23456-7890, NSF-2231, '4500'
Code = Annotated[str, BeforeValidator(written_as_text), Field(min_length=1)]
# a share of a charge, in percent: 60, 33.33 (to the ten-thousandth, so that three thirds can add to 100)
Percent = Annotated[Decimal, BeforeValidator(finite_number), Field(gt=0, le=100, decimal_places=4)]


def namespace_name(name: str) -> str:
    """A namespace as Kubernetes spells them, else the sentence saying how it must be spelled."""
    if mistake := misspelled_namespace(name):
        raise ValueError(f"{name!r} {mistake}: write it as the cluster spells it")
    return name


class Assignment(Section):
    """One team, namespace or person charged to one account at a percentage from a day to a day, inclusive."""

    team: str = ""
    namespace: Annotated[str, AfterValidator(namespace_name)] = ""
    person: str = ""
    account: Code  # an id of accounts.names
    percent: Percent = Decimal(100)
    from_: Day = Field(alias="from")
    to: Day | None = None  # the last day charged; none: until changed

    @model_validator(mode="after")
    def _one_subject_and_a_period(self) -> Assignment:
        if sum(bool(name) for name in (self.team, self.namespace, self.person)) != 1:
            raise ValueError("set exactly one of team, namespace and person: what is charged to the account")
        if self.to is not None and self.to < self.from_:
            raise ValueError(f"to ({self.to}) is before from ({self.from_}): the period runs from its first day "
                             f"to its last, both charged")
        return self

    @property
    def subject(self) -> Subject:
        if self.namespace:
            return Subject("namespace", self.namespace)
        return Subject("person", self.person) if self.person else Subject("team", self.team)


class AccountsConfig(Section):
    """Accounts, their assignments, and the journal's accounts and object codes."""

    names: dict[Code, Name]  # account id -> its name, as the finance office writes them
    assignments: list[Assignment] = []
    default_account: Code  # an id of names: what a charge with no valid account is charged to
    revenue_account: Code  # an id of names: the recharge center's revenue, credited in the journal
    revenue_object_code: Code
    # the journal's object code per billed resource (gpu, cpu, memory); the rest, cost recovery among them,
    # default_object_code
    object_codes: dict[str, Code] = {}
    default_object_code: Code
    expiry_notice_days: Annotated[int, Field(ge=0, le=366)] = 30  # tell leads and admins this many days ahead

    _resources = field_validator("object_codes")(registered)

    @model_validator(mode="after")
    def _consistent(self) -> AccountsConfig:
        spelled: dict[str, str] = {}
        for account in self.names:  # the finance office's ids: NIH-R01 and nih-r01 are one account to a person
            if (other := spelled.setdefault(account.casefold(), account)) != account:
                raise ValueError(f"accounts.names holds {other!r} and {account!r}, which differ only in case: keep "
                                 f"one id per account")
        for key in ("default_account", "revenue_account"):
            if getattr(self, key) not in self.names:
                raise ValueError(f"{key} {getattr(self, key)!r} is not in accounts.names: name it there")
        for number, assignment in enumerate(self.assignments):
            if assignment.account not in self.names:
                raise ValueError(f"accounts.assignments[{number}].account {assignment.account!r} is not in "
                                 f"accounts.names{spelled_otherwise(assignment.account, self.names)}: name it there, "
                                 f"or correct its id")
        held = self.accounts().assignments
        problems = overlapping(held) or uneven_days(held)  # an account charged twice makes any day's sum wrong
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def accounts(self) -> Accounts:
        """The assignments as typed values, each naming its key."""
        return Accounts(tuple(AccountAssignment(a.subject, Account(a.account, self.names[a.account]), a.percent,
                                                a.from_, a.to, f"accounts.assignments[{number}]")
                              for number, a in enumerate(self.assignments)),
                        Account(self.default_account, self.names[self.default_account]))

    def object_code(self, resource: str) -> str:
        """The journal's object code of a statement line's resource (gpu, reserved-gpu, credit-cpu; '' for cost
        recovery)."""
        return self.object_codes.get(resource.rpartition("-")[2], self.default_object_code)
