"""Self-audit: a sample of pods billed again instant by instant, in plain Python.

The ledger comes from PromQL that factors the sum of docs/spec.md "Rule 4: quantity" (billing/collect/usage.py's
fast path: a pod's request times its Running instants, an exporter's copies merged) or evaluates it on the server
(its exact path); both depend on how the store evaluates PromQL, which differs between stores and versions. So
every run checks itself: per cluster-day it picks pods (at least `audit.pods` of those Running, and pods on the
exact path, chosen by a random generator seeded with the cluster and the day, so a re-run audits the same pods),
asks the store for each of their series what an instant query at each of the day's instants answers (docs/spec.md
"Rule 1: sampling instants": a range query of the series' value at an instant, Engine.latest, one per chunk),
and applies docs/spec.md's arithmetic here:

    quantity(p, r) = sum_k request(p, r, t_k) * [running(p, t_k) == 1] * step / 3600

with the request by docs/spec.md rule 3 (what the scheduler reserves, or with `requests: containers` the app
containers' sum), the node from `kube_pod_info` and the GPU model from that
node's newest `kube_node_labels` (newest by the sample's own timestamp, Engine.sample_time). Where several
series differ only in labels the bill does not use (an exporter's instance, a replica label) the largest value
counts, once per instant, and the pod is Running if any of them says so (docs/spec.md "Live stores: staleness
and exporter restarts"). Asking instant by instant, not for raw samples, keeps staleness markers where a live
store has them: a range selector skips them and would bill a deleted pod for five minutes more. The same pods
are asked through collect.py's own queries, restricted to them and grouped by pod; a difference beyond 1e-9
relative fails the run before the ledger is touched.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from billing.collect.chunks import HOUR, Chunk, chunks
from billing.collect.context import ClusterDay
from billing.collect.figures import SAMPLE, figure
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import (
    APP_REQUESTS,
    DRA_HELD,
    GPU_UTILISATION,
    INIT_INFO,
    INIT_REQUESTS,
    OVERHEAD,
    PLACEHOLDER,
    SCHEDULED,
    SCHEDULER_REQUESTS,
    SIDECAR,
    WHOLE_GPU,
    GpuResources,
    Queries,
    fits,
    node_matcher,
    one_of,
    quote,
    uid_matcher,
)
from billing.collect.stores import FamilyLabels, Store
from billing.collect.usage import GIB, UsageQueries, pod_usage
from billing.config import DRA_GPU, ClusterConfig
from billing.days import BillingDay
from billing.errors import RunFailed

log = logging.getLogger(__name__)

TOLERANCE = 1e-9  # relative
EXACT_PODS = 10  # at most this many pods of the exact path besides the sample
PodKey = tuple[str, str, str]  # (uid, resource, gpu_model)
Series = tuple[str, dict[str, str], Sequence[tuple[float, float]]]  # (name, labels, (instant, value) pairs)


class AuditError(RunFailed):
    """The billing queries and the instant-by-instant recomputation disagree; the message names cluster, pod, resource and both figures."""


@dataclass(frozen=True)
class Audit:
    """What auditing one cluster-day cost."""

    pods: int
    queries: int
    seconds: float


def audited_pods(cluster: str, day: BillingDay, running: Iterable[str], exact: Iterable[str], size: int) -> list[str]:
    """`size` of the running pods (all when fewer) and pods of the exact path, the same on every run of the day."""
    rng = random.Random(f"{cluster} {day.date.isoformat()}")
    exact = sorted(set(exact))
    others = sorted(set(running) - set(exact))
    chosen = rng.sample(others, min(size, len(others))) + rng.sample(exact, min(EXACT_PODS, len(exact)))
    return sorted(chosen)


def _at_instants(values: Sequence[tuple[float, float]], index: dict[float, int]) -> np.ndarray:
    """A series' answers as an array over the day's instants, NaN where it had none."""
    found = np.full(len(index), np.nan)
    for t, value in values:
        if t in index:
            found[index[t]] = value
    return found


def _newest(candidates: list[tuple[str, np.ndarray]], size: int) -> np.ndarray:
    """Of several (value, sample times at each instant), the value whose sample is the newest at each instant
    ('' where none is visible)."""
    if not candidates:
        return np.full(size, "", dtype=object)
    seen = np.array([np.nan_to_num(times, nan=-np.inf) for _, times in candidates])
    values = np.array([value for value, _ in candidates] + [""], dtype=object)
    best = np.where(seen.max(axis=0) > -np.inf, seen.argmax(axis=0), len(candidates))
    return values[best]


def recompute(series: Iterable[Series], instants: Sequence[float], step: float, gpu_resources: GpuResources,
              model_of: Callable[[dict[str, str]], str], rule: str = "pod") -> dict[PodKey, float]:
    """Resource-hours per (uid, resource, gpu_model) by docs/spec.md "Billing arithmetic", rules 1 to 5, from what
    instant queries answered at `instants`: (name, labels, [(instant, value)]) per series, where the value of
    `kube_pod_info` and `kube_node_labels` is its sample's timestamp. `rule`: the cluster's `requests`. Where
    kube-scheduler's kube_pod_resource_request of a pod's namespace and name answers for cpu or memory, its largest
    copy is the request at that instant, for every uid of that name.

    resource is cpu (cores), memory (GiB) or gpu; series other than the
    bill's (other phases, other resources, pods without node) are ignored."""
    units = {"cpu": ("cpu", 1.0), "memory": ("memory", 1 / GIB), **{name: ("gpu", 1.0) for name in gpu_resources}}
    index = {float(t): i for i, t in enumerate(instants)}
    running: dict[str, list[np.ndarray]] = defaultdict(list)
    # uid -> resource -> (term, container) -> the copies' answers; term is one of TERMS
    requests: dict[str, dict[str, dict[tuple[str, str], list]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    sidecars: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    nodes: dict[str, list[tuple[str, np.ndarray]]] = defaultdict(list)
    models: dict[str, list[tuple[str, np.ndarray]]] = defaultdict(list)
    # (namespace, pod name) -> resource -> kube-scheduler's copies; the uids of each name
    scheduled: dict[tuple[str, str], dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    uids_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    dra_held: dict[str, list[tuple[tuple[str, str], np.ndarray]]] = defaultdict(list)  # GPU -> (holder, copy)
    for name, labels, values in series:
        uid, answered = labels.get("uid", ""), _at_instants(values, index)
        resource = labels.get("resource") or OVERHEAD_OF.get(name, "")
        if name == "kube_pod_status_phase" and labels.get("phase") == "Running":
            running[uid].append(answered)
            uids_of[(labels.get("namespace", ""), labels.get("pod", ""))].add(uid)
        elif name == SCHEDULER_REQUESTS and rule == "pod" and resource in SCHEDULED:
            scheduled[(labels.get("namespace", ""), labels.get("pod", ""))][resource].append(answered)
        elif name == GPU_UTILISATION and labels.get("dra_driver_name") and DRA_GPU in units:
            dra_held[labels.get("UUID", "")].append(((labels.get("namespace", ""), labels.get("pod", "")), answered))
        elif name in TERMS and (rule == "pod" or name == APP_REQUESTS) and resource in units:
            requests[uid][resource][(TERMS[name], labels.get("container", ""))].append(answered)
        elif name == INIT_INFO and labels.get("restart_policy") == "Always":
            sidecars[uid][labels.get("container", "")].append(answered)
        elif name == "kube_pod_info" and labels.get("node"):
            nodes[uid].append((labels["node"], answered))
        elif name == "kube_node_labels":
            models[labels.get("node", "")].append((model_of(labels), answered))

    # (uid, resource) -> the request at each instant where another source than rule 3 has one (NaN elsewhere)
    figures = {(uid, resource): np.fmax.reduce(copies) for pod, by_resource in scheduled.items()
               for resource, copies in by_resource.items() for uid in uids_of[pod]}
    figures |= {(uid, DRA_GPU): share for pod, share in _dra_shares(dra_held, len(index)).items()
                for uid in uids_of[pod]}
    hours: dict[PodKey, float] = defaultdict(float)
    for uid, copies in running.items():
        counted = np.any([copy == 1 for copy in copies], axis=0)  # Running if any exporter says so
        for resource in {*requests[uid], *(r for u, r in figures if u == uid)}:
            request = _reserved(requests[uid].get(resource, {}), sidecars[uid], len(index))
            if (uid, resource) in figures:
                figure = figures[(uid, resource)]
                request = np.where(np.isnan(figure), request, figure)
            billed, scale = units[resource]
            charged = np.where(counted, request, 0.0) * scale * step / 3600
            model = np.full(len(index), "", dtype=object)
            if billed == "gpu":
                node = _newest(nodes[uid], len(index))
                for name in set(node) - {""}:
                    on = node == name
                    model[on] = _newest([(m, times[on]) for m, times in models[name]], int(on.sum()))
            for kind in set(model[charged != 0]):
                hours[(uid, billed, kind)] += float(charged[model == kind].sum())
    return dict(hours)


def _dra_shares(held: dict[str, list[tuple[tuple[str, str], np.ndarray]]], size: int) -> dict[tuple[str, str], np.ndarray]:
    """GPUs held through DRA per (namespace, pod) at each instant (NaN where it holds none): each GPU 1/k to each of
    the k pods dcgm-exporter attributes it to then (docs/spec.md "GPUs through DRA")."""
    total: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros(size))
    holding: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros(size, dtype=bool))
    for copies in held.values():
        seen: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros(size, dtype=bool))
        for holder, answered in copies:
            seen[holder] |= ~np.isnan(answered)
        holders = np.sum(list(seen.values()), axis=0)
        for holder, visible in seen.items():
            total[holder] += np.where(visible, 1.0 / np.maximum(holders, 1), 0.0)
            holding[holder] |= visible
    return {holder: np.where(holding[holder], shares, np.nan) for holder, shares in total.items()}


