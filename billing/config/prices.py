"""Money in the configuration: price sets (one, or dated sets in force from a day on), a cluster's cost to
recover per month, and teams' monthly budgets."""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Discriminator, Field, PrivateAttr, Tag, field_validator, model_validator

from billing.config.section import Section
from billing.config.service_units import ServiceUnits
from billing.resources import REGISTRY


def finite_number(value: object) -> object:
    """YAML's `true` is not a price of 1.0 (pydantic would take it as one), nor is .nan or .inf a price."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return value


# money per unit: a price or a multiplier of one. A billion per resource-hour is no real price; far larger
# values (1e25) overflow what reports can show as money and would fail after the day is committed.
HIGHEST_PRICE = 1e9
Price = Annotated[float, BeforeValidator(finite_number), Field(ge=0, lt=HIGHEST_PRICE, allow_inf_nan=False)]
# a month's budget: money, so bounded like prices; a trillion is beyond any research cluster's month
HIGHEST_BUDGET = 1e12
Budget = Annotated[float, BeforeValidator(finite_number), Field(gt=0, lt=HIGHEST_BUDGET, allow_inf_nan=False)]


class Prices(Section):
    cpu_core_hour: Price
    memory_gib_hour: Price
    gpu_hour: Price
    gpu_models: dict[str, Price] = {}
    # persistent volumes per GiB-hour, per storage class; a class not listed pays storage_gib_hour, and where that
    # is unset too a day that holds the class is refused (docs/spec.md "Rule 6: price")
    storage_classes: dict[str, Price] = {}
    storage_gib_hour: Price | None = None
    # price multiplier per pod priority class (kube_pod_info's priority_class), e.g. backfill: 0.0 runs free;
    # other classes pay 1
    priority_classes: dict[str, Price] = {}
    # SU per resource-hour and GPU model; with a price per SU, the prices above are made from it (docs/spec.md
    # "Service units, credits and subsidies")
    service_units: ServiceUnits | None = None

    # a kWh of energy: the cluster's `energy.price_kwh` in force on the day, which ClusterConfig.prices_on gives the set
    # (no key of `prices`: it is dated with the carbon intensity); None where energy is shown only
    _energy_kwh: float | None = PrivateAttr(default=None)

    @property
    def energy_kwh(self) -> float | None:
        return self._energy_kwh

    def with_energy(self, price_kwh: float | None) -> Prices:
        """The same set with a kWh's price."""
        priced = self.model_copy()
        priced._energy_kwh = price_kwh
        return priced

    @model_validator(mode="before")
    @classmethod
    def _priced_by_service_units(cls, data: Any) -> Any:
        """With `service_units.price`, each price per resource-hour is its weight times the price per SU, so that
        the bill is SU x price per SU (Slurm's recharge model); a set giving both would have two prices."""
        units = data.get("service_units") if isinstance(data, dict) else None
        if not isinstance(units, dict) or units.get("price") is None:
            return data
        given = sorted(key for key in cls.rate_keys() if key in data)
        if given:
            raise ValueError(f"{given[0]} is given and service_units.price too: set the prices per resource-hour or "
                             "a price per SU, not both")
        try:
            made = ServiceUnits.model_validate(units)
        except ValueError:
            return data  # its own validation names the mistake
        assert made.price is not None
        return {**data, **{key: value for key, value in made.rates(made.price).items() if key in cls.rate_keys()}}

    @classmethod
    def rate_keys(cls) -> list[str]:
        """The set's keys of a price per resource-hour."""
        return [resource.price_key for resource in REGISTRY.values() if resource.price_key in cls.model_fields] + [
            "gpu_models"]

    def su_rates(self) -> Prices | None:
        """The set's SU weights in the form of a price set (SU per resource-hour), which unit prices are read from;
        None where the set has no service units."""
        if self.service_units is None:
            return None
        rates = self.service_units.rates()
        weighed = Prices(**{key: value for key, value in rates.items() if key in self.rate_keys()})
        return weighed.with_energy(rates.get("energy_kwh"))  # SU per kWh: `weights.energy`, else 0


def _day(value: object) -> date:
    """A day as the config writes it (2026-03-01): YAML's own date, or text of that form. A time of day or a number
    (which pydantic would take as Unix seconds) is no day."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value} is no day of the calendar (expected a date like 2026-03-01)") from None
    raise ValueError(f"expected a date like 2026-03-01, got {value}")


Day = Annotated[date, BeforeValidator(_day)]  # every date key of the config


class DatedPrices(Prices):
    """A price set in force from a day on, until the next set's `from` (docs/spec.md "Prices over time and cost
    recovery")."""

    from_: Day = Field(alias="from")


# `prices` is one set for every day, or a list of dated sets; the tags name the form in pydantic's error locations,
# which config errors leave out (clusters[0].prices.gpu_hour, clusters[0].prices[1].from)
PRICE_FORMS = ("one set", "dated sets")
PriceSets = Annotated[
    Annotated[Prices, Tag(PRICE_FORMS[0])] | Annotated[list[DatedPrices], Tag(PRICE_FORMS[1])],
    Discriminator(lambda value: PRICE_FORMS[1] if isinstance(value, list) else PRICE_FORMS[0]),
]


class CostRecovery(Section):
    """What a cluster cost per calendar month; `billing close` books cost recovery lines so that the month's
    charges on it add up to that (docs/spec.md "Prices over time and cost recovery")."""

    monthly_cost: Budget | None = None  # in the configured currency, e.g. an on-prem cluster's amortised cost
    # the cloud bill instead: the rows of the provider's FOCUS export that are this cluster, column (or
    # Tags.<key>) -> value; `billing invoice import` sums their BilledCost for a month
    invoice_match: dict[Annotated[str, Field(min_length=1)], str] = {}

    @model_validator(mode="after")
    def _one_source(self) -> CostRecovery:
        if (self.monthly_cost is None) == (not self.invoice_match):
            raise ValueError("set exactly one of monthly_cost and invoice_match")
        return self


class BudgetsConfig(Section):
    """What each team may spend per calendar month, and the shares of it that send an alert."""

    monthly: dict[str, Budget] = {}  # team -> amount in the currency
    alert_at: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = [0.8, 1.0]

    @field_validator("alert_at")
    @classmethod
    def _thresholds(cls, value: list[float]) -> list[float]:
        return sorted(set(value))
