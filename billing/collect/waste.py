"""Waste: what pods held but did not use. Billing stays request-based; this only shows it.

Two measures per cluster-day and namespace (and, with `workloads.enabled`, per
workload: the pod's top-level controller, asking.TopControllers), taken
per pod and hour of the day. An hour is 3600 / step of the billing instants
(docs/spec.md "Rule 1: sampling instants"), and its measures are read at its last instant:

* idle GPU-hours: per GPU (or MIG GPU instance) that the DCGM exporter
  labels with the pod holding it, the hour's instants at which its series is
  visible (a GPU held through DRA 1/k at an instant k pods hold it), counted only if the mean of the samples those instants see (from
  the lookback before the hour's first instant to its last) is below
  `waste.gpu_utilisation_below` percent. Whole GPUs report
  `DCGM_FI_DEV_GPU_UTIL` (percent); MIG GPU instances have no GPU_UTIL
  (some exporters send 0 for them, labelled `GPU_I_ID`): their activity is
  `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a ratio, per `GPU_I_ID` and
  `GPU_I_PROFILE`), and an idle slice counts as the physical GPUs its
  resource stands for in `gpu_resources` (`1g.10gb` ->
  `nvidia_com_mig_1g_10gb`), one GPU where that resource is not listed (MIG's
  single strategy bills a slice as one GPU of the slice's model);
* unused CPU core-hours: per pod (namespace and name) and hour, the core-hours
  its Running instants requested (its request by docs/spec.md rule 3, each
  container's highest request of the hour, over all of the container's
  request series, as kube-state-metrics starts a new one when it is scheduled
  or resized; kube-scheduler's highest figure of the hour instead where its series are scraped; times the
  Running instants, times step: what billing counts) less the CPU
  its containers used in the hour, never below zero per pod and hour. The
  CPU used is, per cAdvisor `container_cpu_usage_seconds_total` series (one
  per container run, its copies merged), its last sample in the hour that
  ends at the hour's last instant less its last sample in the hour before (0
  where it has none: the container started within the hour, and the counter
  counts from 0).
  Each stretch between two samples thus belongs to exactly one hour, a day's
  hours add up to what the counters grew, and usage is never extrapolated:
  not Prometheus' `increase()`, which stretches a series' growth by up to
  half a scrape interval past its last sample, after a deleted pod was gone
  (a stretch between a pod's last sample and its deletion, under one scrape
  interval, goes uncounted instead). A pod without usage series used nothing.
* unused storage GiB-hours: per bound claim (namespace, persistentvolumeclaim) and hour, the GiB it held at the
  instants at which kubelet's `kubelet_volume_stats_used_bytes` of it is visible (kubelet exports it only while a
  pod mounts the claim: an instant without it is not measured) less the GiB its filesystem used then, never below
  zero per claim and hour. What it held is its billed size (docs/spec.md "Storage"), taken as its bound volume's
  highest capacity of the hour (its highest request where no capacity of its volume is visible). The store is
  asked only for the instants and sum of the used bytes (subqueries of the bare selector, no per-instant join): a
  claim that storage's factoring holds at one size Bound at every instant of its chunk (nearly all) has that size
  as every hour's highest, taken from storage's figures (StorageDay.sizes); only the claims it does not (resized,
  recreated, Bound at some instants) that kubelet saw are asked their hour's highest size, by name, as raw samples.
  Reading every claim's size again per hour cost half as much again as waste's other reads. Per namespace only:
  with workloads, it is the namespace's own (frames.UNATTRIBUTED).

Per hour rather than per instant because that is what makes waste cheap: the
per-instant join of requests, Running and usage rates cost Prometheus twenty
times what the billing queries do on a 50,000-pod day; per hour, requests
are read as raw samples and only Running and GPU visibility are counted
instant by instant (subqueries of bare selectors). Each pod's Running
instants per hour and its CPU request come from the usage of the same day
(ClusterUsage.pod_hours), which asks them for the bill: a request over the
usage's chunk is the request of every hour in it, but for the pods whose
requests changed (usage's exact path), whose CPU request is asked here hour
by hour. Six hours are asked in one
range query (a step of one hour; fewer where chunks.SAMPLES_PER_QUERY says
so, as for the chunks): Prometheus then reads each series once for
the six and evaluates the subqueries once over them. The usage counters are
asked at the end of each of the six hours and of the hour before, in a range
query of their own that reads each counter once, and each pod's use is taken
and subtracted from what it requested on the client: differencing them on the
server (`now - (before or now * 0)` per series) read every counter three
times and cost Prometheus five times as much (docs/performance.md). A store
that moves a range query's times (a query frontend aligning them to the step)
is asked hour by hour instead. Copies of a series from replicated Prometheus
pairs (`prometheus_replica`) count once (`max by` every series' own labels).

Per workload, the hourly queries answer per pod, and each pod is matched on
the client to the workload the bill charges it to in the same chunk of the day
(ClusterUsage.pod_workloads, from the usage's own answers): joining a lookup on
the server in every hourly query cost Prometheus as much again as the waste
queries themselves, and asking kube_pod_info for the pods' controllers once
more per chunk cost a tenth of the bill's floor. A pod the usage does not
know (kube-state-metrics never saw it on a node) is its own workload,
`Pod/<name>`, as a pod without a controller is.

Where a cluster's Prometheus has no such metric in an hour, the measure is
not taken there (NaN when it never is), rather than reported as all waste.
`waste.enabled: false` leaves it out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from billing import frames
from billing.collect.asking import Sampled, at_times, map_chunks
from billing.collect.chunks import Chunk, hour_groups, hours_of, whole_hours
from billing.collect.context import ClusterDay
from billing.collect.figures import (
    CPU_SECONDS,
    IDLE_GPUS,
    REQUESTS,
    STORAGE_BYTES,
    STORAGE_INSTANTS,
    USED_BYTES,
    figure,
)
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import (
    CLAIM_INFO,
    CLAIM_REQUEST,
    DRA_HELD,
    GPU_UTILISATION,
    VOLUME_CAPACITY,
    VOLUME_USED,
    WHOLE_GPU,
    GpuResources,
    Queries,
    fits,
    in_pieces,
    node_matcher,
)
from billing.collect.storage import Claim, ClaimSizes, claim_of, claims_named, collect_storage, labelled, pieces
from billing.collect.stores import FamilyLabels, Store
from billing.collect.usage import GIB, ClusterUsage, collect_cluster
from billing.config import ClusterConfig
from billing.resources import mig_resource, slice_fraction

log = logging.getLogger(__name__)

GPU_INSTANCE_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # MIG GPU instances: share of time busy, 0 to 1
CPU_USAGE = "container_cpu_usage_seconds_total"
MEASURES = list(frames.WASTE_MEASURES)
WORKLOAD_WASTE_KEYS = ["namespace", "workload"]  # the keys of waste per workload, before its measures
POD_KEYS = ["namespace", "pod"]
HOURS_PER_QUERY = 6  # hours asked in one range query, fewer where chunks.SAMPLES_PER_QUERY says so (as for chunks)
GPU_INSTANCE = 'GPU_I_ID!=""'  # series of a MIG GPU instance (promql.WHOLE_GPU: of a whole GPU)
IDLE_GPU, IDLE_GPU_INSTANCE = "idle_gpu", "idle_gpu_instance"  # the parts of a query
PARTS = {IDLE_GPU: "idle_gpu_hours", IDLE_GPU_INSTANCE: "idle_gpu_hours"}
CONTAINER_RUN = ("namespace", "pod", "container", "id", "cpu")  # cAdvisor's labels of one container run's counter
CLAIM = "namespace, persistentvolumeclaim"  # a claim, as kube-state-metrics and the kubelet label it
SEEN, USED, SIZE = "seen", "used", "size"  # the `figure` label of each part of `unused_storage`'s answer
UNUSED_STORAGE = "unused_storage_gib_hours"
# the kubelet's volume stats name the claim's namespace; a scrape with `honor_labels: false` moves it to
# exported_namespace, which is read wherever a series has it (no other family tells how the kubelet is scraped)
KUBELET = FamilyLabels(namespace="exported_namespace")


class WasteQueries(Queries):
    """The waste queries of one hour of the day, per namespace or per (namespace, workload)."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: GpuResources, chunk: Chunk, store: Store,
                 by_workload: bool = False, copies: bool = False):
        super().__init__(cluster, gpu_resources, chunk, store)
        self.copies = copies  # some series came from several exporters: merged at each instant (as usage does)
        # nodes are aggregated away in every waste query: a renamed `node` label needs no renaming back
        self.ksm, self.dcgm, self.cadvisor = (replace(f, node="node") for f in (self.ksm, self.dcgm, self.cadvisor))
        self.by_workload = by_workload
        self.hour = chunk.end - chunk.start

    def cpu_counters(self) -> str:
        """Per container run (CONTAINER_RUN): its CPU counter's last sample in the hour that ends at the time asked,
        `max by` those labels so that replicated copies of a series count once. Asked at the end of every hour of a
        group and of the hour before it, in one range query, it reads each counter once; the hour's growth is
        taken on the client (`_cpu_used`). A series `{}` of 0 answers at every time asked, so that a store which
        moves a range query's times shows it even in an hour without cAdvisor."""
        now = self.cadvisor.plain(f"last_over_time({self.usage()}[{self.hour}s])")
        return f"max by ({', '.join(CONTAINER_RUN)}) ({now}) or vector(0)"

    def used_bytes(self) -> str:
        """Per claim, each part told apart by its `figure` label: at how many of the hour's instants kubelet's used
        bytes are visible (SEEN) and those bytes summed over them (USED), copies of a series once: subqueries of the
        bare selector. What the claims held is storage's figure (ClaimSizes), asked here only for the few claims
        storage's factoring does not hold one size for (`claim_sizes`)."""
        used = self.latest(self.series(VOLUME_USED))
        return labelled({SEEN: self.instants_seen(used, CLAIM, KUBELET, copies=True),
                         USED: self.instants_seen(used, CLAIM, KUBELET, copies=True, sum_values=True)})

    def claim_sizes(self, named: str, volumes: str) -> str:
        """Per claim of those `named` selects, labelled `figure` SIZE: its highest billed size of the hour, the highest
        capacity of its volume (of those `volumes` selects), or its highest request where no capacity of its volume is
        visible. Raw samples, no per-instant join."""
        info = (f"max by ({CLAIM}, volumename) "
                f"({self.ksm.plain(self.highest(self.series(CLAIM_INFO, named)), ('namespace',))})")
        capacity = (f"label_replace(max by (persistentvolume) ({self.highest(self.series(VOLUME_CAPACITY, volumes))}), "
                    '"volumename", "$1", "persistentvolume", "(.+)")')
        request = (f"max by ({CLAIM}) "
                   f"({self.ksm.plain(self.highest(self.series(CLAIM_REQUEST, named)), ('namespace',))})")
        return labelled({SIZE: f"max by ({CLAIM}) ({info} * on (volumename) group_left () {capacity}) or {request}"})

    def usage(self) -> str:
        """cAdvisor's CPU usage series of containers, not of pods' cgroups (`container=""`) or sandboxes."""
        container = self.cadvisor.container
        return self.series(CPU_USAGE, f'{container}!=""', f'{container}!="POD"')

    def held(self) -> str:
        """The matcher of DCGM series of a GPU (or GPU instance) the exporter says a pod holds."""
        return f'{self.dcgm.namespace}!=""'

    def per_key(self, per_pod: str) -> str:
        """Sum by namespace (per workload: by namespace and pod), measure and MIG profile of per-pod parts
        (namespace and pod labels)."""
        by = ", ".join([*(POD_KEYS if self.by_workload else ["namespace"]), "measure", "GPU_I_PROFILE"])
        return f"sum by ({by}) ({per_pod})"

    def measures(self, below: float) -> list[str]:
        """The hour's idle GPU measures, labelled `measure` (PARTS), in one query; in one query per part where
        together they would be too long."""
        parts = [self.per_key(self.idle_gpus(below)), self.per_key(self.idle_gpu_instances(below))]
        together = " or ".join(f"({part})" for part in parts)
        return [together] if fits(together) else parts

    def _idle(self, metric: str, matcher: str, gpu: list[str], below: float, measure: str) -> str:
        """Per held GPU (`gpu`: its labels besides namespace and pod): instants of the hour at which its series
        was visible if the mean of the samples those instants see is below `below`, else 0 (so that any
        answer means the metric was there)."""
        held = self.series(metric, self.held(), matcher)
        by = ", ".join(["namespace", "pod", *gpu])
        visible = self.dcgm.plain(self.instants_seen(self.latest(held), by, self.dcgm, self.copies))
        if self.dra and metric == GPU_UTILISATION:  # a GPU k pods hold through one claim: 1/k to each
            own = self.series(metric, self.held(), matcher, 'dra_driver_name=""')
            alone = self.dcgm.plain(self.instants_seen(self.latest(own), by, self.dcgm, self.copies))
            visible = f"max by ({by}) ({alone}) or max by ({by}) ({self._shared_instants(metric, matcher, by)})"
        mean = self.dcgm.plain(f"avg_over_time({held}[{self.raw}])")
        idle = f"max by ({by}) ({visible}) * on ({by}) (max by ({by}) ({mean}) < bool {below})"
        return f'label_replace({idle}, "measure", "{measure}", "", "")'

    def _shared_instants(self, metric: str, matcher: str, by: str) -> str:
        """Per GPU held through DRA and pod holding it: the instants of the hour at which it was held, each counted
        1/k where k pods held it then (docs/spec.md "GPUs through DRA"), as the bill counts them."""
        held = self.dcgm.plain(self.latest(self.series(metric, self.held(), matcher, DRA_HELD)))
        shares = f"group by ({by}, UUID) ({held}) / on (UUID) group_left () count by (UUID) (group by (UUID, namespace, pod) ({held}))"
        return f"sum_over_time(({shares})[{self.instants}:{self.step}])"

    def idle_gpus(self, below: float) -> str:
        """Per whole GPU held: its idle GPU-instants of the hour (MIG instances left out; a GPU held through DRA
        counts 1/k at an instant k pods hold it)."""
        return self._idle(GPU_UTILISATION, WHOLE_GPU, ["Hostname", "gpu"], below, IDLE_GPU)

    def idle_gpu_instances(self, below: float) -> str:
        """Per MIG GPU instance held: its idle GPU-instance-instants of the hour (`below` in percent)."""
        instance = ["Hostname", "gpu", "GPU_I_ID", "GPU_I_PROFILE", "modelName"]
        return self._idle(GPU_INSTANCE_ACTIVITY, GPU_INSTANCE, instance, below / 100, IDLE_GPU_INSTANCE)

    def gpus_per_instance(self, labels: dict[str, str]) -> float:
        """Physical GPUs behind one GPU instance of a MIG profile: its resource's fraction in gpu_resources (mixed
        strategy), else the profile's compute slices of its GPU (single strategy, where no resource names it)."""
        profile = labels.get("GPU_I_PROFILE", "")
        listed = self.fractions.get(mig_resource(profile))
        return listed if listed is not None else slice_fraction(profile, labels.get("modelName", ""))

    def cpu_requests(self, pods: str) -> str:
        """Per pod (namespace, pod, uid; `pods` selects them by uid): its CPU request by docs/spec.md rule 3
        (kube-scheduler's where its series are scraped), each container's highest in the hour: for pods whose
        requests changed, for which usage's figure over the chunk (ClusterUsage.pod_hours) does not hold every hour."""
        return f"sum by (namespace, pod, uid) ({self.effective(self.highest, pods, resources='cpu')})"


