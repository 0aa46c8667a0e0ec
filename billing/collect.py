"""Resource-hours per namespace from kube-state-metrics (SPEC.md steps 1-5).

What SPEC.md defines is, per pod p and resource r,

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
vector at every instant: five to seven times slower.) That is the *fast* query below,
aggregated on the server to one series per (namespace, node, resource).

The factoring is exact only while a pod's requests and its node's GPU-model
label stay constant and its Running series is 0 or 1. Each chunk of the day
therefore first asks which pods had a request change (in-place pod resize),
a Running value other than 0 or 1, or ran on a node whose label changed;
those few pods are left out of the fast query and evaluated with the *exact*
query instead: the literal per-instant product, one range query restricted
to their uids. It costs Prometheus about twenty times more per pod than the
fast query, which is why it is kept for the pods that need it. Both paths
are tested against an independent reference computation.

The queries of one chunk, in order: GPU models per node, pods needing the
exact path, instants with data (coverage), pods on relabelled nodes (only
if there are such nodes), Running pods (for the log), fast, exact (only if
some pod needs it). Pods are listed in matchers as plain alternatives
(`one_of`) that Prometheus looks up in its index.

Chunks: the day is cut into pieces of CHUNK_INSTANTS instants (6 hours at a
60 s step), two evaluated at a time, which keeps every query far below
Prometheus' default limits (11,000 points per series, 50 million samples,
2 minutes) on clusters with tens of thousands of pods. bench/collect_bench.py
measures all this; README.md has the figures.
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

import numpy as np
import pandas as pd

from billing.config import ClusterConfig
from billing.days import BillingDay
from billing.prometheus import PrometheusError, PrometheusSource

log = logging.getLogger(__name__)

LOOKBACK = 300  # seconds: Prometheus' default lookback delta for instant vectors
CHUNK_INSTANTS = 360  # instants per fast query: 6 h at a 60 s step
PARALLEL_QUERIES = 2  # one per core of a small Prometheus
GIB = 2**30
RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
T = TypeVar("T")

USAGE_COLUMNS = ["namespace", "resource", "gpu_model", "priority_class", "pool", "quantity"]


@dataclass(frozen=True)
class ClusterUsage:
    """One cluster-day: resource-hours per namespace, resource, GPU model, priority class and pool."""

    cluster: str
    usage: pd.DataFrame  # USAGE_COLUMNS; resource is cpu, memory or gpu; priority_class from kube_pod_info;
    # pool: the reserved pool of the pod's node, '' when none
    pods: int  # distinct pods seen Running during the day
    queries: int
    coverage: float  # share of the day's instants at which kube-state-metrics data was there


@dataclass(frozen=True)
class Chunk:
    """Instants start, start+step, ..., end-step of one piece of the day (unix seconds)."""

    start: int
    end: int
    step: int

    @property
    def last(self) -> int:
        return self.end - self.step


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


def uid_matcher(uids: frozenset[str], keep: bool) -> str:
    """A matcher keeping (or dropping) exactly these pods; '' drops none."""
    if not uids and not keep:
        return ""
    return f"uid{'=~' if keep else '!~'}{quote(one_of(sorted(uids)))}"


def node_matcher(nodes: Iterable[str]) -> str:
    return f"node=~{quote(one_of(sorted(nodes)))}"


class Queries:
    """The PromQL text for one cluster and one chunk of the day."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: list[str], chunk: Chunk):
        self.extra = cluster.prometheus.selector.strip()
        self.gpu_label = cluster.gpu_model_label
        self.pools = cluster.reserved_pools
        # node labels that decide a node's price: GPU model, and reserved pool where clusters have them
        self.node_keys = ", ".join([self.gpu_label, *([self.pools.node_label] if self.pools else [])])
        self.resources = one_of(["cpu", "memory", *gpu_resources])
        length = chunk.end - chunk.start
        # Half-step margins make Prometheus 2's closed and Prometheus 3's
        # half-open ranges pick the same instants and samples.
        self.instants = _window(length - chunk.step / 2)  # subquery: exactly the chunk's instants
        self.raw = _window(length - chunk.step + LOOKBACK + chunk.step / 2)  # every sample they can see
        self.step = _window(chunk.step)

    def series(self, metric: str, *matchers: str) -> str:
        chosen = [m for m in (*matchers, self.extra) if m]
        return f"{metric}{{{', '.join(chosen)}}}"

    def requests(self, pods: str = "") -> str:
        return self.series("kube_pod_container_resource_requests", f"resource=~{quote(self.resources)}", pods)

    def running(self, pods: str = "") -> str:
        return self.series("kube_pod_status_phase", 'phase="Running"', pods)

    def pod_node(self, pods: str = "", nodes: str = "") -> str:
        return self.series("kube_pod_info", 'node!=""', pods, nodes)

    def node_labels(self, nodes: str = "") -> str:
        return self.series("kube_node_labels", nodes)

    def node_kind(self, labels: dict[str, str]) -> tuple[str, str]:
        """(GPU model, reserved pool) from a series' labels; a pool no team reserved is none ('')."""
        model = labels.get(self.gpu_label, "")
        if not self.pools:
            return model, ""
        pool = labels.get(self.pools.node_label, "")
        return model, pool if pool in self.pools.teams else ""

    # `max by` everywhere below drops the scrape's own labels (instance, job),
    # so duplicate scrapes of kube-state-metrics replicas are not counted twice.

    def fast(self, pods: str) -> str:
        """Per (namespace, node, priority class, resource): sum over pods of request x Running instants."""
        return f"""
sum by (namespace, node, priority_class, resource) (
    sum by (namespace, pod, uid, resource) (
        max by (namespace, pod, uid, container, resource) (max_over_time({self.requests(pods)}[{self.raw}]))
    )
  * on (namespace, pod, uid) group_left (node, priority_class) (
        max by (namespace, pod, uid) (sum_over_time({self.running(pods)}[{self.instants}:{self.step}]))
      * on (namespace, pod, uid) group_left (node, priority_class)
        max by (namespace, pod, uid, node, priority_class) (max_over_time({self.pod_node(pods)}[{self.raw}]))
    )
)"""

    def needs_exact(self) -> str:
        """Pods the fast query would get wrong: a request changed near or in the chunk (in-place
        resize), or the Running series holds something else than kube-state-metrics' 0 or 1."""
        return f"""
group by (uid) (
    changes({self.requests()}[{self.raw}]) > 0
  or max_over_time({self.running()}[{self.raw}]) > 1
  or min_over_time({self.running()}[{self.raw}]) < 0
)"""

    def models(self) -> str:
        """Every (node, GPU model[, pool]) seen in the chunk; two for a node means a relabel."""
        return f"max by (node, {self.node_keys}) (max_over_time({self.node_labels()}[{self.raw}]))"

    def pods_on(self, nodes: list[str]) -> str:
        """Pods on the given nodes during the chunk."""
        return f"group by (uid) (max_over_time({self.pod_node(nodes=node_matcher(nodes))}[{self.raw}]))"

    def covered_instants(self) -> str:
        """At how many of the chunk's instants any kube-state-metrics series was visible:
        fewer than all means Prometheus did not scrape it for a while, and pods then were not seen."""
        return f"count_over_time(count({self.node_labels()})[{self.instants}:{self.step}])"

    def running_pods(self) -> str:
        """The uids of pods Running in the chunk, for the log's pod count."""
        return f"group by (uid) (max_over_time({self.running()}[{self.instants}]) == 1)"

    def exact(self, pods: str, relabelled: list[str]) -> str:
        """The literal per-instant product, for range queries. Node labels (GPU model, pool) are
        read at every instant only for relabelled nodes (a node's newest label set wins; "" without
        one); on other nodes they are constant, and the caller maps the node to them."""
        return f"""
sum by (namespace, node, resource, priority_class, {self.node_keys}) (
    max by (namespace, pod, uid, container, resource) ({self.requests(pods)})
  * on (namespace, pod, uid) group_left (node, priority_class) (
        max by (namespace, pod, uid) ({self.running(pods)} == 1)
      * on (namespace, pod, uid) group_left (node, priority_class)
        max by (namespace, pod, uid, node, priority_class) ({self.pod_node(pods)})
    )
  * on (node) group_left ({self.node_keys}) {self.newest_model(self.pod_node(pods), node_matcher(relabelled))}
)"""

    def newest_model(self, nodes: str, labelled: str = "") -> str:
        """(node, GPU model[, pool]) of every node in `nodes`: the newest label set of the nodes
        `labelled` selects wins; the others, and nodes without labels, get ''."""
        return f"""(
        group by (node, {self.node_keys}) (topk by (node) (1, timestamp({self.node_labels(labelled)})))
      or on (node)
        group by (node) ({nodes})
    )"""


