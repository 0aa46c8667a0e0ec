"""The PromQL text that collection, capacity and waste share: metric names, matchers, pod lists in pieces.

One cluster-day is asked for in chunks of step-aligned instants (chunks.py; docs/spec.md "Rule 1: sampling
instants"); each query names its series through `Queries.series`, which adds the cluster's
`selector`, and reads the chunk's instants through a subquery whose window
picks exactly them. What a query asks for lives with its caller (usage.py,
capacity.py, waste.py); how to write it safely lives here; asking it is asking.py's.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple
from urllib.parse import quote_plus

from billing.collect.chunks import Chunk
from billing.collect.prometheus import PrometheusError
from billing.collect.stores import DEFAULT_STORE, FamilyLabels, Store
from billing.config import DRA_GPU, ClusterConfig
from billing.resources import single_strategy_slice

LOOKBACK = 300  # seconds: Prometheus' default lookback delta for instant vectors
# Bytes one query may take URL-encoded: well under VictoriaMetrics' -search.maxQueryLen (16 KiB of query text,
# which URL-encoding only lengthens); prometheus.py sends every query in a form body, so no URL limit applies.
# Pod lists longer than that are asked for in pieces.
QUERY_BYTES = 12288
RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
CONTROLLER = 'owner_is_controller="true"'  # the one owner reference Kubernetes lets control an object
# kube_pod_info of a pod with a controller (or without the labels at all), and of one without
CONTROLLED, UNCONTROLLED = 'created_by_kind!="<none>"', 'created_by_kind="<none>"'
CONTROLLER_FIRST = 1e9  # added to a controller's sample count: more than any chunk has
POD_LABELS = ("namespace", "pod")  # what kube-state-metrics' pod-level series (not per container) carry to join on
# the series of docs/spec.md rule 3: app and init containers' requests, which init containers are sidecars (kube-state-metrics
# v2.11 and later say restart_policy="Always"; others say nothing), and the RuntimeClass overhead per resource
APP_REQUESTS, INIT_REQUESTS = "kube_pod_container_resource_requests", "kube_pod_init_container_resource_requests"
INIT_INFO, SIDECAR = "kube_pod_init_container_info", 'restart_policy="Always"'
OVERHEAD = {"cpu": "kube_pod_overhead_cpu_cores", "memory": "kube_pod_overhead_memory_bytes"}
# why a pod bound to a node is not Running yet (docs/spec.md "Rule 2: running"): an init container other than a sidecar
# running, or the reason an app container waits (ContainerCreating, ImagePullBackOff, CreateContainerConfigError, ...)
INIT_RUNNING, WAITING = "kube_pod_init_container_status_running", "kube_pod_container_status_waiting_reason"
INITIALISING = "InitContainersRunning"  # the reason billing gives a pod whose init containers run
# kube-scheduler's own figure (its /metrics/resources): what it reserves per pod, pod-level resources and the init
# containers' declared order included, which kube-state-metrics cannot show; named by namespace and pod, no uid.
# Read for the resources pod-level resources may set; GPUs are extended resources, only ever requested per container.
SCHEDULER_REQUESTS, SCHEDULED = "kube_pod_resource_request", ("cpu", "memory")
# dcgm-exporter's per-GPU series; with --kubernetes-enable-dra those of a GPU held through a claim carry dra_* labels
GPU_UTILISATION, DRA_HELD, WHOLE_GPU = "DCGM_FI_DEV_GPU_UTIL", 'dra_driver_name!=""', 'GPU_I_ID=""'
# persistent volumes' storage (docs/spec.md "Storage"): a claim's class and volume (volumename, '' while Pending), its
# phase and request; a volume's capacity, class and phase; and a pod whose spec mounts a claim
CLAIM_INFO, CLAIM_PHASE = "kube_persistentvolumeclaim_info", "kube_persistentvolumeclaim_status_phase"
CLAIM_REQUEST = "kube_persistentvolumeclaim_resource_requests_storage_bytes"
VOLUME_CAPACITY, VOLUME_INFO = "kube_persistentvolume_capacity_bytes", "kube_persistentvolume_info"
# kubelet's own: what a mounted claim's filesystem uses (namespace, persistentvolumeclaim), only while a pod mounts it
VOLUME_USED = "kubelet_volume_stats_used_bytes"
VOLUME_PHASE, MOUNTS = "kube_persistentvolume_status_phase", "kube_pod_spec_volumes_persistentvolumeclaims_info"
log = logging.getLogger(__name__)


def quote(value: str) -> str:
    """A PromQL string literal; any label value is safe inside it."""
    return json.dumps(value, ensure_ascii=False)


def one_of(values: Iterable[str]) -> str:
    """A regular expression matching exactly these values.

    Only RE2's special characters are escaped (re.escape also escapes "-"), so
    Prometheus recognises a plain list and looks the values up in its index
    instead of testing the expression against every value of the label.
    """
    return "|".join(RE2_SPECIAL.sub(r"\\\1", value) for value in values)


def uid_matcher(uids: frozenset[str]) -> str:
    """A matcher keeping exactly these pods."""
    return f"uid=~{quote(one_of(sorted(uids)))}"


def fits(query: str) -> bool:
    """Whether the query is within QUERY_BYTES once URL-encoded."""
    return _encoded_bytes(query) <= QUERY_BYTES


def _encoded_bytes(text: str) -> int:
    return len(quote_plus(text, safe=""))


def in_pieces(uids: Iterable[str], query: Callable[[str], str]) -> list[str]:
    """query(matcher keeping some of the pods) for pieces of the pod list that together name every
    pod once, each query within QUERY_BYTES: a day with thousands of resized pods costs more
    queries, never one that a store refuses."""
    template = query(PLACEHOLDER)
    times = template.count(PLACEHOLDER)
    room = QUERY_BYTES - _encoded_bytes(template.replace(PLACEHOLDER, ""))
    pieces: list[list[str]] = []
    used = 0
    for uid in sorted(uids):
        alone = times * _encoded_bytes(uid_matcher(frozenset([uid])))  # a piece's first pod
        more = times * _encoded_bytes("|" + quote(one_of([uid]))[1:-1])  # each further one
        if pieces and used + more <= room:
            pieces[-1].append(uid)
            used += more
            continue
        if alone > room:
            raise PrometheusError(f"a query for pod {uid} alone is longer than {QUERY_BYTES} bytes: "
                                  f"{' '.join(template.split())[:200]}")
        pieces.append([uid])
        used = alone
    return [query(uid_matcher(frozenset(piece))) for piece in pieces]


PLACEHOLDER = "\x00"  # where in_pieces puts a piece's matcher


def node_matcher(nodes: Iterable[str], label: str = "node", keep: bool = True) -> str:
    """A matcher keeping (or dropping) exactly these nodes, on the label that names them."""
    return f"{label}{'=~' if keep else '!~'}{quote(one_of(sorted(nodes)))}"


GpuResources = Mapping[str, float] | Sequence[str]  # resource -> physical GPUs per unit; a list: 1 each


def gpu_fractions(gpu_resources: GpuResources) -> dict[str, float]:
    """The mapping form of gpu_resources, as the config has it; a list of names stands for 1 each."""
    return dict(gpu_resources) if isinstance(gpu_resources, Mapping) else dict.fromkeys(gpu_resources, 1.0)


class NodeKind(NamedTuple):
    """What a node's labels say about the price of what runs on it."""

    model: str  # GPU model ('' without the label)
    pool: str  # reserved pool ('' for none)
    replicas: float  # time-slicing replicas of each GPU (1 without the label)


