"""Resource-hours per namespace from kube-state-metrics (SPEC.md steps 1-5).

What SPEC.md defines is, per pod p and resource r,

    quantity(p, r) = sum_k request(p, r, t_k) * running(p, t_k) * step / 3600

over the step-aligned instants t_k of the day. Evaluating that product at
every instant for every pod is what makes naive exports slow on big
clusters: the join runs series x instants times. But a container's request
does not change during a pod's life, so the sum factors into

    request(p, r) * (number of instants at which p is Running)

and only the cheap 0/1 Running series has to be evaluated instant by
instant (a subquery), while requests and the pod's node are read as raw
samples. That is the *fast* query below, aggregated on the server to one
series per (namespace, node, resource).

The factoring is exact only while requests and node labels stay constant.
Each chunk of the day therefore also asks whether any request changed
(in-place pod resize) or any node's GPU-model label changed; such a chunk is
evaluated with the *exact* query instead: the literal per-instant product, as
a range query in smaller pieces. Both paths are tested against an
independent reference computation.

Chunks: the day is cut into pieces of CHUNK_INSTANTS instants (6 hours at a
60 s step), which keeps every query far below Prometheus' default limits
(11,000 points per series, 50 million samples, 2 minutes) on clusters with
tens of thousands of pods.
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from billing.config import ClusterConfig
from billing.days import BillingDay
from billing.prometheus import PrometheusError, PrometheusSource

log = logging.getLogger(__name__)

LOOKBACK = 300  # seconds: Prometheus' default lookback delta for instant vectors
CHUNK_INSTANTS = 360  # instants per fast query: 6 h at a 60 s step
EXACT_INSTANTS = 60  # instants per exact range query: 1 h at a 60 s step
PARALLEL_QUERIES = 2  # one per core of a small Prometheus
GIB = 2**30

USAGE_COLUMNS = ["namespace", "resource", "gpu_model", "quantity"]


@dataclass(frozen=True)
class ClusterUsage:
    """One cluster-day: resource-hours per namespace, resource and GPU model."""

    cluster: str
    usage: pd.DataFrame  # USAGE_COLUMNS; resource is cpu, memory or gpu
    pods: int  # distinct pods seen Running during the day
    queries: int


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


class Queries:
    """The PromQL text for one cluster: metric names, selector, labels."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: list[str]):
        self.extra = cluster.prometheus.selector.strip()
        self.gpu_label = cluster.gpu_model_label
        resources = ["cpu", "memory", *gpu_resources]
        self.resources = "|".join(re.escape(r) for r in resources)

    def series(self, metric: str, *matchers: str) -> str:
        return f"{metric}{{{', '.join([*matchers, *([self.extra] if self.extra else [])])}}}"

    @property
    def requests(self) -> str:
        return self.series("kube_pod_container_resource_requests", f"resource=~{quote(self.resources)}")

    @property
    def running(self) -> str:
        return self.series("kube_pod_status_phase", 'phase="Running"')

    @property
    def pod_node(self) -> str:
        return self.series("kube_pod_info", 'node!=""')

    @property
    def node_labels(self) -> str:
        return self.series("kube_node_labels")

    # `max by` everywhere below drops the scrape's own labels (instance, job),
    # so duplicate scrapes of kube-state-metrics replicas are not counted twice.

    def fast(self, chunk: Chunk) -> str:
        """Per (namespace, node, resource): sum over pods of request x Running instants."""
        instants = _window(chunk.end - chunk.start - chunk.step / 2)
        raw = _window(chunk.end - chunk.start - chunk.step + LOOKBACK + chunk.step / 2)
        step = _window(chunk.step)
        return f"""
sum by (namespace, node, resource) (
    sum by (namespace, pod, uid, resource) (
        max by (namespace, pod, uid, container, resource) (max_over_time({self.requests}[{raw}]))
    )
  * on (namespace, pod, uid) group_left (node) (
        max by (namespace, pod, uid) (sum_over_time(({self.running} == 1)[{instants}:{step}]))
      * on (namespace, pod, uid) group_left (node)
        max by (namespace, pod, uid, node) (max_over_time({self.pod_node}[{raw}]))
    )
)"""

    def resized(self, chunk: Chunk) -> str:
        """Containers whose request changed near or in the chunk: the factoring would be wrong."""
        raw = _window(chunk.end - chunk.start - chunk.step + LOOKBACK + chunk.step / 2)
        return f"count(changes({self.requests}[{raw}]) > 0)"

    def models(self, chunk: Chunk) -> str:
        """Every (node, GPU model) pair seen in the chunk; two models for a node means a relabel."""
        raw = _window(chunk.end - chunk.start - chunk.step + LOOKBACK + chunk.step / 2)
        label = self.gpu_label
        return f"max by (node, {label}) (max_over_time({self.node_labels}[{raw}]))"

    def running_pods(self, chunk: Chunk) -> str:
        """The uids of pods Running in the chunk, for the log's pod count."""
        raw = _window(chunk.end - chunk.start - chunk.step / 2)
        return f"group by (uid) (max_over_time({self.running}[{raw}]) == 1)"

    def exact(self) -> str:
        """The literal per-instant product, for range queries; the node's newest label set wins."""
        label = self.gpu_label
        return f"""
sum by (namespace, resource, {label}) (
    sum by (namespace, pod, uid, resource) (
        max by (namespace, pod, uid, container, resource) ({self.requests})
    )
  * on (namespace, pod, uid) group_left (node) (
        max by (namespace, pod, uid) ({self.running} == 1)
      * on (namespace, pod, uid) group_left (node)
        max by (namespace, pod, uid, node) ({self.pod_node})
    )
  * on (node) group_left ({label}) (
        group by (node, {label}) (topk by (node) (1, timestamp({self.node_labels})))
      or on (node)
        group by (node) ({self.pod_node})
    )
)"""