def _window(seconds: float) -> str:
    """A PromQL duration, in milliseconds."""
    return f"{int(round(seconds * 1000))}ms"


def chunks(day: BillingDay, step: int, instants: int = CHUNK_INSTANTS) -> list[Chunk]:
    """The day cut into step-aligned pieces of at most `instants` instants."""
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    if start % step:
        raise PrometheusError(
            f"local midnight of {day.date} is not a multiple of the {step}s step in Unix time; "
            "choose a step that divides the time zone's UTC offset"
        )
    size = instants * step
    return [Chunk(t, min(t + size, end), step) for t in range(start, end, size)]


@dataclass(frozen=True)
class _ChunkResult:
    usage: pd.DataFrame  # USAGE_COLUMNS (resource as KSM names it)
    pods: frozenset[str]
    queries: int
    covered: int  # instants with kube-state-metrics data
    instants: int


def _uids(answer: list[dict]) -> frozenset[str]:
    return frozenset(series["metric"].get("uid", "") for series in answer)


class NodeKinds:
    """Every (GPU model, pool) each node had during a chunk; a node with more than one was relabelled."""

    def __init__(self, source: PrometheusSource, queries: Queries, at: int):
        self.queries = queries
        self.kinds: dict[str, set[tuple[str, str]]] = {}
        for series in source.instant(queries.models(), at):
            labels = series["metric"]
            self.kinds.setdefault(labels.get("node", ""), set()).add(queries.node_kind(labels))
        self.relabelled = sorted(node for node, found in self.kinds.items() if len(found) > 1)

    def of(self, labels: dict[str, str]) -> tuple[str, str]:
        """The kind of a result's node: read per instant on relabelled nodes, else the node's one kind."""
        node = labels.get("node", "")
        return self.queries.node_kind(labels) if node in self.relabelled else min(self.kinds.get(node, {("", "")}))


