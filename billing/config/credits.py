"""Credits and subsidies (docs/spec.md "Service units, credits and subsidies"): a fixed credit per month for a
number of months to a team (a new faculty member's start-up credit), and a percentage of the charges on a cluster
and/or of a team paid by someone else (a subsidy). Both are by calendar month, as the statement is."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from billing.config.prices import Budget
from billing.config.section import Section
from billing.days import NotADay, parse_month


def _month(value: object) -> date:
    """A month as the config writes it: `2026-09` (its first day)."""
    try:
        return parse_month(str(value))
    except NotADay:
        raise ValueError(f"expected a month like 2026-09, got {value}") from None


Month = Annotated[date, BeforeValidator(_month)]


def months_after(month: date, count: int) -> date:
    """The first day of the month `count` months after `month` (its first day)."""
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


class MonthlyCredit(Section):
    """A fixed amount off a team's statement each month for `months` months from `from`; what a month does not use
    is lost, not carried over."""

    team: Annotated[str, Field(min_length=1)]
    amount: Budget  # money per month, in the configured currency
    from_: Month = Field(alias="from")  # the first month it is given
    months: Annotated[int, Field(ge=1, le=1200)]

    def in_force(self, month: date) -> bool:
        return self.from_ <= month < months_after(self.from_, self.months)


class Subsidy(Section):
    """A percentage of a team's month on a cluster that is not charged to it: on one cluster, of one team, or of
    one team on one cluster; from a month on, until a last month or for good."""

    percent: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]
    cluster: str = ""  # '' every cluster
    team: str = ""  # '' every team
    from_: Month = Field(alias="from")  # the first month subsidised
    until: Month | None = None  # the last month subsidised; None: no end

    @model_validator(mode="after")
    def _names_what_it_subsidises(self) -> Subsidy:
        if not self.cluster and not self.team:
            raise ValueError("a subsidy names a cluster, a team or both; neither would subsidise every charge")
        if self.until is not None and self.until < self.from_:
            raise ValueError(f"until {self.until:%Y-%m} is before from {self.from_:%Y-%m}")
        return self

    def covers(self, month: date, team: str, cluster: str) -> bool:
        """Whether this subsidy applies to the team's month on the cluster."""
        return (self.from_ <= month and (self.until is None or month <= self.until)
                and self.cluster in ("", cluster) and self.team in ("", team))


class CreditsConfig(Section):
    """The credits and subsidies each month's statement takes off what teams are charged."""

    monthly: list[MonthlyCredit] = []
    subsidies: list[Subsidy] = []

    def percent(self, month: date, team: str, cluster: str) -> float:
        """The subsidy of a team's month on a cluster: the highest that applies (subsidies do not add up), or 0."""
        return max((subsidy.percent for subsidy in self.subsidies if subsidy.covers(month, team, cluster)), default=0.0)

    def credit(self, month: date, team: str) -> float:
        """The team's fixed credits given in the month, added up."""
        return sum(credit.amount for credit in self.monthly if credit.team == team and credit.in_force(month))
