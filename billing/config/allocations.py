"""Prepaid allocations of service units or money (docs/spec.md "Allocations"): an account's amount for a period,
the shares of it drawn that alert its teams' leads and the admins, and what is done with use beyond it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from billing.allocations import SU, Allocation, Overage
from billing.config.accounts import Code
from billing.config.prices import Budget, Day
from billing.config.section import Section

Percent = Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]


class AllocationConfig(Section):
    """One account's allocation: `service_units` or an `amount` of money (in `currency`), from a day to a day."""

    account: Code  # an id of accounts.names
    from_: Day = Field(alias="from")
    to: Day  # the last day drawn: an allocation is sold for a period
    service_units: Budget | None = None
    amount: Budget | None = None
    currency: str = ""  # of `amount`; '' the configured currency
    thresholds: list[Percent] = [50.0, 80.0, 100.0]  # percent drawn that alerts, each once
    overage: Overage = "charge"  # use beyond it: charged to the account as usual, or shown only

    @model_validator(mode="after")
    def _one_amount_and_a_period(self) -> AllocationConfig:
        if (self.service_units is None) == (self.amount is None):
            raise ValueError("give exactly one of service_units and amount: what was prepaid")
        if self.service_units is not None and self.currency:
            raise ValueError("currency is of an amount of money; an allocation of service_units has none")
        if self.to < self.from_:
            raise ValueError(f"to ({self.to}) is before from ({self.from_}): the period runs from its first day to "
                             f"its last, both drawn")
        return self

    @field_validator("thresholds")
    @classmethod
    def _ascending(cls, thresholds: list[float]) -> list[float]:
        return sorted(set(thresholds))

    def allocation(self, currency: str, source: str) -> Allocation:
        """As a typed value, in SU or in `currency` (the configured one, which the file checks `currency` is)."""
        if self.service_units is not None:
            return Allocation(self.account, self.from_, self.to, self.service_units, SU, tuple(self.thresholds),
                              self.overage, source)
        assert self.amount is not None  # one of the two, checked above
        return Allocation(self.account, self.from_, self.to, self.amount, currency, tuple(self.thresholds),
                          self.overage, source)