TERMS = {APP_REQUESTS: "app", INIT_REQUESTS: "init", **{metric: "overhead" for metric in OVERHEAD.values()}}
OVERHEAD_OF = {metric: resource for resource, metric in OVERHEAD.items()}


def _reserved(parts: dict[tuple[str, str], list[np.ndarray]], sidecars: dict[str, list[np.ndarray]],
              size: int) -> np.ndarray:
    """A resource's request of one pod at each instant by docs/spec.md rule 3, from each (term, container)'s copies
    (NaN where not visible): max(app containers + sidecars, each other init container + sidecars) + overhead, an
    init container being a sidecar at the instants its info series with restart_policy="Always" is visible."""
    app, side, overhead = np.zeros(size), np.zeros(size), np.zeros(size)
    init = np.full(size, np.nan)  # the largest other init container's request
    for (term, container), copies in parts.items():
        value = np.fmax.reduce(copies)
        if term == "app":
            app += np.nan_to_num(value)
        elif term == "overhead":
            overhead += np.nan_to_num(value)
        else:
            sidecar = np.any([~np.isnan(seen) for seen in sidecars.get(container, [])], axis=0)
            side += np.where(sidecar, np.nan_to_num(value), 0.0)
            init = np.fmax(init, np.where(sidecar, np.nan, value))
    return np.fmax(app, init) + side + overhead