NamespaceHours = dict[str, float]  # namespace -> GiB-hours held but unused
PodSeconds = dict[tuple[str, str], float]  # (namespace, pod) -> CPU seconds its containers used
PodInstants = dict[tuple[str, str], float]  # (namespace, pod) -> CPU core-instants it requested


def _group_waste(queries: WasteQueries, hours: list[Chunk], answer: Sampled, used: list[PodSeconds | None],
                 requested: list[PodInstants], workloads: list[dict[tuple[str, str], str] | None],
                 storage: list[NamespaceHours | None]) -> pd.DataFrame:
    """The measures of a group of hours (`answer`: the idle GPU measures at each hour's last instant; `used`: each
    hour's CPU seconds used per pod, `_cpu_used`; `requested`: each hour's CPU core-instants requested per pod,
    `_requested`), summed over them per namespace, or with `workloads` (each hour's pod -> workload) per namespace
    and workload. Unused CPU is taken per pod and hour, never below 0, in the hours with cAdvisor series (`used`
    not None), and left out where no hour has them: there the whole request would look unused. `storage`: each
    hour's unused storage GiB-hours per namespace (`_unused_storage`; None: no kubelet volume stats), the
    namespace's own workload's (frames.UNATTRIBUTED) per workload."""
    measures: dict[str, dict[tuple[str, ...], float]] = {}
    at = _hour_index(hours)

    def add(measure: str, i: int, namespace: str, pod: str, instants: float) -> None:
        pods = workloads[i]
        key = (namespace,) if pods is None else (namespace, pods.get((namespace, pod), f"Pod/{pod}"))
        sums = measures.setdefault(measure, {})
        sums[key] = sums.get(key, 0.0) + instants * hours[i].step / 3600

    for labels, values in answer:
        part = labels.get("measure", "")
        weight = queries.gpus_per_instance(labels) if part == IDLE_GPU_INSTANCE else 1.0
        namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
        for t, value in values:
            instants = figure(value, IDLE_GPUS, labels, queries.cluster)
            add(PARTS[part], at[t], namespace, pod, instants * weight)
    if any(hour is not None for hour in used):
        measures["unused_cpu_core_hours"] = {}
    for i, pods_used in enumerate(used):
        if pods_used is None:
            continue
        for (namespace, pod), instants in requested[i].items():
            add("unused_cpu_core_hours", i, namespace, pod,
                max(instants - pods_used.get((namespace, pod), 0.0) / hours[i].step, 0.0))
    if any(hour is not None for hour in storage):
        measures[UNUSED_STORAGE] = {}
    for i, namespaces in enumerate(storage):
        for namespace, gib_hours in (namespaces or {}).items():
            key = (namespace,) if workloads[i] is None else (namespace, frames.UNATTRIBUTED)
            measures[UNUSED_STORAGE][key] = measures[UNUSED_STORAGE].get(key, 0.0) + gib_hours
    found = sorted(set().union(*measures.values()))
    rows = [(*key, *(measures[m].get(key, 0.0) for m in measures)) for key in found]
    keys = ["namespace"] if workloads[0] is None else WORKLOAD_WASTE_KEYS
    return pd.DataFrame(rows, columns=[*keys, *measures])  # 0.0: measured, and nothing of it under this key


