"""Capacity a team holds whether or not its pods use it: reserved node pools and Kueue ClusterQueues' quotas."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from billing.config.section import Section


class ReservedPools(Section):
    """Node groups dedicated to a team: it pays their whole capacity, others' use of them is credited to it."""

    node_label: Annotated[str, Field(min_length=1)]  # kube_node_labels label naming a node's pool
    teams: dict[str, str]  # pool (the label's value) -> the team that reserved it


class KueueQueue(Section):
    """A Kueue ClusterQueue: the team that owns its quota and the namespaces whose LocalQueues point at it (Kueue's
    metrics do not say which, docs/spec.md "Kueue quotas")."""

    team: Annotated[str, Field(min_length=1)]
    namespaces: list[Annotated[str, Field(min_length=1)]] = []


class Kueue(Section):
    """Kueue ClusterQueues whose nominal quotas are billed as reserved capacity (docs/spec.md "Kueue quotas")."""

    queues: dict[str, KueueQueue]  # ClusterQueue name -> its team and namespaces
    # ResourceFlavor name -> the GPU model its nodeLabels select (its price in prices.gpu_models)
    flavors: dict[str, Annotated[str, Field(min_length=1)]] = {}

    @field_validator("queues")
    @classmethod
    def _some_queue(cls, queues: dict[str, KueueQueue]) -> dict[str, KueueQueue]:
        if not queues:
            raise ValueError("lists no ClusterQueue, so no quota would be billed: list the queues and their teams, "
                             "or remove kueue")
        return queues

    def queue_of(self) -> dict[str, str]:
        """namespace -> its ClusterQueue; a namespace listed under two belongs to the first in name order."""
        owned: dict[str, str] = {}
        for queue in sorted(self.queues):
            for namespace in self.queues[queue].namespaces:
                owned.setdefault(namespace, queue)
        return owned

