"""A cluster's electricity (docs/spec.md "Energy and carbon"): what a kWh costs and what it emits, one set for every
day or dated sets in force from a day on, as prices are. A cluster with an `energy` section has its energy read."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Discriminator, Field, StrictBool, Tag

from billing.config.prices import PRICE_FORMS, Day, Price, finite_number
from billing.config.section import Section

# grams of CO2e per kWh: the dirtiest grids are near 1,000; ten times that is no grid, it is a typo
Intensity = Annotated[float, BeforeValidator(finite_number), Field(ge=0, lt=1e4, allow_inf_nan=False)]


class Energy(Section):
    """What a kWh costs (unset: energy is shown, not billed), the grid's carbon intensity (unset: carbon unknown), and
    whether the energy no pod accounts for is shared over the namespaces in proportion to theirs (off: it stays the
    cluster's unattributed, shown and billed to nobody)."""

    price_kwh: Price | None = None
    carbon_g_per_kwh: Intensity | None = None
    share_unattributed: StrictBool = False


class DatedEnergy(Energy):
    """An energy set in force from a day on, until the next set's `from`."""

    from_: Day = Field(alias="from")


EnergySets = Annotated[
    Annotated[Energy, Tag(PRICE_FORMS[0])] | Annotated[list[DatedEnergy], Tag(PRICE_FORMS[1])],
    Discriminator(lambda value: PRICE_FORMS[1] if isinstance(value, list) else PRICE_FORMS[0]),
]