def _requested(pod_hours: pd.DataFrame, hours: list[Chunk], resized: frozenset[str],
               hourly: list[dict[str, float]]) -> list[PodInstants]:
    """Per hour of a group and pod (namespace, pod): the CPU core-instants it requested, its Running instants times its
    CPU request (`pod_hours`: usage's, frames.POD_HOURS). The request is usage's over the chunk, which is the pod's
    request at every instant unless it changed; a `resized` pod's is the hour's own (`hourly`: each hour's uid ->
    request, `_resized_requests`). A pod without a CPU request requested none."""
    at = _hour_index(hours)
    requested: list[PodInstants] = [{} for _ in hours]
    group = pod_hours[pod_hours["hour"].isin([hour.last for hour in hours])]
    for uid, namespace, pod, hour, instants, cpu in group[frames.POD_HOURS.columns].itertuples(index=False):
        i = at[float(hour)]
        request = hourly[i].get(uid) if uid in resized else cpu
        if request is not None and request == request:  # (NaN: no CPU request)
            requested[i][namespace, pod] = requested[i].get((namespace, pod), 0.0) + request * instants
    return requested


def _resized_requests(source: PrometheusSource, queries: WasteQueries, resized: frozenset[str], ends: list[float],
                      ranged: bool) -> list[dict[str, float]]:
    """Per hour of a group (ends: their last instants): uid -> CPU request of the `resized` pods (usage's exact path:
    a request changed near or in the chunk), each container's highest of the hour."""
    hourly: list[dict[str, float]] = [{} for _ in ends]
    at = {t: i for i, t in enumerate(ends)}
    for query in in_pieces(resized, queries.cpu_requests):
        for labels, values in at_times(source, query, ends, ranged)[0]:
            for t, value in values:
                hourly[at[t]][labels.get("uid", "")] = figure(value, REQUESTS, labels, queries.cluster)
    return hourly


