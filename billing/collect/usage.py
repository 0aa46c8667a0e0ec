"""Resource-hours per namespace from kube-state-metrics (docs/spec.md "Billing arithmetic", rules 1 to 5).

What docs/spec.md defines is, per pod p and resource r,

    quantity(p, r) = sum_k request(p, r, t_k) * running(p, t_k) * step / 3600

over the step-aligned instants t_k of the day. Evaluating that product at
every instant for every pod is what makes naive exports slow on big
clusters: the join runs series x instants times. But a container's request
does not change during a pod's life, so the sum factors into

    request(p, r) * (number of instants at which p is Running)

and only the Running series has to be evaluated instant by instant, while
requests and the pod's node are read as raw samples. kube-state-metrics
writes that series as 1 while the pod is Running and 0 otherwise, so the
count is a plain sum over a subquery of the bare series. (Any operator
inside the subquery, even `== 1`, makes Prometheus evaluate the whole
vector at every instant: five to seven times slower.) That is the *fast*
path below. It asks three things per chunk: each pod's request per resource,
each pod's node and priority class (and workload and cost labels), and each
pod's Running instants in every hour of the chunk (one range query), and
multiplies and sums them per key here. Joined on the server, as one query,
the store read the Running series again for waste, which needs it per hour,
and the CPU requests a third time; asked apart, waste takes both from the
usage (ClusterUsage.pod_hours), and the store evaluates less: the
50,000-pod day of bench/collect_bench.py cost Prometheus 59 s of CPU instead
of 82 (docs/performance.md).

The factoring is exact only while a pod's requests and its node's GPU-model
label stay constant and its Running series is 0 or 1. Each chunk of the day
therefore first asks which pods had a request change (in-place pod resize),
a Running value other than 0 or 1, or ran on a node whose label changed;
those few pods are left out of the fast path and evaluated with the *exact*
query instead: the literal per-instant product, one range query restricted
to their uids. It costs Prometheus about twenty times more per pod than the
fast path, which is why it is kept for the pods that need it. Both paths
are tested against an independent reference computation.

The queries of one chunk, in order: GPU models per node, Running pods (for
the log, and whether exporters copied them), pods needing the exact path,
instants with data (coverage), pods on relabelled nodes (only if there are
such nodes), top-level controllers (with a breakdown), the fast path's
three (the Running instants' query counts each pod's Pending instants per
hour too), then what pods bound to a node held before running (only if
some pod on a node was Pending: `_held`): pods on no node at some sample,
the instants at which those of them that were also on a node were Pending
there, and why the held pods waited, per hour in which some were held;
exact (only if some pod needs it, and its Pending instants where it held
something). Pods are listed in matchers as
plain alternatives (`one_of`) that Prometheus looks up in its index; the
exact query is asked in pieces of the pod list that each stay within
promql.QUERY_BYTES. The fast path names no pods: it asks for all of
them, and leaves out the exact path's here. How a value at an
instant and a rate are written depends on the store (stores.Engine), and
which labels hold a pod's namespace, pod, container and node on how it was
scraped (stores.FamilyLabels); docs/stores.md explains both.

Chunks: the day is cut into pieces of CHUNK_INSTANTS instants (6 hours at a
60 s step), two evaluated at a time, which keeps every query far below
Prometheus' default limits (11,000 points per series, 50 million samples,
2 minutes) on clusters with tens of thousands of pods. The Running
instants' subquery holds a sample per pod and instant, so where the most pods listed at
once (Store.busiest) would make that more than chunks.SAMPLES_PER_QUERY (a
fifth of the 50 million), the chunks are as many whole hours as keep within
it: 3 hours for 48,000 pods. bench/collect_bench.py measures all this;
docs/performance.md has the figures.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import pandas as pd

from billing import frames
from billing.collect.asking import NodeKinds, TopControllers, at_times, map_chunks
from billing.collect.chunks import HOUR, Chunk, chunks, hour_groups
from billing.collect.context import ClusterDay
from billing.collect.figures import (
    EXPORTERS,
    INSTANTS,
    REASON_INSTANTS,
    REQUESTS,
    RUNNING_INSTANTS,
    ImpossibleFigure,
    figure,
)
from billing.collect.preflight import KIND_PODS, OWNERS, Seen, first_pods
from billing.collect.prometheus import PrometheusError, PrometheusSource
from billing.collect.promql import (
    APP_REQUESTS,
    DRA_HELD,
    GPU_UTILISATION,
    INIT_INFO,
    INIT_REQUESTS,
    INIT_RUNNING,
    INITIALISING,
    POD_LABELS,
    QUERY_BYTES,
    SCHEDULED,
    SCHEDULER_REQUESTS,
    SIDECAR,
    WAITING,
    WHOLE_GPU,
    GpuResources,
    Queries,
    fits,
    in_pieces,
    node_matcher,
    one_of,
    quote,
)
from billing.collect.stores import DEFAULT_STORE, Store
from billing.config import DRA_GPU, ClusterConfig, kube_label
from billing.days import BillingDay
from billing.resources import mig_resource, single_strategy_slice

log = logging.getLogger(__name__)

GIB = 2**30
# what GPU rows held, below the usage's `gpu`: resource as kube-state-metrics names it (nvidia_com_mig_1g_10gb),
# held_hours in its own units (slice-hours, replica-hours), gpu_hours the physical-GPU-hours billed for them
POD_COLUMNS = ["pod", "uid"]
HIGHEST = "highest"  # running_pods' label of the highest value a pod's Running series had
# the same usage below the namespace: per workload (asking.TopControllers) and cost labels, a JSON object
# of every configured cost label (ledger.py's `labels` column), with the usage's other columns
# resource-hours of one namespace-day that no cluster has (4e10 cores or GiB all day); with prices below
# 1e9 per unit the cost stays far inside what reports can show as money
HIGHEST_QUANTITY = 1e12


@dataclass(frozen=True)
class ClusterUsage:
    """One cluster-day: resource-hours per namespace, resource, GPU model, priority class and pool."""

    cluster: str
    usage: pd.DataFrame  # frames.USAGE.columns; resource is cpu, memory or gpu; priority_class from kube_pod_info;
    # pool: the reserved pool of the pod's node, '' when none
    pods: int  # distinct pods seen Running during the day
    queries: int
    coverage: float  # share of the day's instants at which kube-state-metrics data was there
    holdings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=frames.GPU_HELD.columns))  # GPU resources
    running: frozenset[str] = frozenset()  # their uids
    exact: frozenset[str] = frozenset()  # uids of the pods evaluated instant by instant
    # frames.WORKLOAD_USAGE.columns, summing to `usage` per namespace, resource, GPU model, priority class and pool;
    # None when workloads were not collected
    workloads: pd.DataFrame | None = None
    # each chunk's (namespace, pod) -> workload, in the day's order, when workloads were collected: waste per
    # workload takes its pods to the workloads the bill charges them to, rather than asking again
    pod_workloads: tuple[dict[tuple[str, str], str], ...] = ()
    copies: bool = False  # some pod was reported by several exporters (kube-state-metrics replaced, HA, resharded)
    # per pod and hour: Running instants and CPU request, which waste takes rather than asking again
    pod_hours: pd.DataFrame = field(default_factory=frames.POD_HOURS.empty)
    # what pods bound to a node held while Pending, per workload ('' when workloads were not collected) and reason:
    # billed in `usage` too where the cluster charges it
    bound_pending: pd.DataFrame = field(default_factory=frames.BOUND_PENDING.empty)
    seen: Seen = Seen()  # what the answers showed of the families the preflight asks about: not asked again

    def __post_init__(self) -> None:
        frames.USAGE.check(self.usage, f"usage of cluster {self.cluster}")
        frames.POD_HOURS.check(self.pod_hours, f"Running pod-hours of cluster {self.cluster}")
        frames.GPU_HELD.check(self.holdings, f"GPU holdings of cluster {self.cluster}")
        frames.BOUND_PENDING.check(self.bound_pending, f"bound Pending usage of cluster {self.cluster}")
        if self.workloads is not None:
            frames.WORKLOAD_USAGE.check(self.workloads, f"workload usage of cluster {self.cluster}")

    def billed(self) -> ClusterUsage:
        """The usage without what only the collection reads (waste's pod-hours, the pods' workloads per chunk for
        storage and waste, the Running and exact pods for the self-audit): the bill, the ledger and the pages do
        not, and a big cluster's day would hold them through all three (50,000 pods: about 20 MB of small objects,
        docs/performance.md "The night's resident size")."""
        return replace(self, pod_hours=frames.POD_HOURS.empty(), pod_workloads=(), running=frozenset(),
                       exact=frozenset())


POD = ", ".join(POD_COLUMNS)  # the labels that keep results apart per pod (the self-audit asks so)


class UsageQueries(Queries):
    """The queries of one chunk's usage: the fast path, the exact path, and what decides between them.

    With `cost_labels` given (workloads enabled; it may be empty) every result is also broken down by
    the pod's workload and `label_<name>` of each cost label (`breakdown`)."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: GpuResources, chunk: Chunk, store: Store = DEFAULT_STORE,
                 cost_labels: Sequence[str] | None = None):
        super().__init__(cluster, gpu_resources, chunk, store)
        self.cost_labels = None if cost_labels is None else list(cost_labels)
        self.label_keys = [kube_label(name) for name in self.cost_labels or []]
        # the labels a breakdown adds to every result
        self.breakdown_keys = "" if self.cost_labels is None else ", ".join(["workload", *self.label_keys])

    # `max by` everywhere below drops the scrape's own labels (instance, job),
    # so duplicate scrapes of kube-state-metrics replicas are not counted twice.

    def requested(self) -> str:
        """Per (namespace, pod, uid, resource): the pod's request by docs/spec.md rule 3, each series' highest sample
        in the chunk; the same at every instant but for the pods `needs_exact` finds."""
        return self.reserved(self.highest)

    def pod_info(self) -> str:
        """Per pod (namespace, pod, uid) on a node in the chunk, value 1: its `node` and `priority_class`, and with a
        breakdown its `workload` and `label_<name>` of each cost label."""
        if self.breakdown_keys:
            return self._with_labels(self.workload_of(keep="node, priority_class"), "")
        node = self.ksm.plain(f"max_over_time({self.pod_node()}[{self.raw}])")
        return f"group by (namespace, pod, uid, node, priority_class) ({node})"

    def breakdown(self, pods: str = "") -> str:
        """Per pod (namespace, pod, uid), value 1: its `workload` one step up (Queries.workload_of, which
        TopControllers completes) and `label_<name>` of each cost label, '' where the pod has none."""
        return self._with_labels(self.workload_of(pods), pods)

    def _with_labels(self, per_pod: str, pods: str) -> str:
        """`per_pod` (one series per uid) with `label_<name>` of each cost label. Where a pod's labels changed
        within the chunk, the label set seen for the most samples wins (as for its workload). Labels are joined
        on the uid alone, so their series need no renamed labels put back."""
        if not self.label_keys:
            return per_pod
        keys = ", ".join(self.label_keys)
        labels = f"count_over_time({self.series('kube_pod_labels', pods)}[{self.raw}])"
        pods_seen = f"max_over_time({self.series('kube_pod_info', pods)}[{self.raw}])"
        return (f"({per_pod}\n  * on (uid) group_left ({keys})\n"
                f"    (group by (uid, {keys}) (topk by (uid) (1, {labels})) or on (uid) group by (uid) ({pods_seen})))")

    def needs_exact(self, copies: bool = False) -> str:
        """Pods the fast path would get wrong: a request changed near or in the chunk (an in-place
        resize of an app container, or with `requests: pod` of a sidecar; a pod's other init containers and
        its overhead cannot change), or the Running series holds a negative value (one above 1, or other than 1 at
        its highest, `running_pods` shows).
        A request that varied in the window has a spread; one that did not has exactly none on both
        engines. (Not `changes()`: MetricsQL counts a change against the sample before the window.
        Not `max_over_time != min_over_time`: as exact, but twice the work on Prometheus.) With `copies`
        (several exporters in the chunk) a request must also agree between a container's copies, which no
        one series' spread shows (a pod resized while kube-state-metrics was replaced): then the highest
        and lowest of all its copies are compared after all."""
        families = [APP_REQUESTS] if self.rule == "containers" else [APP_REQUESTS, INIT_REQUESTS]

        def changed(family: str) -> str:
            requests = self.requests(family=family)
            if not copies:
                return f"stddev_over_time({requests}[{self.raw}]) > 0"

            def extreme(over: str) -> str:
                spread = self.ksm.plain(f"{over}_over_time({requests}[{self.raw}])", ("container",))
                return f"{over} by (uid, container, resource) ({spread})"
            return f"{extreme('max')} != {extreme('min')}"
        scheduler = f"\n  or {self.scheduler_disagrees()}" if self.scheduled else ""
        scheduler += f"\n  or {self.dra_holders()}" if self.dra else ""
        return f"""
group by (uid) (
    {" or ".join(changed(family) for family in families)}{scheduler}
  or min_over_time({self.running()}[{self.raw}]) < 0
)"""

    def scheduler_disagrees(self) -> str:
        """Pods (a series per uid) for which kube-scheduler's figure is not simply kube-state-metrics' over the
        chunk: it differs from what rule 3 makes of kube-state-metrics' series (pod-level resources, init
        containers declared before a sidecar), or it changed. The fast path reads kube-state-metrics alone,
        which is right for every other pod at every instant, with or without the scheduler's series."""
        scheduler = self.scheduler_requests(self.highest)
        reserved = self.reserved(self.highest, resources=one_of(SCHEDULED))
        spread = self.scheduler.plain(f"stddev_over_time({self.series(SCHEDULER_REQUESTS, f'resource=~{quote(one_of(SCHEDULED))}')}[{self.raw}])", POD_LABELS)
        changed = self.of_uids(f"max by (namespace, pod) ({spread}) > 0", self.highest, "", "")
        return f"({scheduler}) != ({reserved}) or (({scheduler}) unless ({reserved})) or {changed}"

    def dra_holders(self) -> str:
        """Pods dcgm-exporter attributes a GPU to through DRA in the chunk: a shared GPU's shares change whenever
        another pod starts or stops holding it, which no figure over the chunk shows."""
        held = self.dcgm.plain(self.highest(self.series(GPU_UTILISATION, DRA_HELD, WHOLE_GPU)), POD_LABELS)
        return self.of_uids(f"group by (namespace, pod) ({held})", self.highest, "", DRA_GPU)

    def exact_pods(self, relabelled: list[str], copies: bool = False) -> str:
        """The uids of every pod the exact path evaluates."""
        needs = self.needs_exact(copies)
        return f"({needs} or {self.pods_on(relabelled)})" if relabelled else needs

    def pods_on(self, nodes: list[str]) -> str:
        """Pods on the given nodes during the chunk."""
        return f"group by (uid) (max_over_time({self.pod_node(nodes=node_matcher(nodes, self.ksm.node))}[{self.raw}]))"

    def covered_instants(self) -> str:
        """At how many of the chunk's instants any kube-state-metrics series was visible:
        fewer than all means Prometheus did not scrape it for a while, and pods then were not seen."""
        return f"count_over_time(count({self.latest(self.node_labels())})[{self.instants}:{self.step}])"

    def running_pods(self) -> str:
        """Per pod Running in the chunk or the lookback before it (its uid, for the log's pod count and the
        self-audit's sample) and the highest value a Running series of it had (`highest`): how many of its series
        (exporters) had that one. kube-state-metrics writes 1; a pod with any other highest is evaluated instant by
        instant, so that `needs_exact` need not read the Running series for it again."""
        return f'count_values by (uid) ("{HIGHEST}", max_over_time({self.running()}[{self.raw}]) != 0)'

    def unbound(self) -> str:
        """The uids of pods on no node at some sample the chunk's instants can see (a kube_pod_info series with an empty
        node: not yet scheduled; raw samples, as cheap as a query gets). Of the pods with Pending instants, only those
        that also were on a node are asked `bound_pending`: for every other pod on a node, its phase and kube_pod_info
        series come from the same scrapes, so it was on its node at each instant it was Pending."""
        unscheduled = self.series("kube_pod_info", f'{self.ksm.node}=""')
        return f"group by (uid) (max_over_time({unscheduled}[{self.raw}]))"

    def pending(self, pods: str) -> str:
        """Per pod (namespace, pod, uid), value 1 at each instant at which it is Pending, its copies once."""
        return f"max by (namespace, pod, uid) ({self.ksm.plain(self.latest(self.running(pods, 'Pending')))}) == 1"

    def bound_pending(self, pods: str) -> str:
        """Per pod (namespace, pod, uid), value 1 at each instant at which it is Pending and bound to a node (a
        kube_pod_info series of it with a node visible), its copies once: asked as a range query over the chunk, which
        the store answers for those pods and instants only (docs/spec.md "Rule 2: running")."""
        bound = f"group by (namespace, pod, uid) ({self.ksm.plain(self.latest(self.pod_node(pods)))})"
        return f"{self.pending(pods)} and on (namespace, pod, uid) {bound}"

    def waiting(self, pods: str) -> str:
        """Per pod (namespace, pod, uid) and `reason`, value 1 at each instant at which it is Pending: INITIALISING while
        an init container other than a sidecar runs, and each reason an app container waits for (its copies once).
        A Running pod's waiting containers (CrashLoopBackOff) are no reason of anything held before running."""
        ksm, latest, keys = self.ksm, self.latest, "namespace, pod, uid, container"

        def per_container(metric: str, *matchers: str, by: str = "") -> str:
            return f"max by ({keys}{by}) ({ksm.plain(latest(self.series(metric, *matchers, pods)), (*POD_LABELS, 'container'))})"
        init = f"({per_container(INIT_RUNNING)} == 1) unless on ({keys}) {per_container(INIT_INFO, SIDECAR)}"
        initialising = f'label_replace(group by (namespace, pod, uid) ({init}), "reason", "{INITIALISING}", "", "")'
        reasons = f"{initialising} or group by (namespace, pod, uid, reason) ({per_container(WAITING, by=', reason')} == 1)"
        return f"({reasons}) and on (namespace, pod, uid) {self.pending(pods)}"

    def reason_signals(self, seconds: int) -> str:
        """Per init container other than a sidecar (`reason` INITIALISING) and per app container and the reason it
        waits for: at how many of the instants in the `seconds` that end at the time asked its series was 1, where it
        was at some. Counted per hour in one read, as the Running pass counts the phases, with nothing but the
        comparison inside the subquery (a join there costs the store a hash of every pod at every instant: twice
        what asking the held pods' hours instant by instant costs); `_proven_reasons` says what the counts prove."""
        keys, window = "namespace, pod, uid, container", f"[{self.instants_in(seconds)}:{self.step}]"

        def counted(metric: str) -> str:
            return self.ksm.plain(f"sum_over_time(({self.latest(self.series(metric))} == 1){window}) != 0",
                                  (*POD_LABELS, "container"))
        sidecars = self.ksm.plain(f"max_over_time({self.series(INIT_INFO, SIDECAR)}[{self.raw_in(seconds)}])",
                                  (*POD_LABELS, "container"))
        init = f"{counted(INIT_RUNNING)} unless on ({keys}) {sidecars}"
        return f'label_replace({init}, "reason", "{INITIALISING}", "", "") or {counted(WAITING)}'

    def exact(self, pods: str, relabelled: list[str], by_pod: bool = False, phase: str = "Running") -> str:
        """The literal per-instant product, for range queries. Node labels (GPU model, pool) are
        read at every instant only for relabelled nodes (a node's newest label set wins; "" without
        one); on other nodes they are constant, and the caller maps the node to them. `phase` Pending: what
        pods bound to a node (kube_pod_info's node) held while Pending (docs/spec.md "Rule 2: running")."""
        ksm, latest = self.ksm, self.latest
        return f"""
sum by (namespace, node, resource, priority_class, {self.node_keys}{", " + POD if by_pod else ""}) (
    {self.effective(latest, pods)}
  * on (namespace, pod, uid) group_left (node, priority_class) (
        max by (namespace, pod, uid) ({ksm.plain(latest(self.running(pods, phase)))} == 1)
      * on (namespace, pod, uid) group_left (node, priority_class)
        max by (namespace, pod, uid, node, priority_class) ({ksm.plain(latest(self.pod_node(pods)))})
    )
  * on (node) group_left ({self.node_keys}) {self.newest_model(self.pod_node(pods), node_matcher(relabelled, ksm.node))}
)"""


