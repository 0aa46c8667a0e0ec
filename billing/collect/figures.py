"""The one gate every figure read from a store passes (docs/spec.md "Figures from the store").

A collector never turns a sample value of an answer into a number itself: it asks `figure`, naming the family
the value belongs to. A family knows what is possible for its figures: finite, not negative, and not beyond a
bound far above any real cluster (a pod holding 1e13 GPUs is an exporter's fault, not a bill). Kueue writes a
lending limit it was not given as +Inf, which its family reads as "unset". A figure outside that refuses the
cluster-day: a NaN or infinite figure summed into a bill makes a silently wrong ledger, and a negative one
quietly drops rows. tests/collect/test_figures.py fails on a collector that reads a value any other way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from billing.errors import RunFailed

CORES, BYTES, DEVICES = "cores", "bytes", "devices"


def unit_of(resource: str) -> str:
    """What a resource is counted in: kube-state-metrics' and Kueue's names alike (memory and ephemeral storage in
    bytes, GPUs, slices and other devices one by one)."""
    if resource == "cpu":
        return CORES
    return BYTES if resource in ("memory", "ephemeral-storage", "ephemeral_storage") else DEVICES


# Bounds far above any real figure: no node has 100,000 cores, a PiB of memory or 100,000 GPUs, and no cluster
# 100 times as many. A figure beyond them is an exporter's or a store's fault.
NODE = {CORES: 1e5, BYTES: float(2**50), DEVICES: 1e5}
CLUSTER = {unit: 100 * highest for unit, highest in NODE.items()}
COUNT = 1e9  # instants, exporters, pods, nodes: counted by the store


@dataclass(frozen=True)
class Family:
    """The figures of one kind a collector reads: `series` as the sentence names them, `what` one of them is, the
    highest per unit (`highest`, resource from the `resource` label; None: only a count's bound) and the fix."""

    series: str
    what: str
    fix: str
    highest: Mapping[str, float] = field(default_factory=lambda: {DEVICES: COUNT})
    infinite_is_unset: bool = False  # +Inf means "no limit" (Kueue's lending limit)

    def bound(self, labels: Mapping[str, str], times: float) -> float:
        """The highest possible figure of a series with these labels, summed over `times` instants."""
        highest = self.highest.get(unit_of(labels.get("resource", "")))  # (the fallback only where needed: a night
        return (max(self.highest.values()) if highest is None else highest) * times  # passes 10^5 figures here)


_KSM_FIX = "correct the pod's spec or kube-state-metrics' export of it"
REQUESTS = Family("kube_pod_container_resource_requests", "a pod's request (docs/spec.md rule 3: its containers', "
                  "init containers', overhead or kube-scheduler's figure)", _KSM_FIX, NODE)
# what all of a cluster's pods requested or held of a resource at an instant, summed (`billing check`'s estimates)
CLUSTER_REQUESTS = Family("kube_pod_container_resource_requests", "a cluster's requests summed over its pods", _KSM_FIX,
                          CLUSTER)
ALLOCATABLE = Family("kube_node_status_allocatable", "a node's allocatable capacity",
                     "correct the node's status.allocatable or kube-state-metrics' export of it", NODE)
_KUEUE_FIX = "correct the ClusterQueue or the kueue-controller-manager scrape that reports it"
NOMINAL_QUOTA = Family("kueue_cluster_queue_nominal_quota", "a ClusterQueue's nominal quota", _KUEUE_FIX, CLUSTER)
QUEUE_USAGE = Family("kueue_cluster_queue_resource_usage", "a ClusterQueue's admitted usage", _KUEUE_FIX, CLUSTER)
LENDING_LIMIT = Family("kueue_cluster_queue_lending_limit", "a ClusterQueue's lending limit", _KUEUE_FIX, CLUSTER,
                       infinite_is_unset=True)
# what a namespace's bound claims of one storage class hold at an instant (their volumes' capacity, or requests), and a
# class's volumes: a cluster's bytes at most (docs/spec.md "Storage")
STORAGE_BYTES = Family("kube_persistentvolume_capacity_bytes", "the bytes of persistent volumes (or claims' requests) "
                       "of one storage class at an instant", "correct the volume's or claim's spec or kube-state-metrics' "
                       "export of it", {BYTES: CLUSTER[BYTES]})
# what a claim's filesystem used at an instant (kubelet's volume stats, while a pod mounts it), summed over instants
USED_BYTES = Family("kubelet_volume_stats_used_bytes", "the bytes a claim's filesystem used at an instant",
                    "correct the kubelet's volume stats or their scrape", {BYTES: CLUSTER[BYTES]})
CLAIMS = Family("kube_persistentvolumeclaim_info", "a count of claims", "correct the kube-state-metrics scrapes")
STORAGE_INSTANTS = Family("kube_persistentvolumeclaim_status_phase", "a count of the instants a claim was Bound, a "
                          "volume visible or Released, or a pod mounted a claim",
                          "correct kube-state-metrics' persistent volume and claim series")
RUNNING_INSTANTS = Family("kube_pod_status_phase", "a count of the instants a pod was Running or Pending",
                          "correct kube-state-metrics' kube_pod_status_phase")
REASON_INSTANTS = Family("kube_pod_init_container_status_running", "a count of the instants a container of a pod "
                         "bound to a node ran before it (or, kube_pod_container_status_waiting_reason, waited)",
                         "correct kube-state-metrics' container status series")
EXPORTERS = Family("kube_pod_status_phase", "a count of the exporters that reported a pod",
                   "correct the kube-state-metrics scrapes")
INSTANTS = Family("kube_node_labels", "a count of the instants with kube-state-metrics data",
                  "correct the kube-state-metrics scrapes")
NODES = Family("kube_node_status_allocatable", "a count of nodes", "correct the kube-state-metrics scrapes")
PODS = Family("kube_pod_info", "a count of pods", "correct the kube-state-metrics scrapes")
IDLE_GPUS = Family("DCGM_FI_DEV_GPU_UTIL", "a count of instants a GPU was idle",
                   "correct dcgm-exporter or its scrape")
# a counter since the container started: years of many cores are possible
CPU_SECONDS = Family("container_cpu_usage_seconds_total", "a container's CPU seconds used",
                     "correct the kubelet's cAdvisor scrape", {DEVICES: math.inf})
# energy counters' steps summed over a chunk per namespace, node or cluster (docs/spec.md "Energy and carbon"): a
# petajoule (about 280 GWh) is beyond any cluster's chunk
# an energy counter's steps are NaN or +Inf where it read NaN, +Inf, below 0 or above its highest, or stepped by more
# than its device can draw (collect/energy.py's COUNTER_HIGHEST and MOST_WATTS, the same figures as these), so that
# its chunk's sum is
_COUNTER = ("a counter NaN, infinite, below 0 or above {:g} at a sample, or a step above {:g} W {} over the step and "
            "its lookback, makes the sum of its steps NaN or infinite")
GPU_ENERGY = Family("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "GPU energy in mJ summed over a chunk's steps",
                    f"{_COUNTER.format(1e18, 5e3, 'of one GPU')}: correct dcgm-exporter or its scrape", {DEVICES: 1e18})
POD_ENERGY = Family("kepler_pod_cpu_joules_total", "pods' CPU and DRAM energy in joules summed over a chunk's steps",
                    f"{_COUNTER.format(1e15, 1e4, 'of a node')}: correct Kepler or its scrape", {DEVICES: 1e15})
NODE_ENERGY = Family("kepler_node_cpu_joules_total", "a node's CPU and DRAM energy in joules summed over a chunk's "
                     "steps", f"{_COUNTER.format(1e15, 1e4, 'of a node')}: correct Kepler or its scrape", {DEVICES: 1e15})
# the self-audit reads every series of its pods again, their samples' timestamps among them
SAMPLE = Family("kube-state-metrics", "a sample the self-audit reads again", _KSM_FIX, {DEVICES: math.inf})


class ImpossibleFigure(RunFailed):
    """A store answered a figure its family cannot hold; the day is refused before anything is written."""

    def __init__(self, cluster: str, family: Family, labels: Mapping[str, str], value: float, times: float,
                 day: date | None = None, culprit: str = ""):
        self.cluster, self.family, self.labels, self.value, self.times = cluster, family, labels, value, times
        self.culprit = culprit
        where = f"cluster {cluster}" + (f" on {day}" if day else "")
        summed = f" summed over {times:g} instants" if times != 1 else ""
        # what is wrong and its fix, without the refusal: where a figure is shown only, what the pages say
        self.reason = (f"{labelled(family.series, labels)} is {written(value)}{summed}, which {family.what} cannot be "
                       f"(a finite number from 0 to {family.bound(labels, times):g}); {family.fix}"
                       + (f" ({culprit})" if culprit else ""))
        super().__init__(f"{where}: {self.reason}, then run the day again; nothing was billed")

    def on(self, day: date) -> ImpossibleFigure:
        """The same refusal, naming the day (the collectors ask per chunk, the jobs know the day)."""
        return ImpossibleFigure(self.cluster, self.family, self.labels, self.value, self.times, day, self.culprit)

    def naming(self, culprit: str) -> ImpossibleFigure:
        """The same refusal, naming what made a summed figure impossible (a series and its instant), where found."""
        return ImpossibleFigure(self.cluster, self.family, self.labels, self.value, self.times, culprit=culprit)


def labelled(series: str, labels: Mapping[str, str]) -> str:
    """A series as Prometheus writes it: family{label="value", ...}."""
    shown = ", ".join(f'{name}="{text}"' for name, text in sorted(labels.items()) if name != "__name__")
    return f"{series}{{{shown}}}"


def written(value: float) -> str:
    """A figure as Prometheus writes it: NaN, +Inf, -Inf, 1e+13."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:g}"


def figure(value: str | float, family: Family, labels: Mapping[str, str], cluster: str, times: float = 1.0) -> float:
    """A sample value of an answer as a number, or ImpossibleFigure: finite, at least 0 and at most the family's
    bound for the series' resource (`times`: instants the store summed it over). A family whose +Inf means unset
    gives math.inf for it."""
    number = float(value)
    if family.infinite_is_unset and number == math.inf:
        return number
    if not (math.isfinite(number) and 0 <= number <= family.bound(labels, times)):
        raise ImpossibleFigure(cluster, family, labels, number, times)
    return number