def _cpu_used_at(source: PrometheusSource, queries: WasteQueries, times: list[float]) -> tuple[list[PodSeconds | None], bool]:
    """`_cpu_used` at `times`, and whether the store answered in one range query (_at_times). Asked first of a
    group, as the counters answer at every time asked: a store that moves a range's times shows it here. The
    counters are the largest answer of waste on a big cluster, so none of it outlives this call."""
    counters, ranged = at_times(source, queries.cpu_counters(), times, ranged=True)
    return _cpu_used(counters, times, queries.cluster), ranged


def _cpu_used(counters: Sampled, times: list[float], cluster: str) -> list[PodSeconds | None]:
    """Per hour (its end in times[1:], times[0] the end of the hour before) and pod (namespace, pod): the
    core-seconds its containers used, from `cpu_counters` at those times; None for an hour without cAdvisor
    series. Each counter's growth in an hour is its last sample in the hour less its last in the hour before, or
    the sample itself where it had none then (the container started within the hour and counts from 0)."""
    at = {t: j for j, t in enumerate(times)}
    used: list[PodSeconds | None] = [None] * (len(times) - 1)
    for labels, values in counters:
        if not labels:  # the series that answers at every time
            continue
        pod = (labels.get("namespace", ""), labels.get("pod", ""))
        last: dict[int, float] = {at[t]: figure(value, CPU_SECONDS, labels, cluster) for t, value in values}
        for j, value in last.items():
            if j == 0:
                continue
            hour = used[j - 1]
            if hour is None:
                hour = used[j - 1] = {}
            hour[pod] = hour.get(pod, 0.0) + value - last.get(j - 1, 0.0)
    return used