@functools.cache  # warns once per odd value, not once per series and chunk
def _replicas(label: str) -> float:
    """A replicas label's value; one that is no positive whole number bills each replica as a whole GPU."""
    if label.isdigit() and int(label) > 0:
        return float(label)
    if label:
        log.warning("GPU replicas label value %r is no positive whole number: each replica billed as a whole GPU",
                    label)
    return 1.0


class Queries:
    """The PromQL text for one cluster and one chunk of the day."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: GpuResources, chunk: Chunk,
                 store: Store = DEFAULT_STORE):
        self.cluster = cluster.name  # for the sentence that refuses an impossible sample
        self.engine = store.engine
        self.latest = store.engine.latest  # a series' value at each instant, written for this engine
        # the label names of each metric family; `.plain(expression)` gives the plain names back
        self.ksm, self.dcgm, self.cadvisor, self.scheduler = (store.labels.kube_state_metrics, store.labels.dcgm,
                                                              store.labels.cadvisor, store.labels.scheduler)
        self.extra = cluster.prometheus.selector.strip()
        self.model_labels = [cluster.gpu_model_label, *cluster.vendor_model_labels]
        self.replicas_label = cluster.gpu_replicas_label or ""
        self.pools = cluster.reserved_pools
        self.fractions = gpu_fractions(gpu_resources)
        # node labels that decide a node's price: GPU model, time-slicing replicas, and reserved pool where
        # clusters have them
        self.node_keys = ", ".join([*self.model_labels, *([self.replicas_label] if self.replicas_label else []),
                                    *([self.pools.node_label] if self.pools else [])])
        self.resources = one_of(["cpu", "memory", *gpu_resources])
        self.rule = cluster.requests or "pod"  # docs/spec.md rule 3; a cluster outside a Config has the default
        # kube-scheduler's figures, where its /metrics/resources is scraped, take precedence (docs/spec.md rule 3)
        self.scheduled = store.scheduler and self.rule == "pod"
        self.dra = store.dra  # dcgm-exporter attributes GPUs held through DRA (docs/spec.md "GPUs through DRA")
        self.chunk = chunk
        self.instants = self.instants_in(chunk.end - chunk.start)  # subquery: exactly the chunk's instants
        self.raw = self.raw_in(chunk.end - chunk.start)  # every sample they can see
        self.step = _window(chunk.step)

    def highest(self, selector: str) -> str:
        """The series' highest sample the chunk's instants can see: a `read` for figures that hold over the chunk."""
        return f"max_over_time({selector}[{self.raw}])"

    def series(self, metric: str, *matchers: str) -> str:
        chosen = [m for m in (*matchers, self.extra) if m]
        return f"{metric}{{{', '.join(chosen)}}}"

    def requests(self, pods: str = "", family: str = APP_REQUESTS, resources: str = "") -> str:
        """Containers' requests of the billed resources (or of `resources`, a regular expression), app containers'
        or (`family`) init containers'."""
        return self.series(family, f"resource=~{quote(resources or self.resources)}", pods)

    def reserved(self, read: Callable[[str], str], pods: str = "", resources: str = "") -> str:
        """Per (namespace, pod, uid, resource): the pod's request by docs/spec.md rule 3, each series as `read` gives
        it (a selector's value at each instant, or its highest over the chunk): the sum of `reserved_terms`, each
        a series of its own (`or` of disjoint label sets, told apart by a `term` label)."""
        terms = self.reserved_terms(read, pods, resources)
        if len(terms) == 1:
            return terms["containers"]
        labelled = [_term(expression, term) for term, expression in terms.items()]
        return "sum by (namespace, pod, uid, resource) (\n    " + "\n  or ".join(labelled) + "\n)"

    def reserved_terms(self, read: Callable[[str], str], pods: str = "", resources: str = "") -> dict[str, str]:
        """The terms of `reserved`, per (namespace, pod, uid, resource). With `requests: pod`, what the scheduler
        reserves: max(app containers + sidecars, each other init container + sidecars) + overhead, written as
        `containers` = max(app containers, largest other init container) (so a pod with no app requests is
        still charged its init containers'), `sidecars`, and `overhead-cpu` and `overhead-memory`. With
        `requests: containers`, `containers` = the app containers' sum alone. A container's copies (a series
        per node, per exporter) count once (`max by`)."""
        container = "namespace, pod, uid, container"
        app = self.app_requests(read, pods, resources)
        if self.rule == "containers":
            return {"containers": app}
        init = self._per_container(read(self.requests(pods, INIT_REQUESTS, resources)))
        sidecar = f"group by ({container}) ({self.ksm.plain(read(self.series(INIT_INFO, SIDECAR, pods)), (*POD_LABELS, 'container'))})"
        others = f"max by (namespace, pod, uid, resource) ({init} unless on ({container}) {sidecar})"
        terms = {"containers": f"max by (namespace, pod, uid, resource) ({app} or {_term(others, 'init')})",
                 "sidecars": f"sum by (namespace, pod, uid, resource) ({init} and on ({container}) {sidecar})"}
        for resource, metric in OVERHEAD.items():
            if re.fullmatch(resources or self.resources, resource):
                overhead = f"max by (namespace, pod, uid) ({self.ksm.plain(read(self.series(metric, pods)), POD_LABELS)})"
                terms[f"overhead-{resource}"] = f'label_replace({overhead}, "resource", "{resource}", "", "")'
        return terms

    def effective(self, read: Callable[[str], str], pods: str = "", resources: str = "") -> str:
        """`reserved`, except for cpu and memory where kube-scheduler's figure is visible (`scheduler_requests`):
        the scheduler's, which is what it reserves by definition, pod-level resources included; and GPUs held
        through DRA (`dra_gpus`)."""
        scheduler = self.scheduler_requests(read, pods, resources) if self.scheduled else ""
        effective = self.reserved(read, pods, resources)
        if scheduler:
            effective = f"(\n    {scheduler}\n  or\n    {effective}\n)"
        if self.dra and re.fullmatch(resources or self.resources, DRA_GPU):
            effective = f"(\n    {effective}\n  or\n    {self.dra_gpus(read, pods)}\n)"
        return effective

    def scheduler_requests(self, read: Callable[[str], str], pods: str = "", resources: str = "") -> str:
        """Per (namespace, pod, uid, resource) of cpu and memory: kube-scheduler's kube_pod_resource_request, read by
        `read`, its copies (a series per node it had, per scheduler replica) once."""
        parts = []
        for resource in SCHEDULED:
            if re.fullmatch(resources or self.resources, resource):
                figure = self.scheduler.plain(read(self.series(SCHEDULER_REQUESTS, f"resource={quote(resource)}")),
                                              POD_LABELS)
                parts.append(self.of_uids(f"max by (namespace, pod) ({figure})", read, pods, resource))
        return f"({' or '.join(parts)})" if len(parts) > 1 else "".join(parts)

    def dra_gpus(self, read: Callable[[str], str], pods: str = "") -> str:
        """Per (namespace, pod, uid), as resource DRA_GPU: the whole GPUs dcgm-exporter attributes to the pod through
        DRA, each read by `read`; a GPU attributed to k pods counts 1/k to each (a shared claim). A GPU is its UUID;
        its series per container and exporter count once."""
        series = self.series(GPU_UTILISATION, DRA_HELD, WHOLE_GPU)
        held = f"group by (UUID, namespace, pod) ({self.dcgm.plain(read(series), POD_LABELS)})"
        shares = f"{held} / on (UUID) group_left () count by (UUID) ({held})"
        return self.of_uids(f"sum by (namespace, pod) ({shares})", read, pods, DRA_GPU)

    def of_uids(self, per_name: str, read: Callable[[str], str], pods: str, resource: str) -> str:
        """A figure per (namespace, pod) as a series per (namespace, pod, uid, resource) of the pods (`pods` selects them
        by uid) whose Running series `read` sees. kube-scheduler and dcgm-exporter name a pod by namespace and name
        only, so the figure goes to every uid of that name: two pods of one name exist at one instant only while a
        deleted one's series are still in the lookback."""
        uids = f"group by (namespace, pod, uid) ({self.ksm.plain(read(self.running(pods)), POD_LABELS)})"
        joined = f"({per_name}) * on (namespace, pod) group_right () {uids}"
        return f'label_replace({joined}, "resource", "{resource}", "", "")'

    def app_requests(self, read: Callable[[str], str], pods: str = "", resources: str = "") -> str:
        """Per (namespace, pod, uid, resource): the sum of the pod's app containers' requests, each read by `read`."""
        return f"sum by (namespace, pod, uid, resource) ({self._per_container(read(self.requests(pods, resources=resources)))})"

    def _per_container(self, requests: str) -> str:
        """One request per container and resource, under plain label names: its copies (per node, per exporter) once."""
        return f"max by (namespace, pod, uid, container, resource) ({self.ksm.plain(requests, (*POD_LABELS, 'container'))})"

    def running(self, pods: str = "", phase: str = "Running") -> str:
        """The pods' series of one phase (Running unless said otherwise)."""
        return self.series("kube_pod_status_phase", f"phase={quote(phase)}", pods)

    def running_instants(self, seconds: int, copies: bool) -> str:
        """Per pod (namespace, pod, uid) and `phase`, Running or Pending: at how many of the instants in the `seconds`
        that end at the time asked it was in that phase, where it was at some (hours without leave no row). Asked at
        the end of each hour of a chunk (one range query), it gives what the bill counts per chunk and waste per hour,
        and the instants pods bound to a node held before running (docs/spec.md "Rule 2: running"), from one read of
        the phase series (docs/performance.md). `!= 0` is outside the subquery, where it costs nothing, and inside
        the `max by`, which then merges only the pods' hours in their phase: about half as many series (a pod's
        Running series sums to 0 in the hours it was Pending, and its Pending series in those it ran). The same
        answer wherever no count is negative; one that is (a series with negative values) is no count either way, and
        the pod's instants are asked one by one (`_count`, the exact path)."""
        phases = self.series("kube_pod_status_phase", 'phase=~"Running|Pending"')
        counted = self.instants_seen(self.latest(phases), "namespace, pod, uid, phase", self.ksm, copies,
                                     sum_values=True, seconds=seconds)
        return f"max by (namespace, pod, uid, phase) ({self.ksm.plain(counted)} != 0)"

    def instants_seen(self, series: str, by: str, labels: FamilyLabels, copies: bool, sum_values: bool = False,
                      seconds: int = 0) -> str:
        """Per series, the instants of the chunk (or of the `seconds` ending at the time asked) at which it is visible
        (with `sum_values`: its values summed over them); with `copies`, per `by` after merging the copies at each
        instant, so that a GPU or pod that several exporters report counts once per instant (docs/spec.md "Live
        stores: staleness and exporter restarts"). Only there: an operator inside the subquery makes the store
        evaluate the whole vector at every instant."""
        over = "sum_over_time" if sum_values else "count_over_time"
        once = f"max by ({by}) ({labels.plain(series)})" if copies else series
        instants = self.instants_in(seconds) if seconds else self.instants
        return f"{over}({once}[{instants}:{self.step}])"

    def instants_in(self, seconds: int) -> str:
        """A subquery's range holding exactly the chunk's instants in the `seconds` that end at the time asked (half-step
        margins make Prometheus 2's closed and Prometheus 3's half-open ranges pick the same instants and samples)."""
        return _window(seconds - self.chunk.step / 2)

    def raw_in(self, seconds: int) -> str:
        """A range holding every sample those instants can see."""
        return _window(seconds - self.chunk.step + LOOKBACK + self.chunk.step / 2)

    def pod_node(self, pods: str = "", nodes: str = "") -> str:
        return self.series("kube_pod_info", f'{self.ksm.node}!=""', pods, nodes)

    def node_labels(self, nodes: str = "") -> str:
        return self.series("kube_node_labels", nodes)

    def workload_of(self, pods: str = "", keep: str = "") -> str:
        """Per pod on a node in the chunk (namespace, pod, uid, and the kube_pod_info labels in `keep`), value 1:
        its `workload` one step up, the controller kube_pod_info names as `Kind/name` (`ReplicaSet/train-5d8f`;
        kube-state-metrics' created_by_kind and created_by_name are the pod's controller owner reference, the
        one kube_pod_owner marks owner_is_controller="true"), or `Pod/<name>` for a pod without one (`<none>`,
        or an exporter that leaves the labels out). `TopControllers` takes ReplicaSets and Jobs the last step
        up, on the client: asked here, the ReplicaSets' and Jobs' owners would be read twice per chunk (PromQL
        has no outer join) and joined for every pod, for a table that has one row per ReplicaSet or Job
        (docs/spec.md "Workloads and experiment labels").

        Read from kube_pod_info, which the usage query reads for the pod's node anyway, rather than from
        kube_pod_owner: on a 50,000-pod day the breakdown then costs Prometheus a fifth less. Exactly one per
        pod: a controller wins over none (a bare pod a ReplicaSet adopted), and where the controller changed
        within the chunk (a pod re-parented) the one seen for the most samples wins (`topk` by sample count;
        an exact tie is broken by the store), which also keeps every join one-to-one."""
        def seen(matcher: str) -> str:
            info = self.series("kube_pod_info", f'{self.ksm.node}!=""', matcher, pods)
            return self.ksm.plain(f"count_over_time({info}[{self.raw}])", (*POD_LABELS, "node"))

        one = f'topk by (uid) (1, {seen(CONTROLLED)} + {CONTROLLER_FIRST:g} or {seen(UNCONTROLLED)})'
        return f"group by (namespace, pod, uid, {keep + ', ' if keep else ''}workload) ({workload_named(one)})"

    def parents(self) -> str:
        """Per ReplicaSet and Job with a controller of its own in the chunk (namespace, `workload` as
        `ReplicaSet/<name>` or `Job/<name>`): `top`, that controller (a Deployment, a CronJob, or another
        such as an Argo Rollout); the one seen for the most samples where it changed within the chunk."""
        replicasets = f'label_replace({self._seen("kube_replicaset_owner")}, "workload", "ReplicaSet/$1", "replicaset", "(.+)")'
        jobs = f'label_replace({self._seen("kube_job_owner")}, "workload", "Job/$1", "job_name", "(.+)")'
        one = f'topk by (namespace, workload) (1, label_join({replicasets} or {jobs}, "top", "/", "owner_kind", "owner_name"))'
        return f"group by (namespace, workload, top) ({one})"  # not the owner series' other labels: less to download

    def _seen(self, metric: str) -> str:
        """Samples of each controller owner series in the chunk's raw window."""
        return self.ksm.plain(f"count_over_time({self.series(metric, CONTROLLER)}[{self.raw}])", ("namespace",))

    def node_kind(self, labels: dict[str, str]) -> NodeKind:
        """(GPU model, reserved pool, replicas) from a series' labels; a pool no team reserved is none ('')."""
        model = next((labels[label] for label in self.model_labels if labels.get(label)), "")
        replicas = _replicas(labels.get(self.replicas_label, "")) if self.replicas_label else 1.0
        if not self.pools:
            return NodeKind(model, "", replicas)
        pool = labels.get(self.pools.node_label, "")
        return NodeKind(model, pool if pool in self.pools.teams else "", replicas)

    def gpus_per_unit(self, resource: str, kind: NodeKind) -> float:
        """Physical GPUs one unit of a resource stands for on a node of this kind (docs/spec.md "GPU sharing"):
        the resource's fraction, times the slice's where the node's model names a MIG slice (single strategy),
        divided by the node's time-slicing replicas (not for a GPU held through DRA, which its claims share);
        1 for cpu and memory."""
        if resource not in self.fractions:
            return 1.0
        if resource == DRA_GPU:
            return self.fractions[resource]
        sliced = single_strategy_slice(kind.model)
        return self.fractions[resource] * (sliced[2] if sliced else 1.0) / kind.replicas

    def models(self) -> str:
        """Every (node, GPU model[, pool]) seen in the chunk; two for a node means a relabel."""
        return f"max by (node, {self.node_keys}) ({self.ksm.plain(f'max_over_time({self.node_labels()}[{self.raw}])')})"

    def newest_model(self, nodes: str, labelled: str = "") -> str:
        """(node, GPU model[, pool]) of every node in `nodes`: the newest label set of the nodes
        `labelled` selects wins; the others, and nodes without labels, get ''.

        Not `A or on (node) B`: MetricsQL fills the gaps of A's series with B's values where their
        `on` labels match (a label set that stopped would live on); a plain `or` of disjoint label
        sets means the same on both engines."""
        sample_time = self.ksm.plain(self.engine.sample_time(self.node_labels(labelled)))
        newest = f"group by (node, {self.node_keys}) (topk by (node) (1, {sample_time}))"
        return f"""(
        {newest}
      or
        (group by (node) ({self.ksm.plain(self.latest(nodes))}) unless on (node) {newest})
    )"""


def workload_named(pod_info: str) -> str:
    """kube_pod_info's series (`pod_info`) with a `workload` label one step up the pod's owners: `Kind/name` of its
    controller, or `Pod/<name>` for a pod without one (`<none>`, or an exporter that leaves the labels out)."""
    named = f'label_join(label_join({pod_info}, "workload", "/", "created_by_kind", "created_by_name"), "probe", ";", "created_by_kind", "pod")'
    return f'label_replace({named}, "workload", "Pod/$1", "probe", "(?:<none>)?;(.+)")'


def _term(expression: str, term: str) -> str:
    """The expression's series labelled as one term of a sum."""
    return f'label_replace({expression}, "term", "{term}", "", "")'


def _window(seconds: float) -> str:
    """A PromQL duration, in milliseconds."""
    return f"{int(round(seconds * 1000))}ms"