@dataclass(frozen=True)
class _ChunkResult:
    usage: pd.DataFrame  # frames.USAGE.columns (resource as KSM names it), after POD_COLUMNS when asked by pod, and
    # held: hours in the resource's own units
    pods: frozenset[str]
    exact: frozenset[str]
    covered: int  # instants with kube-state-metrics data
    instants: int
    workloads: dict[tuple[str, str], str] | None  # with a breakdown: (namespace, pod) -> its workload
    copies: bool  # some pod was reported by several exporters
    pod_hours: pd.DataFrame  # frames.POD_HOURS.columns: for waste
    pending: pd.DataFrame  # as `usage`, with the reason before the quantity: what pods bound to a node held while Pending
    seen: Seen


def _uids(answer: list[dict]) -> frozenset[str]:
    return frozenset(series["metric"].get("uid", "") for series in answer)


def _chunk_usage(source: PrometheusSource, queries: UsageQueries, chunk: Chunk, by_pod: bool = False) -> _ChunkResult:
    """The fast path for most pods (each pod's request, Running instants per hour, node and priority class, and with a
    breakdown its workload and labels, asked apart and joined here), exact range queries for the few where factoring
    is wrong. With a breakdown, the exact path's rows are asked per pod and given each pod's workload and labels from
    `breakdown`."""
    at = chunk.last
    nodes = NodeKinds(source, queries, at)
    relabelled = nodes.relabelled
    copies_of: dict[str, float] = {}  # uid -> how many exporters reported the pod Running
    odd: set[str] = set()  # pods whose Running series held another highest value than 1: counted instant by instant
    for series in source.instant(queries.running_pods(), at):
        uid = series["metric"].get("uid", "")
        if series["metric"].get(HIGHEST) == "1":
            copies_of[uid] = figure(series["value"][1], EXPORTERS, series["metric"], queries.cluster)
        else:
            odd.add(uid)
    running = frozenset(copies_of)
    copies = any(count > 1 for count in copies_of.values())
    if copies:
        log.info("cluster %s: pods reported by several exporters in the chunk ending %s (kube-state-metrics "
                 "replaced, an HA pair or a reshard): each counted once per instant", queries.cluster,
                 datetime.fromtimestamp(chunk.end, timezone.utc).isoformat())
    exact_pods = _uids(source.instant(queries.needs_exact(copies), at)) | odd
    covered = sum(int(figure(series["value"][1], INSTANTS, series["metric"], queries.cluster))
                  for series in source.instant(queries.covered_instants(), at))
    if relabelled:
        exact_pods |= _uids(source.instant(queries.pods_on(relabelled), at))
    tops = TopControllers(source, queries, at) if queries.breakdown_keys else None

    def row(labels: dict[str, str], instants: float) -> tuple:
        model, pool, gpus_per_unit = nodes.priced(labels)
        pod = tuple(labels.get(key, "") for key in POD_COLUMNS) if by_pod else ()
        namespace = labels.get("namespace", "")
        below = (tops.workload(namespace, labels.get("workload", "")), _labels_json(queries, labels)) if tops else ()
        return (*pod, namespace, *below, labels.get("resource", ""), model,
                labels.get("priority_class", ""), pool, instants * gpus_per_unit, instants)

    info = queries.pod_info()
    if queries.breakdown_keys and not fits(info):
        raise PrometheusError(f"the usage query of cluster {queries.cluster} with {len(queries.label_keys)} cost labels "
                              f"is longer than the {QUERY_BYTES} bytes every store accepts; list fewer cost_labels")
    # one answer at a time, each made small before the next: the requests are the largest (165,000 series a chunk at
    # 250,000 pods), and two chunks are asked at once
    pod_hours, pending_hours = _running_hours(source, queries, chunk, copies, exact_pods)
    pods = {series["metric"].get("uid", ""): series["metric"] for series in source.instant(info, at)}
    requests = source.instant(queries.requested(), at)
    seen = _seen(queries, running, pods, requests, tops)
    workloads = _pod_workloads(pods, tops) if tops else None
    running_instants = pod_hours.groupby("uid", sort=False)["instants"].sum().to_dict()  # per uid, over the chunk
    held = _held(source, queries, chunk, pending_hours, frozenset(pods), exact_pods)
    del pending_hours
    rows, cpu, pending = [], {}, []
    for series in requests:  # request x Running (and bound Pending) instants, per pod the factoring is right for
        labels = series["metric"]
        uid, request = labels.get("uid", ""), figure(series["value"][1], REQUESTS, labels, queries.cluster)
        if labels.get("resource") == "cpu":
            cpu[uid] = request
        if uid not in pods or uid in exact_pods:
            continue
        kept = {**pods[uid], "resource": labels.get("resource", "")}
        if running_instants.get(uid):
            rows.append(row(kept, request * running_instants[uid]))
        for reason, instants in held.instants.get(uid, Counter()).items():
            pending.append(_with_reason(row(kept, request * instants), reason))
    del requests, pods

    if exact_pods:
        log.info("%d pods resized, on relabelled nodes (%s) or with odd Running values: evaluated instant by instant",
                 len(exact_pods), ", ".join(relabelled[:3]) or "none")
        for labels, values in _exact(source, queries, chunk, exact_pods, relabelled, by_pod):
            rows.append(row(labels, sum(figure(v, REQUESTS, labels, queries.cluster) for _, v in values)))
        if exact_held := exact_pods & held.instants.keys():
            for labels, values in _exact(source, queries, chunk, frozenset(exact_held), relabelled, True, "Pending"):
                uid = labels.get("uid", "")
                by_reason: dict[str, float] = {}
                for t, value in values:
                    reason = held.reasons.get((uid, int(t)), "")
                    by_reason[reason] = by_reason.get(reason, 0.0) + figure(value, REQUESTS, labels, queries.cluster)
                pending += [_with_reason(row(labels, instants), reason) for reason, instants in by_reason.items()]
    instants = (chunk.end - chunk.start) // chunk.step
    columns = [*POD_COLUMNS, *frames.USAGE.columns] if by_pod else frames.USAGE.columns
    if queries.breakdown_keys:
        at = columns.index("resource")  # workload and labels follow the namespace, as in frames.WORKLOAD_USAGE.columns
        columns = [*columns[:at], "workload", "labels", *columns[at:]]
    usage, held_pending = _hours(rows, chunk.step, columns), _hours(pending, chunk.step, [*columns[:-1], *PENDING_KEYS])
    return _ChunkResult(_per_key(usage, columns), running, exact_pods, covered, instants, workloads, copies,
                        pod_hours.assign(cpu=pod_hours["uid"].map(cpu)),
                        _per_key(held_pending, [*columns[:-1], *PENDING_KEYS]), seen)