def _chunk_usage(source: PrometheusSource, cluster: ClusterConfig, gpu_resources: list[str], chunk: Chunk) -> _ChunkResult:
    """Fast query for most pods, exact range queries for the few where factoring is wrong."""
    queries = Queries(cluster, gpu_resources, chunk)
    at = chunk.last
    nodes = NodeKinds(source, queries, at)
    relabelled = nodes.relabelled
    exact_pods = _uids(source.instant(queries.needs_exact(), at))
    covered = sum(int(float(series["value"][1])) for series in source.instant(queries.covered_instants(), at))
    asked = 4
    if relabelled:
        exact_pods |= _uids(source.instant(queries.pods_on(relabelled), at))
        asked += 1
    running = _uids(source.instant(queries.running_pods(), at))

    def row(labels: dict[str, str], instants: float) -> tuple:
        model, pool = nodes.of(labels)
        return (labels.get("namespace", ""), labels.get("resource", ""), model, labels.get("priority_class", ""), pool,
                instants)

    rows = []
    for series in source.instant(queries.fast(uid_matcher(exact_pods, keep=False)), at):
        rows.append(row(series["metric"], float(series["value"][1])))
    asked += 1

    if exact_pods:
        log.info("%d pods resized, on relabelled nodes (%s) or with odd Running values: evaluated instant by instant",
                 len(exact_pods), ", ".join(relabelled[:3]) or "none")
        for series in source.range(queries.exact(uid_matcher(exact_pods, keep=True), relabelled), chunk.start, at, chunk.step):
            rows.append(row(series["metric"], sum(float(v) for _, v in series["values"])))
        asked += 1
    instants = (chunk.end - chunk.start) // chunk.step
    return _ChunkResult(_hours(rows, chunk.step), running, asked, covered, instants)