def _used_bytes_at(source: PrometheusSource, queries: WasteQueries, sizes: list[ClaimSizes], ends: list[float],
                   ranged: bool) -> Sampled:
    """`used_bytes` at each hour's last instant (`ends`; `sizes`: each hour's chunk's, storage's), and the hour's
    highest size (`claim_sizes`) of the claims kubelet saw whose size storage's factoring does not know, asked by name
    in pieces within promql.QUERY_BYTES."""
    answer = at_times(source, queries.used_bytes(), ends, ranged)[0]
    seen = {claim_of(labels) for labels, _ in answer}
    unsure = {claim: volumes for hour in sizes for claim, volumes in hour.unsure.items() if claim in seen}

    def sized(piece: list[Claim]) -> str:
        volumes = node_matcher([volume for claim in piece for volume in unsure[claim]], "persistentvolume")
        return queries.claim_sizes(claims_named(piece, queries), volumes)

    for query in pieces(unsure, sized):
        answer += [(labels, values) for labels, values in at_times(source, query, ends, ranged)[0]
                   if claim_of(labels) in unsure]
    return answer


def _unused_storage(answer: Sampled, hours: list[Chunk], sizes: list[ClaimSizes],
                    cluster: str) -> list[NamespaceHours | None]:
    """Per hour and namespace: the GiB-hours its claims held but did not use (`answer`: `_used_bytes_at` at each
    hour's last instant; `sizes`: each hour's chunk's, storage's), each claim's size times the instants its used
    bytes were seen less their sum, never below 0 per claim and hour; None for an hour without kubelet's volume
    stats. A claim's size is storage's where its factoring holds, else the hour's highest (SIZE); one storage does
    not know was not billed and held nothing."""
    at = _hour_index(hours)
    parts: dict[tuple[int, str, str], dict[str, float]] = {}
    family = {SEEN: STORAGE_INSTANTS, USED: USED_BYTES, SIZE: STORAGE_BYTES}
    for labels, values in answer:
        part = labels.get("figure", "")
        for t, value in values:
            hour = hours[at[t]]
            claim = parts.setdefault((at[t], *claim_of(labels)), {})
            # the used bytes are summed over the hour's instants at most
            claim[part] = figure(value, family[part], labels, cluster,
                                 (hour.end - hour.start) / hour.step if part == USED else 1.0)
    unused: list[NamespaceHours | None] = [None] * len(hours)
    for (i, namespace, name), claim in parts.items():
        if SEEN not in claim:  # not mounted in the hour: not measured
            continue
        sums = unused[i] = unused[i] or {}
        size = sizes[i].held.get((namespace, name), claim.get(SIZE, 0.0))
        byte_instants = max(size * claim[SEEN] - claim.get(USED, 0.0), 0.0)
        sums[namespace] = sums.get(namespace, 0.0) + byte_instants / GIB * hours[i].step / 3600
    return unused


