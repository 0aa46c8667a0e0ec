"""The ledger's resources: one spelling for the modules that price, show, export and count them.

Usage is billed in three resources: `cpu` (cores), `memory` (GiB) and `gpu`
(devices). billing/charge/pricing.py adds rows whose resource is one of them behind
a kind prefix: `reserved-` (a reserved pool's whole capacity, charged to the
team that reserved it under the namespace `pool:<name>`), `credit-` (negative:
what a namespace paid for using a reserved pool, credited to the pool's team)
and `idle-` (a share of the idle capacity of a cluster with `idle: share`).
"""

from __future__ import annotations

CPU, MEMORY, GPU = "cpu", "memory", "gpu"
RESOURCES = (CPU, MEMORY, GPU)

RESERVED, CREDIT, IDLE = "reserved-", "credit-", "idle-"
KINDS = (RESERVED, CREDIT, IDLE)
LEDGER_RESOURCES = RESOURCES + tuple(kind + resource for kind in KINDS for resource in RESOURCES)

POOL_PREFIX = "pool:"  # namespace of a reserved pool's capacity rows; no Kubernetes namespace has a colon


def base(resource: str) -> str:
    """cpu, memory or gpu, of any of the ledger's resources (`idle-gpu`, `credit-cpu`, ...)."""
    return resource.rsplit("-", 1)[-1]


_HOUR_UNITS = {GPU: "GPU-h", CPU: "core-h", MEMORY: "GiB-h"}
UNITS = {resource: _HOUR_UNITS[base(resource)] for resource in LEDGER_RESOURCES}  # a resource-hour, for people