def _window(seconds: float) -> str:
    """A PromQL duration in milliseconds; half-step margins make both of
    Prometheus 2's closed and Prometheus 3's half-open ranges pick the same instants."""
    return f"{int(round(seconds * 1000))}ms"


def chunks(day: BillingDay, step: int) -> list[Chunk]:
    """The day cut into step-aligned pieces of at most CHUNK_INSTANTS instants."""
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    if start % step:
        raise PrometheusError(
            f"local midnight of {day.date} is not a multiple of the {step}s step in Unix time; "
            "choose a step that divides the time zone's UTC offset"
        )
    size = CHUNK_INSTANTS * step
    return [Chunk(t, min(t + size, end), step) for t in range(start, end, size)]


def _sub_chunks(chunk: Chunk) -> list[Chunk]:
    size = EXACT_INSTANTS * chunk.step
    return [Chunk(t, min(t + size, chunk.end), chunk.step) for t in range(chunk.start, chunk.end, size)]


@dataclass(frozen=True)
class _ChunkResult:
    usage: pd.DataFrame  # namespace, resource, gpu_model, quantity (resource as KSM names it)
    pods: frozenset[str]
    queries: int


def _fast_or_exact(source: PrometheusSource, queries: Queries, chunk: Chunk) -> _ChunkResult:
    at = chunk.last
    models = source.instant(queries.models(chunk), at)
    node_models: dict[str, set[str]] = {}
    for series in models:
        labels = series["metric"]
        node_models.setdefault(labels.get("node", ""), set()).add(labels.get(queries.gpu_label, ""))
    relabelled = sorted(node for node, found in node_models.items() if len(found) > 1)
    resized = source.instant(queries.resized(chunk), at)
    pods = frozenset(s["metric"].get("uid", "") for s in source.instant(queries.running_pods(chunk), at))

    if resized or relabelled:
        log.info(
            "chunk %s: %s; evaluating it instant by instant",
            chunk.start,
            "requests changed" if resized else f"GPU model label changed on {', '.join(relabelled[:5])}",
        )
        rows = []
        parts = _sub_chunks(chunk)
        for part in parts:
            for series in source.range(queries.exact(), part.start, part.last, part.step):
                labels = series["metric"]
                total = sum(float(v) for _, v in series["values"])
                rows.append((labels.get("namespace", ""), labels.get("resource", ""),
                             labels.get(queries.gpu_label, ""), total))
        return _ChunkResult(_hours(rows, chunk.step), pods, 3 + len(parts))

    rows = []
    for series in source.instant(queries.fast(chunk), at):
        labels = series["metric"]
        node = labels.get("node", "")
        model = min(node_models.get(node, {""}))
        rows.append((labels.get("namespace", ""), labels.get("resource", ""), model, float(series["value"][1])))
    return _ChunkResult(_hours(rows, chunk.step), pods, 4)


def _hours(rows: list[tuple[str, str, str, float]], step: int) -> pd.DataFrame:
    """Rows of resource-instants as a frame of resource-hours."""
    frame = pd.DataFrame(rows, columns=USAGE_COLUMNS).astype({"quantity": float})
    return frame.assign(quantity=frame["quantity"] * step / 3600)


def collect_cluster(
    cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: list[str], source: PrometheusSource
) -> ClusterUsage:
    """Resource-hours of one cluster-day, per namespace, resource and GPU model."""
    queries = Queries(cluster, gpu_resources)
    pieces = chunks(day, step)
    with ThreadPoolExecutor(PARALLEL_QUERIES) as pool:
        results = list(pool.map(lambda c: _fast_or_exact(source, queries, c), pieces))
    raw = pd.concat([r.usage for r in results], ignore_index=True)
    _refuse_impossible_values(raw, cluster.name)
    usage = _normalise(raw, gpu_resources)
    return ClusterUsage(
        cluster=cluster.name,
        usage=usage,
        pods=len(frozenset().union(*(r.pods for r in results))),
        queries=sum(r.queries for r in results),
    )


def _refuse_impossible_values(raw: pd.DataFrame, cluster: str) -> None:
    """A NaN, infinite or negative request would make a silently wrong bill."""
    bad = raw[~np.isfinite(raw["quantity"]) | (raw["quantity"] < 0)]
    if len(bad):
        first = bad.iloc[0]
        raise PrometheusError(
            f"Prometheus of cluster {cluster} returned an impossible {first['resource']} request "
            f"({first['quantity']}) for namespace {first['namespace']!r}; refusing to bill it"
        )


def _normalise(raw: pd.DataFrame, gpu_resources: list[str]) -> pd.DataFrame:
    """kube-state-metrics resources to billing resources: GiB for memory, one `gpu` for all GPU names."""
    frame = raw.copy()
    is_gpu = frame["resource"].isin(gpu_resources)
    frame.loc[frame["resource"] == "memory", "quantity"] /= GIB
    frame.loc[is_gpu, "resource"] = "gpu"
    frame.loc[~is_gpu, "gpu_model"] = ""
    frame = frame[frame["quantity"] != 0]
    return (
        frame.groupby(["namespace", "resource", "gpu_model"], as_index=False, sort=True)["quantity"]
        .sum()
        .reindex(columns=USAGE_COLUMNS)
    )
