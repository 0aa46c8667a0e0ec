"""Waste: what pods held but did not use. Billing stays request-based; this only shows it.

Two measures per cluster-day and namespace, on the billing instants:

* idle GPU-hours: GPUs the DCGM exporter (`DCGM_FI_DEV_GPU_UTIL`, labelled
  with the pod holding the GPU) reports below `waste.gpu_utilisation_below`
  percent, one step per GPU and instant. MIG GPU instances have no
  GPU_UTIL (some exporters send 0 for them, labelled `GPU_I_ID`): their
  activity is `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a ratio, per `GPU_I_ID` and
  `GPU_I_PROFILE`), and an idle slice counts as the physical GPUs its
  resource stands for in `gpu_resources` (`1g.10gb` -> `nvidia_com_mig_1g_10gb`),
  one GPU where that resource is not listed (MIG's single strategy bills a
  slice as one GPU of the slice's model);
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

import re
from collections.abc import Callable

import pandas as pd

from billing.config import MIG_RESOURCE_PREFIX, ClusterConfig
from billing.days import BillingDay
from billing.prometheus import PrometheusSource
from billing.promql import Chunk, GpuResources, Queries, chunks, map_chunks
from billing.stores import Store, store_of

GPU_UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
GPU_INSTANCE_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # MIG GPU instances: share of time busy, 0 to 1
CPU_USAGE = "container_cpu_usage_seconds_total"
WASTE_COLUMNS = ["namespace", "idle_gpu_hours", "unused_cpu_core_hours"]
WASTE_INSTANTS = 60  # instants per query: 1 h at a 60 s step
WHOLE_GPU, GPU_INSTANCE = 'GPU_I_ID=""', 'GPU_I_ID!=""'  # series of a whole GPU, of a MIG GPU instance


class WasteQueries(Queries):
    def present(self, metric: str) -> str:
        """Any answer if the chunk has samples of the metric."""
        return f"count(last_over_time({self.series(metric)}[{self.raw}]))"

    def held(self) -> str:
        """The matcher of DCGM series of a GPU (or GPU instance) the exporter says a pod holds."""
        return f'{self.dcgm.namespace}!=""'

    def idle_gpus(self, below: float) -> str:
        """Per namespace: whole-GPU-instants below the utilisation threshold (MIG instances left out)."""
        held = self.series(GPU_UTILISATION, self.held(), WHOLE_GPU)
        gpus = f"max by (namespace, pod, Hostname, gpu) ({self.dcgm.plain(self.latest(held))})"
        return f"sum_over_time((count by (namespace) ({gpus} < {below}))[{self.instants}:{self.step}])"

    def idle_gpu_instances(self, below: float) -> str:
        """Per namespace and MIG profile: GPU-instance-instants less active than the threshold (percent)."""
        instances = self.series(GPU_INSTANCE_ACTIVITY, self.held(), GPU_INSTANCE)
        held = f"max by (namespace, pod, Hostname, gpu, GPU_I_ID, GPU_I_PROFILE) ({self.dcgm.plain(self.latest(instances))})"
        return (f"sum_over_time((count by (namespace, GPU_I_PROFILE) ({held} < {below / 100}))"
                f"[{self.instants}:{self.step}])")

    def gpus_per_instance(self, labels: dict[str, str]) -> float:
        """Physical GPUs behind one GPU instance of a MIG profile, by its resource in gpu_resources."""
        profile = labels.get("GPU_I_PROFILE", "")
        return self.fractions.get(MIG_RESOURCE_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", profile), 1.0)

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


def _by_namespace(answer: list[dict], step: int, weight: Callable[[dict], float] = lambda labels: 1.0
                  ) -> dict[str, float]:
    """Hours per namespace from per-namespace (or finer) counts of instants, each weighted by its labels."""
    hours: dict[str, float] = {}
    for series in answer:
        namespace = series["metric"].get("namespace", "")
        hours[namespace] = hours.get(namespace, 0.0) + float(series["value"][1]) * weight(series["metric"]) * step / 3600
    return hours


def _chunk_waste(source: PrometheusSource, queries: WasteQueries, chunk: Chunk, below: float) -> pd.DataFrame:
    """The chunk's measures per namespace; a measure whose metrics the chunk lacks is left out."""
    def ask(query: str) -> list[dict]:
        return source.instant(query, chunk.last)

    measures = {}
    whole, sliced = ask(queries.present(GPU_UTILISATION)), ask(queries.present(GPU_INSTANCE_ACTIVITY))
    if whole or sliced:
        gpus = _by_namespace(ask(queries.idle_gpus(below)) if whole else [], chunk.step)
        slices = _by_namespace(ask(queries.idle_gpu_instances(below)) if sliced else [], chunk.step,
                               queries.gpus_per_instance)
        measures["idle_gpu_hours"] = {ns: gpus.get(ns, 0.0) + slices.get(ns, 0.0) for ns in gpus | slices}
    if ask(queries.present(CPU_USAGE)):
        measures["unused_cpu_core_hours"] = _by_namespace(ask(queries.unused_cpu()), chunk.step)
    frame = pd.DataFrame(measures, columns=list(measures)).rename_axis("namespace").reset_index()
    return frame.fillna(0.0)  # measured, and nothing of it in this namespace


def collect_waste(cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: GpuResources,
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