def _instant_answers(source: PrometheusSource, queries: Queries, day: BillingDay, step: int, uids: list[str],
                     store: Store, cluster: str) -> list[Series]:
    """What an instant query at each of the day's instants answers for every series the bill reads of these
    pods (and of their nodes' labels): per chunk, a range query of the series' value at an instant as the store's
    engine writes it (stores.Engine.latest), and of its sample's timestamp where the newest series decides.
    kube-state-metrics' labels are read where its scrape put them (store.labels) and handed on under their
    plain names."""
    ksm, engine = store.labels.kube_state_metrics, store.engine
    pods = uid_matcher(frozenset(uids))

    def fetch(name: str, expression: str, chunk: Chunk, labels: FamilyLabels = ksm) -> list[Series]:
        answer = source.range(expression, chunk.start, chunk.last, step)
        return [(name, labels.plain_labels(s["metric"]), [(float(t), figure(v, SAMPLE, s["metric"], cluster))
                                                            for t, v in s["values"]]) for s in answer]

    found: list[Series] = []
    for chunk in chunks(day, step):
        pod_nodes = fetch("kube_pod_info", engine.sample_time(queries.pod_node(pods)), chunk)
        found += pod_nodes
        found += fetch("kube_pod_status_phase", engine.latest(queries.running(pods)), chunk)
        found += fetch(APP_REQUESTS, engine.latest(queries.requests(pods)), chunk)
        if queries.rule == "pod":
            found += fetch(INIT_REQUESTS, engine.latest(queries.requests(pods, INIT_REQUESTS)), chunk)
            found += fetch(INIT_INFO, engine.latest(queries.series(INIT_INFO, SIDECAR, pods)), chunk)
            for metric in OVERHEAD.values():
                found += fetch(metric, engine.latest(queries.series(metric, pods)), chunk)
        names = sorted({labels["pod"] for _, labels, _ in pod_nodes if labels.get("pod")})
        if queries.scheduled and names:  # kube-scheduler names pods by namespace and name, not uid
            figures = queries.series(SCHEDULER_REQUESTS, f"resource=~{quote(one_of(SCHEDULED))}",
                                     f"{store.labels.scheduler.pod}=~{quote(one_of(names))}")
            found += fetch(SCHEDULER_REQUESTS, engine.latest(figures), chunk, store.labels.scheduler)
        if queries.dra:  # every GPU held through DRA: a sampled pod's share depends on who else holds its GPUs
            held = queries.series(GPU_UTILISATION, DRA_HELD, WHOLE_GPU)
            found += fetch(GPU_UTILISATION, engine.latest(held), chunk, store.labels.dcgm)
        on = sorted({labels["node"] for _, labels, _ in pod_nodes if labels.get("node")})
        if on:
            found += fetch("kube_node_labels", engine.sample_time(queries.node_labels(node_matcher(on, ksm.node))),
                           chunk)
    return found