PENDING_KEYS = ["reason", "quantity"]  # what a row of bound-Pending usage has where a usage row has its quantity


def _pod_workloads(pods: dict[str, dict[str, str]], tops: TopControllers) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the workload the bill charges the pod to (`pods`: per uid, its labels with the controller
    kube_pod_info names); a name two pods of different workloads used within the chunk counts for the first of them
    in sorted order."""
    workloads: dict[tuple[str, str], str] = {}
    for labels in pods.values():
        pod = (labels.get("namespace", ""), labels.get("pod", ""))
        workload = sys.intern(tops.workload(pod[0], labels.get("workload", "")))  # one string per workload, all day
        workloads[pod] = min(workload, workloads.get(pod, workload))
    return workloads


def _with_reason(row: tuple, reason: str) -> tuple:
    """A usage row (its quantity and hours in the resource's units last) with the reason before those two."""
    return (*row[:-2], reason, *row[-2:])


def _seen(queries: UsageQueries, running: frozenset[str], pods: dict[str, dict[str, str]], requests: list[dict],
          tops: TopControllers | None) -> Seen:
    """What the chunk's answers show of the families the preflight asks about (preflight.presence_query's branch
    names): a pod Running (so the phase series with uids), a pod on a node (with a breakdown, of which controllers,
    and the owners of ReplicaSets and Jobs that have one), and with `requests: containers` the requests, which are
    then the app containers' alone."""
    found = {"phase", "ran"} if running - {""} else set()
    if pods.keys() - {""}:
        kinds = {workload.split("/")[0] for labels in pods.values() if (workload := labels.get("workload"))}
        found |= {"pod_info", "pod_node"} | {KIND_PODS[kind] for kind in kinds & KIND_PODS.keys()}
    owned = {workload.split("/")[0] for _, workload in tops.tops} if tops else set()
    found |= {OWNERS[kind] for kind in owned & OWNERS.keys()}
    resources = frozenset(series["metric"].get("resource", "") for series in requests) - {""}
    if resources and queries.rule == "containers":
        found.add("requests")
    return Seen(frozenset(found), resources, first_pods(series["metric"].get("uid", "") for series in requests))


@dataclass(frozen=True)
class _Held:
    """What pods bound to a node held before running in one chunk (docs/spec.md "Rule 2: running")."""

    instants: dict[str, Counter[str]]  # uid -> reason -> instants, of each pod bound and Pending at some instant
    reasons: dict[tuple[str, int], str]  # (uid, instant) -> its reason, where it had one: what the exact path looks up


def _held(source: PrometheusSource, queries: UsageQueries, chunk: Chunk, pending: dict[str, dict[int, float | None]],
          on_nodes: frozenset[str], exact: frozenset[str]) -> _Held:
    """Of the pods on a node in the chunk (`on_nodes`), those Pending at some instant (`pending`: per hour of the chunk,
    from the Running pass) and why (INITIALISING where an init container other than a sidecar ran, else the first by
    name of the reasons its app containers waited for, else ''). A pod on no node at some sample of the chunk (it
    waited unscheduled, then was bound), or whose Pending instants are no count, is asked when it was Pending on its
    node, instant by instant (`bound_pending`); every other one was on its node whenever it was Pending (the same
    scrapes). Why: from counts per hour (`_proven_reasons`) where they prove it, else asked instant by instant, as
    for every hour of the pods the exact path evaluates (`exact`: it looks their instants up). The bill
    multiplies their requests by these instants as it does by the Running ones."""
    candidates = on_nodes & pending.keys()
    if not candidates:
        return _Held({}, {})
    unbound = _uids(source.instant(queries.unbound(), chunk.last))
    bound_asked = frozenset(uid for uid in candidates if uid in unbound or None in pending[uid].values())
    bound: dict[str, list[int]] = {}  # the bound Pending instants of the pods asked instant by instant
    for query in in_pieces(bound_asked, queries.bound_pending):
        for series in source.range(query, chunk.start, chunk.last, chunk.step):
            bound.setdefault(series["metric"].get("uid", ""), []).extend(int(t) for t, _ in series["values"])
    # per pod, its held instants in each hour of the chunk (by index)
    held_in: dict[str, dict[int, float]] = {uid: {hour: n or 0 for hour, n in pending[uid].items()}
                                            for uid in candidates - bound_asked}
    held_in |= {uid: dict(Counter((t - chunk.start) // HOUR for t in instants)) for uid, instants in bound.items()}
    proven = _proven_reasons(source, queries, chunk, {uid: hours for uid, hours in held_in.items() if uid not in exact})
    in_hour: dict[int, set[str]] = {}  # hour of the chunk -> the pods whose reasons in it are asked instant by instant
    for uid, hours in held_in.items():
        for hour in (hour for hour, instants in hours.items() if instants and (uid, hour) not in proven):
            in_hour.setdefault(hour, set()).add(uid)
    hours_of = _hours_of(chunk)
    reasons = _reasons(source, queries, {hours_of[hour]: frozenset(uids) for hour, uids in sorted(in_hour.items())})
    said: dict[str, Counter[str]] = {uid: Counter() for uid in held_in}
    for (uid, _), reason_instants in proven.items():
        said[uid].update(reason_instants)
    for uid, instants in bound.items():  # asked at the pod's Pending instants: those it was bound at count
        said[uid].update(reasons.get((uid, t), "") for t in instants if (uid, (t - chunk.start) // HOUR) not in proven)
    for (uid, _), reason in reasons.items():  # every other pod was bound at each of its Pending instants
        if uid not in bound:
            said[uid][reason] += 1
    held = {uid: said[uid] + Counter({"": int(sum(hours.values())) - said[uid].total()}) for uid, hours in held_in.items()}
    return _Held(held, reasons)


def _proven_reasons(source: PrometheusSource, queries: UsageQueries, chunk: Chunk,
                    held: dict[str, dict[int, float]]) -> dict[tuple[str, int], Counter[str]]:
    """(pod, hour of the chunk) -> instants per reason, for each hour in which the pod held something (`held`: its
    instants Pending on its node) and the counts of its containers' series in that hour
    (`UsageQueries.reason_signals`) prove why at each of them: no app container waited for anything (a wait may
    fall at an instant the pod ran, CrashLoopBackOff, or was not yet bound), and its init containers other than
    sidecars ran at most as many instants as it held. Kubernetes runs those one at a time, on the pod's node and
    only while it is Pending, so each such instant is one it held, an INITIALISING one, and its other held instants
    have no reason. Every other hour is asked instant by instant, as is one in which a container has several
    series (copies from several exporters, each counting its own instants)."""
    if not held:
        return {}
    initialising: Counter[tuple[str, int]] = Counter()
    unproven: set[tuple[str, int]] = set()
    containers: set[tuple[str, int, str]] = set()
    ranged = True
    hours = _hours_of(chunk)
    for group in hour_groups(hours, len(hours)):
        ends = [float(hour.last) for hour in group]
        answer, ranged = at_times(source, queries.reason_signals(group[0].end - group[0].start), ends, ranged)
        for labels, values in answer:
            for t, value in values:
                key = (labels.get("uid", ""), (int(t) - chunk.start) // HOUR)
                container = (*key, labels.get("container", ""))
                if labels.get("reason") != INITIALISING or container in containers:
                    unproven.add(key)
                containers.add(container)
                initialising[key] += int(figure(value, REASON_INSTANTS, labels, queries.cluster))
    return {(uid, hour): Counter({INITIALISING: initialising[(uid, hour)]} if initialising[(uid, hour)] else {})
            for uid, hours in held.items() for hour, instants in hours.items()
            if instants and (uid, hour) not in unproven and initialising[(uid, hour)] <= instants}


def _hours_of(chunk: Chunk) -> list[Chunk]:
    """The chunk's hours, in order (a day's last may be shorter)."""
    return [Chunk(t, min(t + HOUR, chunk.end), chunk.step) for t in range(chunk.start, chunk.end, HOUR)]


def bound_pending_hours(source: PrometheusSource, queries: UsageQueries, chunk: Chunk) -> pd.DataFrame:
    """Resource-hours in billing units (resource, reason, quantity) that pods bound to a node held while Pending in
    one chunk, and (reason None) what Running pods requested, as the bill measures them: `billing check` asks the
    whole day as one chunk at a coarser step."""
    result = _chunk_usage(source, queries, chunk)
    frame = pd.concat([result.pending, result.usage.assign(reason=None)], ignore_index=True)
    return billing_units(frame, queries.fractions).groupby(["resource", "reason"], as_index=False, dropna=False)[["quantity"]].sum()


def _exact(source: PrometheusSource, queries: UsageQueries, chunk: Chunk, uids: frozenset[str], relabelled: list[str],
           by_pod: bool, phase: str = "Running") -> list[tuple[dict[str, str], list]]:
    """The exact path's answer for these pods (labels, [time, value] at each instant), asked in pieces; with a
    breakdown, each pod's labels also hold its workload and cost labels."""
    below: dict[str, dict[str, str]] = {}  # uid -> its workload and labels, with a breakdown
    if queries.breakdown_keys:
        for query in in_pieces(uids, queries.breakdown):
            below.update((s["metric"].get("uid", ""), s["metric"]) for s in source.instant(query, chunk.last))
    by_uid = by_pod or bool(queries.breakdown_keys)
    answer = []
    for exact in in_pieces(uids, lambda pods: queries.exact(pods, relabelled, by_uid, phase)):
        for series in source.range(exact, chunk.start, chunk.last, chunk.step):
            labels = series["metric"]
            if queries.breakdown_keys:  # (every billed pod has kube_pod_info, so a breakdown)
                found = below.get(labels.get("uid", ""), {"workload": f"Pod/{labels.get('pod', '')}"})
                labels = {**found, **labels}
            answer.append((labels, series["values"]))
    return answer


def _reasons(source: PrometheusSource, queries: UsageQueries, held: dict[Chunk, frozenset[str]]) -> dict[tuple[str, int], str]:
    """(uid, instant) -> why the pod was Pending then (docs/spec.md "Rule 2: running"), where its containers said:
    INITIALISING where an init container other than a sidecar ran, else the first by name of the reasons its app
    containers waited for. `held`: the pods asked about in each hour, a range query per hour (in pieces)."""
    seen: dict[tuple[str, int], set[str]] = {}
    for hour, uids in held.items():
        for query in in_pieces(uids, queries.waiting):
            for series in source.range(query, hour.start, hour.last, hour.step):
                uid, reason = series["metric"].get("uid", ""), series["metric"].get("reason", "")
                for t, _ in series["values"]:
                    seen.setdefault((uid, int(t)), set()).add(reason)
    return {key: INITIALISING if INITIALISING in reasons else min(reasons) for key, reasons in seen.items()}


def _running_hours(source: PrometheusSource, queries: UsageQueries, chunk: Chunk, copies: bool,
                   exact_pods: frozenset[str]) -> tuple[pd.DataFrame, dict[str, dict[int, float | None]]]:
    """Per pod and hour of the chunk, the instants at which it was Running (frames.POD_HOURS without `cpu`), and per
    pod Pending at some instant, its Pending instants in each hour of the chunk (by index; None where they are no
    count): one range query per run of hours of one length, hour by hour where the store moves a range's times. The
    bill sums them per chunk and waste uses the Running ones per hour, so the phase series is read once for all. A
    pod of `exact_pods` whose Running series holds values other than 1 sums to no count of instants (docs/spec.md
    counts an instant only where the series is 1): the exact path bills it, and its hour is left out here rather
    than refused."""
    rows, ranged = [], True
    pending: dict[str, dict[int, float | None]] = {}
    hours = _hours_of(chunk)
    for group in hour_groups(hours, len(hours)):
        ends = [float(hour.last) for hour in group]
        answer, ranged = at_times(source, queries.running_instants(group[0].end - group[0].start, copies), ends, ranged)
        for labels, values in answer:
            pod = (labels.get("uid", ""), labels.get("namespace", ""), labels.get("pod", ""))
            if labels.get("phase") == "Pending":
                pending.setdefault(pod[0], {}).update(((int(t) - chunk.start) // HOUR, _count(value, labels, queries.cluster))
                                                      for t, value in values)
                continue
            for t, value in values:
                if instants := _instants(value, labels, queries.cluster, pod[0] in exact_pods):
                    rows.append((*pod, int(t), instants))
    # names as Python objects: a row points at its pod's one string (prometheus.py shares them), where pandas' own
    # strings would copy them into every row, 1.1 M rows on a 250,000-pod day
    frame = pd.DataFrame(rows, columns=frames.POD_HOURS.columns[:-1], dtype=object)
    return frame.astype({"hour": "int64", "instants": "float64"}), pending


def _instants(value: str, labels: dict[str, str], cluster: str, exact: bool) -> float:
    """A pod's Running instants in an hour, through the gate; 0 for an exact-path pod whose sum is no count."""
    try:
        return figure(value, RUNNING_INSTANTS, labels, cluster)
    except ImpossibleFigure:
        if exact:
            return 0.0
        raise


def _count(value: str, labels: dict[str, str], cluster: str) -> float | None:
    """A pod's Pending instants in an hour, or None where the sum is no count (values other than 0 and 1): then they
    are asked instant by instant, where only a 1 counts."""
    try:
        number = figure(value, RUNNING_INSTANTS, labels, cluster)
    except ImpossibleFigure:
        return None
    return number if number.is_integer() else None


def _per_key(usage: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """One row per key of the usage: the store answers per node, which the keys hold only as its GPU model and pool,
    so a big cluster's chunk comes to about half as many rows (what a day's usage holds at once: docs/performance.md)."""
    keys = columns[:-1]  # all but the quantity
    return usage.groupby(keys, as_index=False, sort=False)[["quantity", "held"]].sum()[[*keys, "quantity", "held"]]


def _labels_json(queries: UsageQueries, labels: dict[str, str]) -> str:
    """A result's cost labels as the ledger's `labels` column has them (`labels_json`)."""
    return labels_json(tuple(labels.get(key, "") for key in queries.label_keys), tuple(queries.cost_labels or ()))


@functools.lru_cache(maxsize=65536)  # a day has few distinct label sets and many rows
def labels_json(values: tuple[str, ...], names: tuple[str, ...]) -> str:
    """{cost label: value} with sorted keys, json.dumps' default separators: '{"experiment": "x1"}', '{}' for none."""
    return json.dumps(dict(zip(names, values)), sort_keys=True)


def _hours(rows: list[tuple], step: int, columns: list[str]) -> pd.DataFrame:
    """Rows of resource-instants as a frame of resource-hours (held: in the resource's own units)."""
    frame = pd.DataFrame(rows, columns=[*columns, "held"]).astype({"quantity": float, "held": float})
    return frame.assign(quantity=frame["quantity"] * step / 3600, held=frame["held"] * step / 3600)


def collect_cluster(context: ClusterDay, cost_labels: Sequence[str] | None = None) -> ClusterUsage:
    """Resource-hours of one cluster-day, per namespace, resource, GPU model, priority class and pool.
    `cost_labels` (workloads enabled; may be empty): the same usage also per workload and cost labels,
    from the same queries."""
    cluster, gpu_resources, store, before = context.cluster, context.gpu_resources, context.store, context.asked
    day_chunks = context.chunks()
    if len(day_chunks) > len(chunks(context.day, context.step)):
        log.info("cluster %s: up to %d pods listed at once: asked in %g-hour chunks, so that no query holds more "
                 "than a fifth of Prometheus' default --query.max-samples", cluster.name, store.busiest,
                 (day_chunks[0].end - day_chunks[0].start) / HOUR)
    results = map_chunks(lambda c: _chunk_usage(context.source, UsageQueries(cluster, gpu_resources, c, store,
                                                                             cost_labels), c),
                         day_chunks)
    pending = pd.concat([r.pending for r in results], ignore_index=True)
    raw = pd.concat([r.usage for r in results], ignore_index=True)
    if cluster.bound_pending == "charge":  # billed as the Running instants are (docs/spec.md "Rule 2: running")
        raw = pd.concat([raw, _per_key(pending.drop(columns="reason"), list(raw.columns[:-1]))], ignore_index=True)
    running = frozenset().union(*(r.pods for r in results))
    usage = _normalise(raw, gpu_resources)
    _refuse_more_than_any_cluster(usage, cluster.name)
    return ClusterUsage(
        cluster=cluster.name,
        usage=usage,
        pods=len(running),
        queries=context.asked - before,
        coverage=sum(r.covered for r in results) / sum(r.instants for r in results),
        holdings=_holdings(raw, gpu_resources),
        running=running,
        exact=frozenset().union(*(r.exact for r in results)),
        workloads=None if cost_labels is None else _by_workload(raw, gpu_resources),
        pod_workloads=tuple(r.workloads for r in results if r.workloads is not None),
        copies=any(r.copies for r in results),
        pod_hours=pd.concat([r.pod_hours for r in results], ignore_index=True),
        bound_pending=_normalise(pending if cost_labels is not None else pending.assign(workload=""), gpu_resources,
                                 frames.BOUND_PENDING.columns),
        seen=Seen.joined(r.seen for r in results),
    )


def _by_workload(raw: pd.DataFrame, gpu_resources: GpuResources) -> pd.DataFrame:
    """Resource-hours in billing units, one row per namespace, workload, cost labels, resource, GPU model,
    priority class and pool: the usage's rows split further."""
    frame = billing_units(raw, gpu_resources)
    summed = frame.groupby(frames.WORKLOAD_USAGE.columns[:-1], as_index=False, sort=True)[["quantity"]].sum()
    return summed[frames.WORKLOAD_USAGE.columns]


def _holdings(raw: pd.DataFrame, gpu_resources: GpuResources) -> pd.DataFrame:
    """Per namespace, GPU resource and model: hours held in the resource's units, and physical-GPU-hours.
    Slices sold as whole GPUs (MIG's single strategy) are held under their profile's resource name, as in the
    mixed strategy, so that they read as slice-hours."""
    gpus = raw[raw["resource"].isin(list(gpu_resources)) & (raw["quantity"] != 0)].copy()
    profiles = {model: mig_resource(sliced[1]) for model in gpus["gpu_model"].unique()
                if (sliced := single_strategy_slice(model))}
    sold_whole = gpus["gpu_model"].isin(list(profiles))
    gpus.loc[sold_whole, "resource"] = gpus.loc[sold_whole, "gpu_model"].map(profiles)
    summed = gpus.groupby(["namespace", "resource", "gpu_model"], as_index=False, sort=True)[["held", "quantity"]].sum()
    return summed.rename(columns={"held": "held_hours", "quantity": "gpu_hours"})[frames.GPU_HELD.columns]


def pod_usage(queries: Callable[[Chunk], UsageQueries], day: BillingDay, step: int, gpu_resources: GpuResources,
              source: PrometheusSource) -> pd.DataFrame:
    """Resource-hours per pod (POD_COLUMNS, resource, gpu_model, quantity) the way `collect_cluster` computes
    them, fast and exact path alike: what the self-audit checks, with `queries` restricted to a few pods."""
    results = map_chunks(lambda c: _chunk_usage(source, queries(c), c, by_pod=True), chunks(day, step))
    held = pd.concat([r.usage for r in results], ignore_index=True)
    # requests as the store answered them, before GPU fractions and time-slicing replicas: what the audit's instant answers give
    frame = billing_units(held.assign(quantity=held["held"]), gpu_resources)
    keys = [*POD_COLUMNS, "resource", "gpu_model"]
    return frame.groupby(keys, as_index=False, sort=True)[["quantity"]].sum()


def _refuse_more_than_any_cluster(usage: pd.DataFrame, cluster: str) -> None:
    """Resource-hours of one namespace-day beyond HIGHEST_QUANTITY: each figure passed the gate (collect/figures.py),
    but enough of them summed would be more than any cluster has, and more money than reports can show."""
    huge = usage[usage["quantity"] > HIGHEST_QUANTITY]
    if len(huge):
        first = huge.iloc[0]
        raise PrometheusError(
            f"Prometheus of cluster {cluster} returned {first['quantity']:g} {first['resource']} resource-hours for "
            f"namespace {first['namespace']!r} in one day, more than the {HIGHEST_QUANTITY:g} of any cluster; "
            "refusing to bill it")


def billing_units(raw: pd.DataFrame, gpu_resources: GpuResources) -> pd.DataFrame:
    """kube-state-metrics resources to billing resources: GiB for memory, one `gpu` for all GPU names."""
    frame = raw.copy()
    is_gpu = frame["resource"].isin(list(gpu_resources))
    frame.loc[frame["resource"] == "memory", "quantity"] /= GIB
    frame.loc[is_gpu, "resource"] = "gpu"
    frame.loc[~is_gpu, "gpu_model"] = ""
    return frame[frame["quantity"] != 0]


def _normalise(raw: pd.DataFrame, gpu_resources: GpuResources, columns: list[str] = frames.USAGE.columns) -> pd.DataFrame:
    """Resource-hours in billing units, one row per namespace, resource, GPU model, priority class and pool (the
    key `columns` names, less the quantity)."""
    frame = billing_units(raw, gpu_resources)
    return frame.groupby(columns[:-1], as_index=False, sort=True)[["quantity"]].sum().reindex(columns=columns)
