"""Cluster capacity: what the nodes offered (what no request covered is priced by billing/charge/pricing.py).

Billing charges what pods *requested*; operators also need what they did
not: allocatable resource-hours of the nodes (`kube_node_status_allocatable`)
on the same step-aligned instants as the billing arithmetic (docs/spec.md "Rule 1: sampling instants"),
so that per cluster-day and resource

    requested + unrequested = allocatable

where requested is the collected usage. A node's GPUs carry the model of its
newest label set at each instant, as the pods' GPU-hours do (docs/spec.md "Rule 5: GPU model").
The queries are chunked like collect.py's and reuse promql.py's selector building.
"""

from __future__ import annotations

import logging

import pandas as pd

from billing.collect.asking import NodeKinds, map_chunks
from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.figures import ALLOCATABLE, NODES, figure
from billing.collect.prometheus import PrometheusError, PrometheusSource
from billing.collect.promql import GPU_UTILISATION, WHOLE_GPU, Queries, node_matcher, one_of, quote
from billing.collect.usage import HIGHEST_QUANTITY, billing_units
from billing.config import DRA_GPU, ClusterConfig

log = logging.getLogger(__name__)

KEYS = ["resource", "gpu_model", "pool"]  # pool: the reserved pool of the nodes, '' for the rest


class CapacityQueries(Queries):
    def allocatable_series(self, nodes: str = "", resources: str = "") -> str:
        """Allocatable of the billed resources (or of `resources`, a regular expression)."""
        return self.series("kube_node_status_allocatable", f"resource=~{quote(resources or self.resources)}", nodes)

    def copies(self) -> str:
        """How many nodes' allocatable came from several exporters in the chunk (kube-state-metrics replaced,
        an HA pair, a reshard): those copies must be merged at each instant."""
        seen = self.ksm.plain(f"max_over_time({self.allocatable_series()}[{self.raw}])", ("node",))
        return f"count(count by (node, resource) ({seen}) > 1)"

    def allocatable(self, relabelled: list[str], copies: bool = False) -> str:
        """Per node and resource: allocatable summed over the chunk's instants, a subquery of the bare
        series (cheap: no operator inside) where each node has one exporter; with `copies` the copies are
        merged at every instant first (`max by` inside), so that a node counts once per instant whatever
        exporter reports it. Relabelled nodes also per GPU model and pool, read at every instant (costly,
        so only for them); the caller maps the other nodes to their one kind. Where dcgm-exporter attributes GPUs
        held through DRA, also the GPUs offered that way (`offered_through_dra`)."""
        # `max by` drops the scrape's labels, so replicas of kube-state-metrics are not counted twice
        ksm = self.ksm
        moved = node_matcher(relabelled, ksm.node)
        moved_nodes = f"max by (node, resource) ({ksm.plain(self.latest(self.allocatable_series(moved)))})"
        staying = self.latest(self.allocatable_series(node_matcher(relabelled, ksm.node, keep=False)))
        if copies:
            staying = f"max by (node, resource) ({ksm.plain(staying, ('node',))})"
        dra = f"\n  or\n    {self.offered_through_dra()}" if self.dra else ""
        return f"""
    max by (node, resource) (
        {ksm.plain(f"sum_over_time({staying}[{self.instants}:{self.step}])", ("node",))}
    )
  or
    sum_over_time((
        sum by (node, resource, {self.node_keys}) (
            {moved_nodes}
          * on (node) group_left ({self.node_keys}) {self.newest_model(moved_nodes, moved)}
        )
    )[{self.instants}:{self.step}]){dra}"""

    def offered_through_dra(self) -> str:
        """Per node, as resource DRA_GPU: its GPUs offered through DRA (docs/spec.md "GPUs through DRA") summed
        over the chunk's instants. They are in no allocatable series: at each instant, the GPUs (UUIDs)
        dcgm-exporter reports on a node (its Hostname) that offers no GPU resource as allocatable then, held
        or not."""
        reported = self.dcgm.plain(self.latest(self.series(GPU_UTILISATION, WHOLE_GPU)), ())
        gpus = f'count by (node) (group by (node, UUID) (label_replace({reported}, "node", "$1", "Hostname", "(.+)")))'
        devices = one_of([resource for resource in self.fractions if resource != DRA_GPU])
        offering = self.ksm.plain(self.latest(self.allocatable_series(resources=devices)), ("node",))
        per_instant = f"{gpus} unless on (node) (max by (node) ({offering}) > 0)"
        return f'label_replace(sum_over_time(({per_instant})[{self.instants}:{self.step}]), "resource", "{DRA_GPU}", "", "")'


def _chunk_allocatable(source: PrometheusSource, queries: CapacityQueries, chunk: Chunk, cluster: str) -> list[tuple]:
    nodes = NodeKinds(source, queries, chunk.last)
    copies = any(figure(series["value"][1], NODES, series["metric"], cluster)
                 for series in source.instant(queries.copies(), chunk.last))
    answer = source.instant(queries.allocatable(nodes.relabelled, copies), chunk.last)
    rows = []
    for series in answer:
        labels = series["metric"]
        model, pool, gpus_per_unit = nodes.priced(labels)
        resource = labels.get("resource", "")
        # summed over the chunk's instants
        offered = figure(series["value"][1], ALLOCATABLE, labels, cluster, (chunk.end - chunk.start) / chunk.step)
        rows.append((resource, model, pool, offered * gpus_per_unit * chunk.step / 3600))
    return rows


def bills_capacity(cluster: ClusterConfig) -> bool:
    """Whether the cluster's bill needs its allocatable capacity: a reserved pool's, a Kueue quota's cluster or shared
    unrequested capacity. Elsewhere capacity is only shown, and an impossible allocatable figure leaves it unknown
    rather than refusing the day (docs/spec.md "Figures from the store")."""
    return cluster.reserved_pools is not None or cluster.kueue is not None or cluster.unrequested == "share"


def collect_allocatable(context: ClusterDay) -> pd.DataFrame:
    """Allocatable resource-hours of one cluster-day per resource, GPU model and pool (frames.ALLOCATABLE.columns)."""
    cluster, gpu_resources = context.cluster, context.gpu_resources
    rows = map_chunks(lambda c: _chunk_allocatable(context.source, CapacityQueries(cluster, gpu_resources, c,
                                                                                   context.store), c, cluster.name),
                      context.chunks())
    raw = pd.DataFrame([r for chunk_rows in rows for r in chunk_rows], columns=[*KEYS, "quantity"])
    frame = billing_units(raw.astype({"quantity": float}), gpu_resources)
    summed = frame.groupby(KEYS, as_index=False, sort=True)[["quantity"]].sum()
    huge = summed[summed["quantity"] > HIGHEST_QUANTITY]
    if len(huge):  # priced as unrequested capacity, more money than reports can show
        raise PrometheusError(f"Prometheus of cluster {cluster.name} returned an impossible allocatable "
                              f"{huge['resource'].iloc[0]} ({huge['quantity'].iloc[0]} resource-hours in the day, "
                              f"more than the {HIGHEST_QUANTITY:.0e} of any cluster); refusing to bill it")
    return summed.rename(columns={"quantity": "allocatable"})