class SampledQueries(UsageQueries):
    """collect.py's usage queries with every pod series narrowed to the audited pods (node series as they are)."""

    def __init__(self, cluster: ClusterConfig, gpu_resources: GpuResources, chunk: Chunk, uids: list[str],
                 store: Store, cost_labels: Sequence[str] | None = None):
        super().__init__(cluster, gpu_resources, chunk, store, cost_labels)
        self.sampled = uid_matcher(frozenset(uids))
        self.every_pod = UsageQueries(cluster, gpu_resources, chunk, store, cost_labels)

    def breakdown(self, pods: str = "") -> str:
        # every pod's workload and labels: the exact path takes the audited ones by uid, and naming them in
        # each of its series too would outgrow promql.QUERY_BYTES
        return self.every_pod.breakdown(pods)

    def series(self, metric: str, *matchers: str) -> str:
        # a series that already names its pods (the exact path's, by in_pieces) names audited ones: pods on the
        # exact path come from these narrowed queries, and naming them twice could outgrow promql.QUERY_BYTES
        named = any(m == PLACEHOLDER or m.startswith("uid=~") for m in matchers)
        # kube-scheduler's series name no uid: the pod series they are joined with narrow them
        narrowed = metric.startswith("kube_pod_") and metric != SCHEDULER_REQUESTS and not named
        return super().series(metric, *matchers, *([self.sampled] if narrowed else []))