def _hours(rows: list[tuple], step: int) -> pd.DataFrame:
    """Rows of resource-instants as a frame of resource-hours."""
    frame = pd.DataFrame(rows, columns=USAGE_COLUMNS).astype({"quantity": float})
    return frame.assign(quantity=frame["quantity"] * step / 3600)


def map_chunks(ask: Callable[[Chunk], T], parts: list[Chunk]) -> list[T]:
    """ask(chunk) for every chunk, PARALLEL_QUERIES at a time, in order."""
    pool = ThreadPoolExecutor(PARALLEL_QUERIES)
    try:
        return list(pool.map(ask, parts))
    finally:  # one failed chunk fails the day: the chunks not started yet are not asked at all
        pool.shutdown(wait=False, cancel_futures=True)


def collect_cluster(
    cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: list[str], source: PrometheusSource
) -> ClusterUsage:
    """Resource-hours of one cluster-day, per namespace, resource, GPU model, priority class and pool."""
    results = map_chunks(lambda c: _chunk_usage(source, cluster, gpu_resources, c), chunks(day, step))
    raw = pd.concat([r.usage for r in results], ignore_index=True)
    _refuse_impossible_values(raw, cluster.name)
    return ClusterUsage(
        cluster=cluster.name,
        usage=_normalise(raw, gpu_resources),
        pods=len(frozenset().union(*(r.pods for r in results))),
        queries=sum(r.queries for r in results),
        coverage=sum(r.covered for r in results) / sum(r.instants for r in results),
    )


def _refuse_impossible_values(raw: pd.DataFrame, cluster: str) -> None:
    """A NaN, infinite or negative request would make a silently wrong bill."""
    bad = raw[~np.isfinite(raw["quantity"]) | (raw["quantity"] < 0)]
    if len(bad):
        first = bad.iloc[0]
        raise PrometheusError(
            f"Prometheus of cluster {cluster} returned an impossible {first['resource']} request or Running value "
            f"({first['quantity']}) for namespace {first['namespace']!r}; refusing to bill it"
        )


def billing_units(raw: pd.DataFrame, gpu_resources: list[str]) -> pd.DataFrame:
    """kube-state-metrics resources to billing resources: GiB for memory, one `gpu` for all GPU names."""
    frame = raw.copy()
    is_gpu = frame["resource"].isin(gpu_resources)
    frame.loc[frame["resource"] == "memory", "quantity"] /= GIB
    frame.loc[is_gpu, "resource"] = "gpu"
    frame.loc[~is_gpu, "gpu_model"] = ""
    return frame[frame["quantity"] != 0]


def _normalise(raw: pd.DataFrame, gpu_resources: list[str]) -> pd.DataFrame:
    """Resource-hours in billing units, one row per namespace, resource, GPU model, priority class and pool."""
    frame = billing_units(raw, gpu_resources)
    return (
        frame.groupby(USAGE_COLUMNS[:-1], as_index=False, sort=True)["quantity"]
        .sum()
        .reindex(columns=USAGE_COLUMNS)
    )
