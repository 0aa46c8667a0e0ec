"""The frames handed from one stage to the next: each declared once here, and checked where it crosses.

A frame's columns are the interface between two stages (collect → charge,
charge → ledger): the receiver checks the frame against its schema, so a
renamed or missing column fails at the border with a sentence naming both
sides, not as a KeyError deep inside, or as a silently empty merge. Where a
ledger table stores a frame, tests/ledger/test_tables.py holds the table's
columns to the schema's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a frame is made: `billing report` reads plain rows (issue 45)
    import pandas as pd

# the longest name a Kubernetes object can have (a DNS subdomain): the most a ledger's name column holds
LONGEST_NAME = 253


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    """`frame` itself, once it has every one of `columns`; a ValueError (a bug, never bad input) if not."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {', '.join(missing)}; it has {', '.join(map(str, frame.columns))}")
    return frame


@dataclass(frozen=True)
class FrameSchema:
    """The columns of one kind of frame, in the order its producer writes them."""

    name: str
    names: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        """The column names as a list, as pandas wants them for selecting."""
        return list(self.names)

    def check(self, frame: pd.DataFrame, what: str = "") -> pd.DataFrame:
        """`frame` itself, once it has every column of the schema (a ValueError naming both sides if not)."""
        return require_columns(frame, self.names, what or self.name)

    def empty(self) -> pd.DataFrame:
        """A frame of this kind without rows."""
        import pandas as pd

        return pd.DataFrame(columns=self.columns)


def schema(name: str, *columns: str) -> FrameSchema:
    return FrameSchema(name, columns)


WASTE_MEASURES = ("idle_gpu_hours", "unused_cpu_core_hours", "unused_storage_gib_hours")  # NaN where a cluster does not measure them

# --- collect → charge: one cluster-day, per namespace (the job adds `cluster` where it joins clusters)

# resource-hours; resource is cpu, memory or gpu; priority_class from kube_pod_info; pool: the reserved pool
# of the pod's node, '' for none
USAGE = schema("usage", "namespace", "resource", "gpu_model", "priority_class", "pool", "quantity")
# the same below the namespace: per workload (Kind/name) and cost labels (a JSON object of every cost label)
WORKLOAD_USAGE = schema("workload usage", "namespace", "workload", "labels", "resource", "gpu_model",
                        "priority_class", "pool", "quantity")
# the workload of a part of a row that no pod's workload requested or held (a pool's, a share of unrequested capacity,
# a claim no pod mounts); no Kubernetes name looks like it
UNATTRIBUTED = "(no workload)"
# what pods bound to a node held while Pending (docs/spec.md "Rule 2: running"), as the usage, per workload ('' where
# workloads are off) and reason: why the pod was not Running yet ('' where the store does not say)
BOUND_PENDING = schema("bound Pending usage", "namespace", "workload", "resource", "gpu_model", "priority_class", "pool",
                       "reason", "quantity")
# what the usage's `gpu` rows held: resource as kube-state-metrics names it (nvidia_com_mig_1g_10gb),
# held_hours in its own units (slice-hours, replica-hours), gpu_hours the physical GPU-hours billed for them
GPU_HELD = schema("GPU holdings", "namespace", "resource", "gpu_model", "held_hours", "gpu_hours")
# resource-hours the nodes offered, per GPU model and reserved pool ('' for the rest)
ALLOCATABLE = schema("allocatable capacity", "resource", "gpu_model", "pool", "allocatable")
# per pod and hour of the day (`hour`: its last instant, unix seconds), from usage to waste: the instants at which the pod
# was Running and its CPU request over the chunk by docs/spec.md rule 3 (NaN without one)
POD_HOURS = schema("Running pod-hours", "uid", "namespace", "pod", "hour", "instants", "cpu")
# what each namespace held but did not use
WASTE = schema("waste", "namespace", *WASTE_MEASURES)
# persistent volumes per storage class, in GiB-hours (docs/spec.md "Storage"): the capacity of every volume, what the
# bound claims were billed, and the volumes Released or Available; shown, never billed
STORAGE_CLASSES = schema("storage per class", "storageclass", "provisioned", "claimed", "unclaimed")
WORKLOAD_WASTE = schema("waste per workload", "namespace", "workload", *WASTE_MEASURES)
# kWh per namespace of its GPUs and of its CPU and memory (docs/spec.md "Energy and carbon"); namespace '' is the
# cluster's unattributed energy; NaN where the family had no sample on the day (unknown, never 0)
ENERGY = schema("energy per namespace", "namespace", "gpu_kwh", "cpu_kwh")

# --- charge → ledger: the day's frames of every cluster, as the ledger tables store them (less day and currency)

# who pays for a namespace, and which share (a person on k teams: 1/k each)
OWNERSHIP = schema("ownership", "namespace", "team", "owner", "share")
# the chargeback rows
ROWS = schema("ledger rows", "cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity",
              "unit_price", "cost", "list_cost")
CAPACITY = schema("capacity", "cluster", "resource", "gpu_model", "pool", "allocatable", "requested",
                  "unrequested", "unit_price", "unrequested_cost")
# persistent volumes per cluster and storage class (STORAGE_CLASSES), and what the unclaimed would cost at the class's
# price: shown like unrequested capacity, never billed
STORAGE_CAPACITY = schema("storage capacity", "cluster", "storageclass", "provisioned", "claimed", "unclaimed",
                          "unit_price", "unclaimed_cost")
CHARGED_WASTE = schema("waste per team", "cluster", "namespace", "team", "owner", *WASTE_MEASURES)
HOLDINGS = schema("GPU holdings per team", "cluster", "namespace", "team", "owner", "resource", "gpu_model",
                  "held_hours", "gpu_hours", "cost")
# what pods bound to a node held while Pending, priced as the rows, per workload as BOUND_PENDING has it; charged:
# whether the rows include it
BOUND_PENDING_COSTS = schema("bound Pending costs", "cluster", "namespace", "team", "owner", "workload", "resource",
                             "gpu_model", "reason", "quantity", "unit_price", "cost", "list_cost", "charged")
# what the rows of Kueue queues' namespaces include of borrowing that no team lent (shown, not charged again)
# a night's use of each allocation (billing/allocations.py) per team and cluster: in its unit (SU or money) and in money
ALLOCATION_USE = schema("allocation use", "account", "starts", "team", "cluster", "used", "used_cost")
UNLENT = schema("borrowing no team lent", "cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity",
                "cost")
WORKLOAD_COSTS = schema("workload costs", "cluster", "namespace", "team", "owner", "workload", "labels", "resource",
                        "gpu_model", "quantity", "cost", "list_cost")
# ENERGY per cluster and team, split as the rows are, with its grams of CO2e (NaN without an intensity); namespace and
# team '' are the cluster's unattributed energy; shared_kwh and its carbon: the namespace's share of the unattributed
# where its cluster shares it, minus what was shared on the unattributed row (billing/charge/energy.py), else 0
CHARGED_ENERGY = schema("energy per team", "cluster", "namespace", "team", "gpu_kwh", "cpu_kwh", "carbon_g", "shared_kwh",
                        "shared_carbon_g")
CHARGED_WORKLOAD_WASTE = schema("waste per workload and team", "cluster", "namespace", "team", "owner", "workload",
                                *WASTE_MEASURES)