def _disagreement(cluster: str, day: BillingDay, raw: dict[PodKey, float], fast: dict[PodKey, float],
                  names: dict[str, str]) -> str | None:
    for key in sorted(set(raw) | set(fast)):
        expected, got = raw.get(key, 0.0), fast.get(key, 0.0)
        if not math.isclose(expected, got, rel_tol=TOLERANCE, abs_tol=1e-12):
            uid, resource, model = key
            what = f"{resource} ({model})" if model else resource
            return (f"self-audit of cluster {cluster} on {day.date} failed: pod {names.get(uid, '?')} (uid {uid}) "
                    f"has {expected:.12g} {what} resource-hours instant by instant but {got:.12g} by the billing "
                    f"queries, so the bill cannot be trusted; the ledger keeps its previous rows")
    return None


def audit_cluster(context: ClusterDay, running: Iterable[str], exact: Iterable[str], size: int,
                  cost_labels: Sequence[str] | None = None) -> Audit:
    """Recompute the sampled pods instant by instant and compare with the billing queries; AuditError if they differ.
    With `cost_labels` (workloads enabled) the billing queries are asked as the run asks them, broken down by
    workload and cost labels, so that a pod the breakdown lost would show."""
    started, before = time.monotonic(), context.asked
    cluster, day, step, gpu_resources, counted, store = (context.cluster, context.day, context.step,
                                                         context.gpu_resources, context.source, context.store)
    uids = audited_pods(cluster.name, day, running, exact, size)
    if not uids:
        return Audit(0, 0, time.monotonic() - started)
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    whole_day = Queries(cluster, gpu_resources, Chunk(start, end, step), store)
    samples = _instant_answers(counted, whole_day, day, step, uids, store, cluster.name)
    raw = recompute(samples, list(range(start, end, step)), step, gpu_resources,
                    lambda labels: whole_day.node_kind(labels).model, whole_day.rule)
    first = chunks(day, step)[0]
    groups = _fitting(uids, lambda group: SampledQueries(cluster, gpu_resources, first, group, store, cost_labels))
    def asked(group: list[str]) -> Callable[[Chunk], SampledQueries]:
        return lambda chunk: SampledQueries(cluster, gpu_resources, chunk, group, store, cost_labels)

    billed = pd.concat([pod_usage(asked(group), day, step, gpu_resources, counted) for group in groups],
                       ignore_index=True)
    fast = _by_key(billed)
    names = {labels.get("uid", ""): f"{labels.get('namespace', '')}/{labels.get('pod', '')}" for _, labels, _ in samples}
    problem = _disagreement(cluster.name, day, raw, fast, names)
    if problem:
        raise AuditError(problem)
    return Audit(len(uids), context.asked - before, time.monotonic() - started)


def _fitting(uids: list[str], queries: Callable[[list[str]], SampledQueries]) -> list[list[str]]:
    """The audited pods in as few groups as keep each of a group's usage queries within promql.QUERY_BYTES: the list
    of them is in each of their pod series, and a breakdown by workload and cost labels makes them longer still."""
    sampled = queries(uids)
    texts = (sampled.requested(), sampled.pod_info(), sampled.exact_pods([], copies=True),
             sampled.running_instants(HOUR, copies=True))
    if len(uids) < 2 or all(fits(text) for text in texts):
        return [uids]
    half = len(uids) // 2
    return _fitting(uids[:half], queries) + _fitting(uids[half:], queries)


def _by_key(frame: pd.DataFrame) -> dict[PodKey, float]:
    rows: Iterable[Any] = frame.itertuples()  # rows of named columns (pandas-stubs types their fields as any scalar)
    return {(r.uid, r.resource, r.gpu_model): float(r.quantity) for r in rows}
