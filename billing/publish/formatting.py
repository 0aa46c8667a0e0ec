"""How money and resource-hours are written for people: pages, emails, tables.

The ledger is never rounded (docs/spec.md "Rule 8: cost"). One rule for every figure a person reads
(docs/spec.md "Rounding: one figure everywhere"): it is the exact decimal sum of the ledger values it stands
for, each to the billionth, rounded once, half away from zero on the cent (2.675 shows as 2.68, as a person
expects, and as SQL's `round(numeric, 2)` gives it). So a team, a person or a day reads the same wherever it
is shown. Where a table's rounded rows do not add up to its rounded total, `rounding` is the difference, shown
as a row of its own (ROUNDING), so that what the table shows adds up without moving a row a cent. Only a
statement's lines, parts of their cluster's month, are moved: `to_the_cent` rounds the lines of a cluster so that
they add up to the cluster's total (largest remainder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from billing.ledger.read import BILLIONTHS, in_billionths
from billing.resources import (
    CREDIT,
    KINDS,
    LENT,
    MIG_RESOURCE_PREFIX,
    QUOTA,
    RECOVERY,
    REGISTRY,
    RESERVED,
    UNITS,
    UNREQUESTED,
    Derived,
)

if TYPE_CHECKING:  # only money_sums takes a frame: a report's rows are plain, and it starts without pandas
    import pandas as pd

# what each kind of ledger row is, for people, before its resource's word: `Reserved pool, GPU`
KIND_NAMES = {RESERVED: "Reserved pool", CREDIT: "Pool or quota use credited", UNREQUESTED: "Unrequested capacity (shared)",
              QUOTA: "Kueue quota", LENT: "Quota lent, credited"}
RESOURCE_NAMES = Derived(lambda: {
    **{name: resource.word[0].upper() + resource.word[1:] for name, resource in REGISTRY.items()},
    **{kind + name: f"{KIND_NAMES[kind]}, {resource.word}" for kind in KINDS for name, resource in REGISTRY.items()},
})

# Two different things, two different words, each with the sentence that explains it wherever it is shown.
UNREQUESTED_SHARE = "Unrequested capacity (shared)"
UNREQUESTED_SHARE_RULE = (
    "capacity that no pod requested on a cluster configured with unrequested: share, charged to the namespaces that paid for the "
    "cluster that day in proportion to what each paid there; it is billed on top of what pods requested"
)
KUEUE_QUOTAS = "Kueue quotas"
KUEUE_QUOTAS_RULE = (
    "each ClusterQueue's nominal quota is charged to its team whether used or not; its namespaces' use within the "
    "quota is credited back (covered by the quota), use above it was borrowed from the cohort and is paid at the "
    "normal price to the queues that lent it, whose teams are credited what they lent; borrowing beyond what the "
    "cohort could lend is paid at the normal price too, and nobody is credited for it; in resource-hours"
)
BORROWED_BEYOND = "Borrowed beyond what the cohort could lend"
HELD_UNUSED = "Held but unused"
HELD_UNUSED_RULE = (
    "GPUs that pods requested but left nearly unused (DCGM utilisation below the configured threshold) and CPU "
    "requested beyond what was used (cAdvisor); measured, not an extra charge: it is part of the cost above"
)
HELD_BEFORE_RUNNING = "Held before running"
HELD_BEFORE_RUNNING_RULE = (
    "what pods bound to a node held while they did not run yet (image pulls, init containers, ImagePullBackOff): "
    "the scheduler kept it from everyone else all along; charged as running where the cluster says bound_pending: "
    "charge (then part of the cost above), else shown at what it would cost"
)
# Kubernetes' reasons a bound pod was not Running yet, in words a reader of a bill follows; others are split where a
# capital starts a word ("SomeNewReason": "some new reason"), and '' (no reason exported) is "not known"
HELD_REASONS = {
    "InitContainersRunning": "init containers running",
    "PodInitializing": "init containers done, starting",
    "ContainerCreating": "creating containers",
    "ErrImagePull": "image pull failed",
    "ImagePullBackOff": "image pull failing, retrying",
    "ErrImageNeverPull": "image not on the node",
    "InvalidImageName": "invalid image name",
    "CreateContainerConfigError": "container config missing",
    "CreateContainerError": "container could not be created",
    "CrashLoopBackOff": "crashing, restarting",
}
REASON_NOT_KNOWN = "not known"
HELD_CHARGED = {  # said once above a held-before-running table whose rows were all charged, or all only shown
    True: "All of it was charged as running (bound_pending: charge): it is part of the cost above.",
    False: "None of it was charged (bound_pending: show): the costs are what it would have cost.",
}
ROUNDING = "Rounding"  # the row of a table that makes its rounded rows add up to its rounded total
ROUNDING_NOTE = (
    "Each amount is its exact sum rounded once to the cent, the same wherever it is shown; a Rounding row is "
    "what a table's rounded rows differ from its rounded total."
)
COST_RECOVERY = "Cost recovery"
COST_RECOVERY_RULE = (
    "what the cluster cost in the month less what it charged at its prices, shared over the teams in proportion "
    "to what each was charged there, so that the month's charges add up to the cost; booked when the month is closed"
)
# Rows of namespaces that are no one person's, wherever costs are listed by person
TEAM_NAMESPACES = "(team namespaces)"
TEAM_NAMESPACES_RULE = "namespaces that are no one person's: a team's own namespaces and its reserved pools"
# The part of a namespace's cost that no pod's workload requested (charge/workloads.py keeps it under this name)
NO_WORKLOAD_RULE = (
    "what no pod requested: unrequested capacity (shared), reserved pools and their credits, and namespaces of "
    "clusters whose workloads are not collected"
)

_CENT = Decimal("0.01")


def resource_name(resource: str) -> str:
    """A ledger resource, or a closed month's cost recovery (statements, reports), as people read it."""
    return COST_RECOVERY if resource == RECOVERY else RESOURCE_NAMES.get(resource, resource)


