"""The ledger's resources: one spelling for the modules that price, show, export and count them.

Usage is billed in the resources of REGISTRY: `cpu` (cores), `memory` (GiB), `gpu`
(devices), `storage` (GiB of persistent volumes, per storage class) and `energy` (kWh, where a cluster prices it).
billing/charge/pricing.py adds rows whose resource is one that nodes offer
behind a kind prefix: `reserved-` (a reserved pool's whole capacity, charged to the
team that reserved it under the namespace `pool:<name>`), `credit-` (negative:
what a namespace paid for using a reserved pool, credited to the pool's team)
and `unrequested-` (a share of the capacity no pod requested on a cluster with
`unrequested: share`). Kueue quotas (docs/spec.md "Kueue quotas") add `quota-`
(a ClusterQueue's nominal quota, charged to its team under the namespace
`quota:<queue>`) and `lent-` (negative: the borrowed part of a namespace's use,
credited to the team of the queue that lent it); use within a quota is a
`credit-` row as a pool's. A cluster that prices energy and shares its
unattributed energy (`energy.share_unattributed`) adds `unattributed-energy`:
a namespace's share of the kWh no pod accounts for (docs/spec.md "Energy and
carbon").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Resource:
    """One billed resource, declared once: every output (report, pages, emails, statement, FOCUS, serve and
    the MCP tools' descriptions) reads its words and columns from here, so a new resource is one entry."""

    name: str  # the ledger's resource: `gpu`
    word: str  # for people, inside a sentence: `GPU`, `memory`
    unit: str  # a resource-hour, short: `GPU-h`
    hours: str  # its unit in words: `GPU-hours`
    hours_column: str  # a report's (table, CSV, JSON) column of its resource-hours: `gpu_hours`
    price_key: str  # the key of its price per resource-hour in a cluster's `prices`: `gpu_hour`
    focus_unit: str  # FOCUS PricingUnit and ConsumedUnit: `GPU-Hours`
    focus_meter: str  # FOCUS SkuMeter, what is metered: `GPU-hours`
    offered_by_nodes: bool  # in nodes' allocatable, so capacity, reserved pools and unrequested shares apply
    collector: str  # the families whose series give its hours, and where they are read
    # the key of its prices per model (the ledger's gpu_model column) in a cluster's `prices`, where it has one:
    # `gpu_models`; a model without its own price pays price_key's, and none where that is unset refuses the day
    models_key: str = ""
    model_word: str = "model"  # what its model column names, after its word for people: `GPU model`, `storage class`
    # FOCUS ServiceCategory, ServiceSubcategory (one of the category's allowed values) and ServiceName: a
    # ServiceName has one category, so each category has its own
    focus_category: str = "Compute"
    focus_subcategory: str = "Containers"
    focus_service: str = "Kubernetes"


REGISTRY: dict[str, Resource] = {resource.name: resource for resource in (
    Resource("gpu", "GPU", "GPU-h", "GPU-hours", "gpu_hours", "gpu_hour", "GPU-Hours", "GPU-hours", True,
             "kube_pod_container_resource_requests (the resources gpu_resources lists) or DCGM's DRA series",
             models_key="gpu_models"),
    Resource("cpu", "CPU", "core-h", "core-hours", "cpu_core_hours", "cpu_core_hour", "Core-Hours",
             "CPU core-hours", True, "kube_pod_container_resource_requests{resource=\"cpu\"}"),
    Resource("memory", "memory", "GiB-h", "GiB-hours", "memory_gib_hours", "memory_gib_hour", "GiB-Hours",
             "memory GiB-hours", True, "kube_pod_container_resource_requests{resource=\"memory\"}"),
    # persistent volumes' GiB-hours, the storage class as the model (docs/spec.md's storage rule); no node offers them.
    # FOCUS: a class may be block (RBD, local NVMe) or file storage (NFS, CephFS), which billing cannot tell
    Resource("storage", "storage", "GiB-h", "GiB-hours", "storage_gib_hours", "storage_gib_hour", "GiB-Hours",
             "storage GiB-hours", False, "kube_persistentvolumeclaim_info, _status_phase and "
             "kube_persistentvolume_capacity_bytes (billing/collect/storage.py)", models_key="storage_classes",
             model_word="class",
             focus_category="Storage", focus_subcategory="Other (Storage)", focus_service="Kubernetes persistent volumes"),
    # kWh of GPUs, CPU and memory per namespace (docs/spec.md "Energy and carbon"), billed where a cluster's
    # energy.price_kwh is set, else shown only; no node offers it
    Resource("energy", "energy", "kWh", "kWh", "energy_kwh", "energy_kwh", "Kilowatt-Hours", "energy kWh", False,
             "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, kepler_pod_cpu_joules_total and kepler_node_cpu_joules_total "
             "(billing/collect/energy.py)", focus_subcategory="Other (Compute)", focus_service="Kubernetes energy"),
)}
CPU, MEMORY, GPU, STORAGE, ENERGY = "cpu", "memory", "gpu", "storage", "energy"  # those collectors and pricing name


class Names(Sequence[str]):
    """Names derived from REGISTRY, read at each use, so that a resource registered after import is in them."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        self._names = names

    def __getitem__(self, index):  # type: ignore[override]
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


class Derived(Mapping[str, str]):
    """A mapping derived from REGISTRY (per resource name, one of its words), read at each use like Names."""

    def __init__(self, items: Callable[[], dict[str, str]]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> str:
        return self._items()[key]

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())


def per_resource(field: str) -> Derived:
    """Resource name -> one field of its Resource (`unit`, `hours_column`, ...), in REGISTRY's order."""
    return Derived(lambda: {name: getattr(resource, field) for name, resource in REGISTRY.items()})


RESOURCES = Names(lambda: list(REGISTRY))


def registered(keyed: dict[str, T]) -> dict[str, T]:
    """A config mapping keyed by resource name (service units' weights, the journal's object codes), or ValueError
    naming the first key no resource of REGISTRY has."""
    unknown = sorted(set(keyed) - set(REGISTRY))
    if unknown:
        raise ValueError(f"{unknown[0]!r} is no billed resource (expected one of {', '.join(REGISTRY)})")
    return keyed

RESERVED, CREDIT, UNREQUESTED, QUOTA, LENT = "reserved-", "credit-", "unrequested-", "quota-", "lent-"
KINDS = (RESERVED, CREDIT, UNREQUESTED, QUOTA, LENT)
OFFERED = Names(lambda: [name for name, resource in REGISTRY.items() if resource.offered_by_nodes])
# the kinds are of capacity (pools, quotas, what no pod requested): only a resource nodes offer has them
# a share of the energy no pod accounts for (idle power), on a cluster that shares it: a kind of energy alone, which
# no node offers
UNATTRIBUTED = "unattributed-"
UNATTRIBUTED_ENERGY = UNATTRIBUTED + ENERGY
LEDGER_RESOURCES = Names(lambda: [*REGISTRY, *(kind + resource for kind in KINDS for resource in OFFERED),
                                  UNATTRIBUTED_ENERGY])
UNREQUESTED_RESOURCES = Names(lambda: [UNREQUESTED + resource for resource in OFFERED])

RECOVERY = "recovery"  # statement_lines.kind of a cost recovery line; corrections.resource of one split again
# statement_lines.kind of a subsidy and a monthly credit (docs/spec.md "Service units, credits and subsidies")
SUBSIDY, MONTHLY_CREDIT = "subsidy", "monthly-credit"
# statement_lines.kind of what a prepaid allocation paid, and of use beyond it not charged (docs/spec.md "Allocations")
ALLOCATION_DRAWN, OVERAGE_NOT_CHARGED = "allocation", "overage"
# the lines a close books on a team's whole month
MONTH_LINES = (RECOVERY, SUBSIDY, MONTHLY_CREDIT, ALLOCATION_DRAWN, OVERAGE_NOT_CHARGED)

POOL_PREFIX = "pool:"  # namespace of a reserved pool's capacity rows; no Kubernetes namespace has a colon
QUOTA_PREFIX = "quota:"  # namespace of a Kueue ClusterQueue's quota rows


def base(resource: str) -> str:
    """The registered resource of any of the ledger's resources (`unrequested-gpu`, `credit-cpu`, ...)."""
    return resource.rsplit("-", 1)[-1]


def hours_columns() -> str:
    """Each report column of resource-hours with its unit, for the MCP tools' descriptions: `gpu_hours in GPU-hours, ...`."""
    return ", ".join(f"{resource.hours_column} in {resource.hours}" for resource in REGISTRY.values())


UNITS = Derived(lambda: {resource: REGISTRY[base(resource)].unit for resource in LEDGER_RESOURCES})  # for people


# --- MIG slices (docs/spec.md "GPU sharing")

MIG_RESOURCE_PREFIX = "nvidia_com_mig_"  # kube-state-metrics' names of MIG profiles: nvidia_com_mig_1g_10gb
# In MIG's single strategy the device plugin sells slices as nvidia.com/gpu and GPU feature discovery's product
# label names the slice: NVIDIA-A100-SXM4-40GB-MIG-1g.5gb (media extensions: 1g.10gb+me)
_SINGLE_STRATEGY = re.compile(r"(?P<gpu>.+)-MIG-(?P<profile>(?P<slices>\d+)g\.\d+gb(\+\w+)*)")
# compute slices of one GPU in MIG mode, where NVIDIA's MIG user guide ("Supported GPUs") gives other than 7
_FEWER_SLICES = ((re.compile(r"\bA30\b", re.I), 4), (re.compile(r"\bRTX[-\s]PRO[-\s]6000\b", re.I), 4),
                 (re.compile(r"\bRTX[-\s]PRO[-\s](5000|4500)\b", re.I), 2))
MIG_SLICES = 7


def slice_fraction(profile: str, gpu: str) -> float:
    """Physical GPUs one GPU instance of a MIG profile (`1g.5gb`) stands for on a GPU named `gpu`: its compute
    slices over the GPU's (1g on an A100 is 1/7, on an A30 1/4); 1 for a name that is no MIG profile."""
    slices = re.match(r"(\d+)g\.", profile)
    if slices is None:
        return 1.0
    whole = next((count for name, count in _FEWER_SLICES if name.search(gpu)), MIG_SLICES)
    return min(int(slices.group(1)), whole) / whole


def single_strategy_slice(gpu_model: str) -> tuple[str, str, float] | None:
    """(whole GPU's model, MIG profile, physical GPUs per slice) of a GPU model that names a slice sold as a
    whole GPU (MIG's single strategy); None for any other model."""
    named = _SINGLE_STRATEGY.fullmatch(gpu_model)
    if named is None:
        return None
    return named["gpu"], named["profile"], slice_fraction(named["profile"], named["gpu"])


def mig_resource(profile: str) -> str:
    """kube-state-metrics' resource name of a MIG profile in the mixed strategy: 1g.10gb -> nvidia_com_mig_1g_10gb."""
    return MIG_RESOURCE_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", profile)
