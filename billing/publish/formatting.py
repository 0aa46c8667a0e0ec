"""How resource-hours and the ledger's words are written for people: pages, emails, tables.

Amounts, their rounding and how they are written are billing/money.py's (docs/spec.md "Rounding: one figure
everywhere"); resource-hours are written to the cent as amounts are.
"""

from __future__ import annotations

import re
from datetime import date

from billing.money import cents
from billing.resources import (
    CREDIT,
    KINDS,
    LENT,
    MIG_RESOURCE_PREFIX,
    OFFERED,
    QUOTA,
    RECOVERY,
    REGISTRY,
    RESERVED,
    UNATTRIBUTED_ENERGY,
    UNITS,
    UNREQUESTED,
    Derived,
)

# what each kind of ledger row is, for people, before its resource's word: `Reserved pool, GPU`
KIND_NAMES = {RESERVED: "Reserved pool", CREDIT: "Pool or quota use credited", UNREQUESTED: "Unrequested capacity (shared)",
              QUOTA: "Kueue quota", LENT: "Quota lent, credited"}
RESOURCE_NAMES = Derived(lambda: {
    **{name: resource.word[0].upper() + resource.word[1:] for name, resource in REGISTRY.items()},
    **{kind + name: f"{KIND_NAMES[kind]}, {REGISTRY[name].word}" for kind in KINDS for name in OFFERED},
    UNATTRIBUTED_ENERGY: "Unattributed energy (shared)",
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
    "GPUs that pods requested but left nearly unused (DCGM utilisation below the configured threshold), CPU "
    "requested beyond what was used (cAdvisor) and mounted claims' storage their filesystems did not use (kubelet); "
    "measured, not an extra charge: it is part of the cost above"
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
    "what no pod requested: unrequested capacity (shared), reserved pools and their credits, storage no pod mounts, "
    "and namespaces of clusters whose workloads are not collected"
)


def resource_name(resource: str) -> str:
    """A ledger resource, or a closed month's cost recovery (statements, reports), as people read it."""
    return COST_RECOVERY if resource == RECOVERY else RESOURCE_NAMES.get(resource, resource)


def price_change_note(cluster: str, day: date) -> str:
    """Where a range shown holds a day on which a cluster's next price set came into force."""
    return f"the prices of cluster {cluster} changed on {day}: hours before and after it are priced differently"


def person(uid: str, people: dict[str, str]) -> str:
    """A person as readers know them: `Alice Example (alice)`; the uid alone where the directory has no name."""
    name = people.get(uid, "")
    return f"{name} ({uid})" if name and name != uid else uid


def quantity(value: float, resource: str) -> str:
    """`24.00 GPU-h`, `1,536.25 core-h`, `12.00 GiB-h` for a ledger resource."""
    return f"{cents(value):,.2f} {UNITS[resource]}"


def month_lines(figures: object) -> str:
    """What a closed month's month to date holds beyond the ledger's rows, for its label: `with cost recovery`,
    `with credits and subsidies`, both, or '' (figures: a day's, a team's or a range's, with `recovery` and
    `credited`)."""
    parts = [*(["cost recovery"] if getattr(figures, "recovery", 0) else []),
             *(["credits and subsidies"] if getattr(figures, "credited", 0) else [])]
    return "with " + " and ".join(parts) if parts else ""


def su_text(value: float | None) -> str:
    """Service units for people, `11,234.56`, to the hundredth as Slurm's sreport shows billing; '' for none."""
    return "" if value is None else f"{cents(value):,.2f}"


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