def price_change_note(cluster: str, day: date) -> str:
    """Where a range shown holds a day on which a cluster's next price set came into force."""
    return f"the prices of cluster {cluster} changed on {day}: hours before and after it are priced differently"


def exact(value: float) -> Decimal:
    """A ledger value as a decimal to the billionth, as sums count it: 15.315, not 15.3149999…, and a row shown on
    its own rounds as its total does."""
    return Decimal(in_billionths(float(value))) / BILLIONTHS


def cents(value: float) -> Decimal:
    """The value rounded half away from zero to two decimals; -0.00 becomes 0.00."""
    return exact(value).quantize(_CENT, rounding=ROUND_HALF_UP) + 0


def total(values: Iterable[float]) -> float:
    """The sum of ledger values as the database sums them (ledger.read.money_sum): each to the billionth, then
    exactly, so that 15.3 + 0.015 is 15.315 and rounds to 15.32, on a page as in `billing report`."""
    return sum(map(in_billionths, values)) / BILLIONTHS


def money_sums(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    """Per `keys` (sorted), the sums of `columns` as `total` sums them: a group's figure is the same on a page, in
    an email and in `billing report`, which sums in the database."""
    import numpy as np  # the frame brought pandas, and numpy with it

    # each value in whole billionths as in_billionths takes it, a column at once
    scaled = frame[keys].assign(**{column: (np.sign(frame[column]) * np.floor(np.abs(frame[column]) * BILLIONTHS + 0.5))
                                   .astype("int64") for column in columns})
    sums = scaled.groupby(keys, as_index=False, dropna=False, sort=True)[columns].sum()
    return sums.assign(**{column: sums[column] / BILLIONTHS for column in columns})


def rounding(values: Iterable[float], of: float | None = None) -> Decimal:
    """What a table's rows, each rounded on its own, miss of its total `of` (default: their exact sum) rounded:
    the amount of the table's Rounding row, where it is not 0.00."""
    values = list(values)
    return cents(total(values) if of is None else of) - sum((cents(v) for v in values), Decimal(0))


def to_the_cent(values: list[float], of: float | None = None) -> list[Decimal]:
    """The values rounded to the cent so that they add up to their total `of` (default: their exact sum)
    as it is shown, rounded (largest remainder): each is rounded, then the cents still missing (or too
    many) go to the values that rounding moved furthest from their exact value, ties to the earlier row."""
    exacts = [exact(v) for v in values]
    rounded = [cents(v) for v in values]
    missing = int(rounding(values, of) / _CENT)
    step = _CENT if missing > 0 else -_CENT
    remainders = sorted(range(len(values)), key=lambda i: (-(exacts[i] - rounded[i]) * step, i))
    for i in remainders[: abs(missing)]:
        rounded[i] += step
    return rounded


def plain_number(value: float) -> str:
    """A number for a machine (CSV) without float noise: 12 significant digits, but never less than the billionth
    that sums count (`exact`), so that the rows of a CSV sum to the total a table shows; no exponent, no trailing
    zeros (67.85000000000001 -> 67.85, 1000.004999996 stays, and so does 0.000123456789)."""
    significant = Decimal(f"{float(value):.12g}")
    number = significant if -significant.as_tuple().exponent >= 9 else exact(value)  # type: ignore[operator]
    text = format(number + 0, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def person(uid: str, people: dict[str, str]) -> str:
    """A person as readers know them: `Alice Example (alice)`; the uid alone where the directory has no name."""
    name = people.get(uid, "")
    return f"{name} ({uid})" if name and name != uid else uid


def money(value: float, currency: str, signed: bool = False) -> str:
    """`1,234.56 USD`; with signed=True a change: `+12.30 USD`, `-4.00 USD`."""
    amount = cents(value)
    sign = "+" if signed and amount > 0 else ""
    return f"{sign}{amount:,.2f} {currency}"


def quantity(value: float, resource: str) -> str:
    """`24.00 GPU-h`, `1,536.25 core-h`, `12.00 GiB-h` for a ledger resource."""
    return f"{cents(value):,.2f} {UNITS[resource]}"


def held_reason(reason: str) -> str:
    """Why a pod held resources before it ran, in words (HELD_REASONS), never a bare dash."""
    if not reason:
        return REASON_NOT_KNOWN
    return HELD_REASONS.get(reason) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", reason).lower()


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
