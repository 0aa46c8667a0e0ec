"""Waste: what pods held but did not use. Billing stays request-based; this only shows it.

Two measures per cluster-day and namespace, on the billing instants:

* idle GPU-hours: GPUs the DCGM exporter (`DCGM_FI_DEV_GPU_UTIL`, labelled
  with the pod holding the GPU) reports below `waste.gpu_utilisation_below`
  percent, one step per GPU and instant;
* unused CPU core-hours: a Running pod's CPU request less what it used
  (cAdvisor's `container_cpu_usage_seconds_total`, as a 5-minute rate), never
  below zero per pod; a pod without usage series used nothing.

Where a cluster's Prometheus has no such metric in a chunk of the day, the
measure is not taken there (None when it never is), rather than reported as
all waste. Queries reuse promql.py's chunks and selectors; the chunks are
an hour, not six: the unused-CPU query joins requests, Running and usage
series at every instant, which on a 10,000-pod cluster costs Prometheus
about ten times what the billing queries do (1 h keeps each query's samples
far below its limits). `waste.enabled: false` leaves it out.
"""

from __future__ import annotations

import pandas as pd

from billing.promql import Chunk, Queries, chunks, map_chunks
from billing.config import ClusterConfig
from billing.days import BillingDay
from billing.prometheus import PrometheusSource
from billing.stores import Store, store_of

GPU_UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
CPU_USAGE = "container_cpu_usage_seconds_total"
WASTE_COLUMNS = ["namespace", "idle_gpu_hours", "unused_cpu_core_hours"]
WASTE_INSTANTS = 60  # instants per query: 1 h at a 60 s step


class WasteQueries(Queries):
    def present(self, metric: str) -> str:
        """Any answer if the chunk has samples of the metric."""
        return f"count(last_over_time({self.series(metric)}[{self.raw}]))"

    def idle_gpus(self, below: float) -> str:
        """Per namespace: GPU-instants below the utilisation threshold."""
        held = self.series(GPU_UTILISATION, f'{self.dcgm.namespace}!=""')  # GPUs the DCGM exporter says a pod holds
        gpus = f"max by (namespace, pod, Hostname, gpu) ({self.dcgm.plain(self.latest(held))})"
        return f"sum_over_time((count by (namespace) ({gpus} < {below}))[{self.instants}:{self.step}])"

    def unused_cpu(self) -> str:
        """Per namespace: core-instants requested by Running pods but not used, per pod at least 0."""
        requests = self.series("kube_pod_container_resource_requests", 'resource="cpu"')
        requested = f"""sum by (namespace, pod) (
        max by (namespace, pod, uid, container) ({self.ksm.plain(self.latest(requests))})
      * on (namespace, pod, uid) group_left
        max by (namespace, pod, uid) ({self.ksm.plain(self.latest(self.running()))} == 1)
    )"""
        container = self.cadvisor.container  # cAdvisor's series of containers, not of pods' cgroups:
        usage = self.series(CPU_USAGE, f'{container}!=""', f'{container}!="POD"')
        # requested less used per pod, as a sum over both: a pod without usage keeps its whole request,
        # and the costly request side is evaluated once (a `-` with an `or` would need it twice)
        rates = self.cadvisor.plain(self.engine.rate(usage, 300))
        used = f'label_replace(-sum by (namespace, pod) ({rates}), "part", "used", "", "")'
        return f"""
sum_over_time((
    sum by (namespace) (clamp_min(sum by (namespace, pod) ({requested} or {used}), 0))
)[{self.instants}:{self.step}])"""


def _by_namespace(answer: list[dict], step: int) -> dict[str, float]:
    return {s["metric"].get("namespace", ""): float(s["value"][1]) * step / 3600 for s in answer}


MEASURES = {GPU_UTILISATION: "idle_gpu_hours", CPU_USAGE: "unused_cpu_core_hours"}


def _chunk_waste(source: PrometheusSource, queries: WasteQueries, chunk: Chunk, below: float) -> pd.DataFrame:
    """The chunk's measures per namespace; a measure whose metric the chunk lacks is left out."""
    asked = {GPU_UTILISATION: lambda: queries.idle_gpus(below), CPU_USAGE: queries.unused_cpu}
    measures = {MEASURES[metric]: _by_namespace(source.instant(query(), chunk.last), chunk.step)
                for metric, query in asked.items() if source.instant(queries.present(metric), chunk.last)}
    frame = pd.DataFrame(measures, columns=list(measures)).rename_axis("namespace").reset_index()
    return frame.fillna(0.0)  # measured, and nothing of it in this namespace


def collect_waste(cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: list[str],
                  source: PrometheusSource, below: float, store: Store | None = None) -> pd.DataFrame:
    """Idle GPU-hours and unused CPU core-hours of one cluster-day per namespace (WASTE_COLUMNS).

    A measure is NaN for a namespace that has none, and in every row where
    the cluster never had its metric."""
    store = store or store_of(source, cluster, day)
    parts = map_chunks(lambda c: _chunk_waste(source, WasteQueries(cluster, gpu_resources, c, store), c, below),
                       chunks(day, step, WASTE_INSTANTS))
    frame = pd.concat(parts, ignore_index=True)
    measured = [m for m in WASTE_COLUMNS[1:] if m in frame.columns]
    summed = frame.groupby("namespace", as_index=False, sort=True)[measured].sum() if measured else frame
    return summed.reindex(columns=WASTE_COLUMNS).astype({m: float for m in WASTE_COLUMNS[1:]})


def attribute_waste(waste: pd.DataFrame, ownership: pd.DataFrame) -> pd.DataFrame:
    """Waste per namespace split over its teams like its costs (ownership.py's shares).

    waste: cluster, namespace, idle_gpu_hours, unused_cpu_core_hours; ownership: namespace, team, owner, share.
    """
    rows = waste.merge(ownership, on="namespace", how="left", validate="many_to_many")
    for measure in WASTE_COLUMNS[1:]:
        rows[measure] = rows[measure] * rows["share"]
    return rows[["cluster", "namespace", "team", "owner", *WASTE_COLUMNS[1:]]]
