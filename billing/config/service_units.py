"""Service units (docs/spec.md "Service units, credits and subsidies"): SU per resource-hour and per GPU model, as
Slurm's TRES billing weights, and optionally a price per SU from which a price set's prices are made."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from billing.config.section import Section
from billing.resources import REGISTRY, registered

# SU per resource-hour, and money per SU: bounded like a price (billing/config/prices.py HIGHEST_PRICE)
Weight = Annotated[float, Field(ge=0, lt=1e9, allow_inf_nan=False)]


def _not_true(value: object) -> object:
    """YAML's `true` is no weight of 1."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


class ServiceUnits(Section):
    """SU per resource-hour (`weights`, by the resource's name: gpu, cpu, memory, ...) and per GPU-hour of a model
    (`gpu_models`, else `weights.gpu`); a resource not weighted counts 0 SU, as a TRES Slurm does not weight."""

    weights: dict[str, Annotated[Weight, BeforeValidator(_not_true)]]
    gpu_models: dict[str, Annotated[Weight, BeforeValidator(_not_true)]] = {}
    # money per SU: set, the set's prices per resource-hour are weight x price (and not given apart)
    price: Annotated[Weight, BeforeValidator(_not_true)] | None = None

    _registered = field_validator("weights")(registered)

    def rates(self, scale: float = 1.0) -> dict[str, Any]:
        """The weights as a price set's keys (`gpu_hour`, `gpu_models`, ...), each times `scale` exactly to the
        float (0.1 SU at 0.05 per SU is 0.005, not 0.005000000000000001)."""
        def times(weight: float) -> float:
            return float(Decimal(repr(weight)) * Decimal(repr(scale)))
        return {**{resource.price_key: times(self.weights.get(name, 0.0)) for name, resource in REGISTRY.items()},
                "gpu_models": {model: times(weight) for model, weight in self.gpu_models.items()}}
