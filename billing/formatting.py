"""How money and resource-hours are written for people: pages, emails, tables.

The ledger is never rounded (SPEC rule 8); display rounds half up on the
number's shortest decimal form, so 2.675 shows as 2.68, as a person expects.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from billing.config import MIG_RESOURCE_PREFIX
from billing.resources import UNITS

RESOURCE_NAMES = {
    "gpu": "GPU", "cpu": "CPU", "memory": "Memory",
    "reserved-gpu": "Reserved pool, GPU", "reserved-cpu": "Reserved pool, CPU", "reserved-memory": "Reserved pool, memory",
    "credit-gpu": "Pool use credited, GPU", "credit-cpu": "Pool use credited, CPU",
    "credit-memory": "Pool use credited, memory",
    "idle-gpu": "Idle GPU", "idle-cpu": "Idle CPU", "idle-memory": "Idle memory",
}

_CENT = Decimal("0.01")


def cents(value: float) -> Decimal:
    """The value rounded half up to two decimals; -0.00 becomes 0.00."""
    return Decimal(repr(float(value))).quantize(_CENT, rounding=ROUND_HALF_UP) + 0


def money(value: float, currency: str, signed: bool = False) -> str:
    """`1,234.56 USD`; with signed=True a change: `+12.30 USD`, `-4.00 USD`."""
    amount = cents(value)
    sign = "+" if signed and amount > 0 else ""
    return f"{sign}{amount:,.2f} {currency}"


def quantity(value: float, resource: str) -> str:
    """`24.00 GPU-h`, `1,536.25 core-h`, `12.00 GiB-h` for a ledger resource."""
    return f"{cents(value):,.2f} {UNITS[resource]}"


def held_gpus(held: list[dict]) -> str:
    """`14.00 × 1g.10gb slice-h, 28.00 × nvidia_com_gpu_shared replica-h`: shared GPU resources in their own
    units (a unit that is more than its physical GPUs is a slice of a MIG profile, or a time-sliced replica)."""
    parts = []
    for item in held:
        resource = item["resource"]
        if resource.startswith(MIG_RESOURCE_PREFIX):
            # nvidia_com_mig_1g_10gb -> 1g.10gb: the profile as nvidia-smi writes it
            name, unit = resource.removeprefix(MIG_RESOURCE_PREFIX).replace("_", ".", 1), "slice-h"
        else:
            name, unit = resource, "replica-h"
        parts.append(f"{cents(item['held_hours']):,.2f} × {name} {unit}")
    return ", ".join(parts)
