"""The machinery that asks a cluster-day's queries: chunks two at a time, answers at the end of each hour from one
range query where the store allows, and the per-chunk lookups (each node's kind, each controller's top) read from
one answer. What the queries say is promql.py's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from billing.collect.chunks import HOUR
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import NodeKind, Queries
from billing.memory import free_pages_to_the_system

PARALLEL_QUERIES = 2  # one per core of a small Prometheus
T = TypeVar("T")
Part = TypeVar("Part")  # a piece of the day: a Chunk, or a group of hours
log = logging.getLogger(__name__)


class NodeKinds:
    """Every kind (GPU model, pool, replicas) each node had during a chunk; a node with more than one was
    relabelled."""

    def __init__(self, source: PrometheusSource, queries: Queries, at: int):
        self.queries = queries
        self.kinds: dict[str, set[NodeKind]] = {}
        for series in source.instant(queries.models(), at):
            labels = series["metric"]
            self.kinds.setdefault(labels.get("node", ""), set()).add(queries.node_kind(labels))
        self.relabelled = sorted(node for node, found in self.kinds.items() if len(found) > 1)
        self.one_kind = {node: min(found) for node, found in self.kinds.items() if len(found) == 1}

    def of(self, labels: dict[str, str]) -> NodeKind:
        """The kind of a result's node: read per instant on relabelled nodes, else the node's one kind."""
        node = labels.get("node", "")
        if node in self.one_kind:
            return self.one_kind[node]
        return self.queries.node_kind(labels) if node in self.kinds else NodeKind("", "", 1.0)

    def priced(self, labels: dict[str, str]) -> tuple[str, str, float]:
        """(GPU model, pool, physical GPUs per unit) of a result with `node` and `resource` labels."""
        kind = self.of(labels)
        return kind.model, kind.pool, self.queries.gpus_per_unit(labels.get("resource", ""), kind)


class TopControllers:
    """The last step of a pod's owner chain, for one chunk: a workload (docs/spec.md "Workloads and experiment labels")
    is the top-level controller, and a ReplicaSet or Job with a controller of its own is not one."""

    def __init__(self, source: PrometheusSource, queries: Queries, at: int):
        self.tops = {(s["metric"].get("namespace", ""), s["metric"].get("workload", "")): s["metric"].get("top", "")
                     for s in source.instant(queries.parents(), at)}

    def workload(self, namespace: str, controller: str) -> str:
        """The workload of a pod in `namespace` whose controller is `controller` (Queries.workload_of)."""
        return self.tops.get((namespace, controller)) or controller


def map_chunks(ask: Callable[[Part], T], parts: list[Part]) -> list[T]:
    """ask(chunk) for every chunk, PARALLEL_QUERIES at a time, in order; the pages each chunk's answers freed are
    handed back to the system as it ends (memory.free_pages_to_the_system)."""
    pool = ThreadPoolExecutor(PARALLEL_QUERIES)

    def asked(part: Part) -> T:
        found = ask(part)
        free_pages_to_the_system()
        return found

    try:
        return list(pool.map(asked, parts))
    finally:  # one failed chunk fails the day: the chunks not started yet are not asked at all
        pool.shutdown(wait=False, cancel_futures=True)


Sampled = list[tuple[dict[str, str], list]]  # an answer's series: labels and [time, value] pairs, as the store gave them


def at_times(source: PrometheusSource, query: str, times: list[float], ranged: bool) -> tuple[Sampled, bool]:
    """The answer of `query` at each of `times` (a whole number of hours apart), and whether it came from one range
    query (`ranged`: try that first); time by time with instant queries otherwise."""
    answer = _in_one_range(source, query, times) if ranged else None
    if answer is not None:
        return answer, True
    return [(s["metric"], [s["value"]]) for t in times for s in source.instant(query, t)], False


def _in_one_range(source: PrometheusSource, query: str, times: list[float]) -> Sampled | None:
    """The answer of `query` at each of `times` from one range query, or None where the store answered for other
    times than asked (a query frontend aligning a range to its step, as Thanos' does by default: an hour ends at
    :59). A range's times are its start plus whole steps, so a series' first and last tell."""
    asked = set(times)
    step = times[1] - times[0] if len(times) > 1 else HOUR
    answer = [(s["metric"], s["values"]) for s in source.range(query, times[0], times[-1], step)]
    moved = next((t for _, values in answer for t in (values[0][0], values[-1][0]) if t not in asked), None)
    if moved is not None:
        log.warning("the store answered a range query for other times than asked (%s); asking hour by hour", moved)
        return None
    return answer