def _hour_index(hours: list[Chunk]) -> dict[float, int]:
    """The time of each hour's last instant -> the hour's place in `hours`."""
    return {float(hour.last): i for i, hour in enumerate(hours)}


def collect_waste(context: ClusterDay, below: float, by_workload: bool = False,
                  usage: ClusterUsage | None = None, sizes: Sequence[ClaimSizes] = ()) -> pd.DataFrame:
    """Idle GPU-hours, unused CPU core-hours and unused storage GiB-hours of one cluster-day per namespace
    (frames.WASTE.columns), or with `by_workload` per namespace and workload (WORKLOAD_WASTE_KEYS and MEASURES).
    `usage`: the cluster-day's usage (collect_cluster), whose pods' Running instants and CPU requests per hour, each
    chunk's top-level controllers, exporter copies and resized pods waste takes rather than asking again; `sizes`:
    storage's claims' sizes per chunk (StorageDay.sizes), which waste takes rather than reading them again; each
    collected here when not given.

    A measure is NaN for a key that has none, and in every row where the
    cluster never had its metric."""
    cluster, day, step, gpu_resources, source, store = (context.cluster, context.day, context.step,
                                                        context.gpu_resources, context.source, context.store)
    usage = usage or collect_cluster(context, [] if by_workload else None)
    keys = WORKLOAD_WASTE_KEYS if by_workload else ["namespace"]
    day_chunks = context.chunks()
    pods_of: Sequence[dict[tuple[str, str], str] | None] = usage.pod_workloads if by_workload else [None] * len(day_chunks)
    claim_sizes = sizes or collect_storage(context).sizes

    def measure(hours: list[Chunk]) -> pd.DataFrame:
        queries = WasteQueries(cluster, gpu_resources, hours[0], store, by_workload, usage.copies)  # one text every hour
        ends = [float(hour.last) for hour in hours]
        times = [ends[0] - queries.hour, *ends]  # and the end of the hour before, for the counters' growth
        used, ranged = _cpu_used_at(source, queries, times)
        answer = [series for query in queries.measures(below) for series in at_times(source, query, ends, ranged)[0]]
        requested: list[PodInstants] = [{} for _ in hours]
        if any(hour is not None for hour in used):  # the requests matter only where there is use to subtract
            hourly = _resized_requests(source, queries, usage.exact, ends, ranged)
            requested = _requested(usage.pod_hours, hours, usage.exact, hourly)
        in_chunk = [next(i for i, c in enumerate(day_chunks) if c.start <= hour.start < c.end) for hour in hours]
        workloads = [pods_of[i] for i in in_chunk]
        sizes = [claim_sizes[i] for i in in_chunk]
        storage = _unused_storage(_used_bytes_at(source, queries, sizes, ends, ranged), hours, sizes, cluster.name)
        return _group_waste(queries, hours, answer, used, requested, workloads, storage)

    groups = hour_groups(hours_of(day, step), whole_hours(store.busiest, step, HOURS_PER_QUERY))
    frame = pd.concat(map_chunks(measure, groups), ignore_index=True)
    measured = [m for m in MEASURES if m in frame.columns]
    summed = frame.groupby(keys, as_index=False, sort=True)[measured].sum() if measured else frame
    return summed.reindex(columns=[*keys, *MEASURES]).astype({m: float for m in MEASURES})


def waste_by_namespace(by_workload: pd.DataFrame) -> pd.DataFrame:
    """Waste per workload summed per namespace (frames.WASTE.columns): what the namespace table holds."""
    return by_workload.groupby("namespace", as_index=False, sort=True)[MEASURES].sum(min_count=1)[frames.WASTE.columns]


def attribute_waste(waste: pd.DataFrame, ownership: pd.DataFrame) -> pd.DataFrame:
    """Waste per namespace split over its teams like its costs (ownership.py's shares).

    waste: cluster, namespace[, workload], idle_gpu_hours, unused_cpu_core_hours; ownership: namespace, team,
    owner, share. The result has cluster, namespace, team, owner[, workload] and the measures.
    """
    rows = waste.merge(ownership, on="namespace", how="left", validate="many_to_many")
    for measure in MEASURES:
        rows[measure] = rows[measure] * rows["share"]
    return rows[["cluster", "namespace", "team", "owner", *(["workload"] if "workload" in rows else []), *MEASURES]]
