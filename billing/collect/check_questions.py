"""What `billing check` asks the store beyond what a run asks: the PromQL of its questions, answered as counts,
flags and resource-hours (is a PromQL engine there; what the request rule adds; what pods bound to a node held; odd
pods; workload labels; the nodes the selector matches; the persistent volume claims bound).

billing/jobs/check.py turns the answers into sentences; the query text and its arithmetic live here, beside the
collectors, so that jobs/ holds none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.energy import GPU_COUNTER, NODE_COUNTER
from billing.collect.figures import CLAIMS, CLUSTER_REQUESTS, NODES, PODS, figure
from billing.collect.preflight import day_queries, window_of
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import (
    APP_REQUESTS,
    CLAIM_PHASE,
    GPU_UTILISATION,
    INIT_INFO,
    INIT_REQUESTS,
    POD_LABELS,
    SCHEDULED,
    Queries,
    one_of,
)
from billing.collect.storage import BOUND
from billing.collect.usage import UsageQueries, bound_pending_hours
from billing.config import DRA_GPU, kube_label

ESTIMATE_STEP = 300  # seconds between the instants the day is sampled at for `billing check`: figures to announce, not a bill
# the terms of docs/spec.md rule 3 besides app containers, as `billing check` names them
TERMS = {"containers": "init containers", "sidecars": "sidecars", "overhead-cpu": "overhead", "overhead-memory": "overhead",
         "dra": "GPUs held through DRA"}
SCHEDULER_TERM = "kube-scheduler's own figures"  # pod-level resources, init containers declared before a sidecar


def vector_one(source: PrometheusSource) -> tuple[bool, list[dict[str, Any]]]:
    """Whether the store answers `vector(1)` now with 1, and its answer: is a PromQL engine there at all?"""
    answer = source.instant("vector(1)", time.time())
    return [sample["value"][1] for sample in answer] == ["1"], answer


@dataclass(frozen=True)
class UnbillablePods:
    """Running pods of a day whose requests kube-state-metrics leaves billing blind to, counted."""

    sidecars: int  # pods with an init container running (a native sidecar) at some sampled instant
    sidecars_told_apart: bool  # some kube_pod_init_container_info carries restart_policy (kube-state-metrics v2.11+)
    pod_level: int  # Burstable or Guaranteed pods with no container requesting cpu or memory (pod-level resources)


def unbillable_pods(queries: Queries, source: PrometheusSource, at: int, day: str) -> UnbillablePods:
    """Count the day's (`day`: its length as a PromQL range, ending at `at`) pods whose requests billing cannot see;
    with kube-scheduler's figures scraped, pod-level pods it has figures for are not counted."""
    running = f'({queries.running()} == 1)'

    def pods(during_running: str) -> int:
        """How many pods the expression (per uid, joined with Running) has at some sampled instant of the day."""
        answer = source.instant(f"count(max_over_time(({during_running} and on (uid) {running})[{day}:{queries.step}]))", at)
        return int(figure(answer[0]["value"][1], PODS, answer[0]["metric"], queries.cluster)) if answer else 0

    told_apart = queries.series(INIT_INFO, 'restart_policy!=""')  # v2.11 and later label sidecars
    labelled = source.instant(f"count(last_over_time({told_apart}[{day}]))", at)
    sidecars = pods(f"group by (uid) ({queries.series('kube_pod_init_container_status_running')} == 1)")
    requested = 'resource=~"cpu|memory"'
    requesting = queries.series("kube_pod_status_qos_class", 'qos_class!="BestEffort"')
    pod_level_pods = (f"group by (uid) ({requesting} == 1) unless on (uid) {queries.series(APP_REQUESTS, requested)} "
                      f"unless on (uid) {queries.series(INIT_REQUESTS, requested)}")
    pod_level = pods(pod_level_pods)
    if pod_level and queries.scheduled:
        pod_level = pods(f"({pod_level_pods}) unless on (uid) {queries.scheduler_requests(lambda selector: selector)}")
    return UnbillablePods(sidecars, bool(labelled), pod_level)


def workload_labels_seen(context: ClusterDay, cost_labels: list[str]) -> tuple[bool, list[str]]:
    """Whether some pod's kube_pod_info carries created_by_kind on the day, and which of `cost_labels` no pod's
    kube_pod_labels carries: what the breakdown by workload and cost label reads besides the owners."""
    queries, (window, at) = day_queries(context), window_of(context.day)

    def seen(series: str) -> bool:
        return bool(context.source.instant(f"count(last_over_time({series}[{window}]))", at))

    controllers = seen(queries.series("kube_pod_info", 'created_by_kind!=""'))
    return controllers, [name for name in cost_labels if not seen(queries.series("kube_pod_labels", f'{kube_label(name)}!=""'))]


def selected_nodes(context: ClusterDay) -> int | None:
    """How many nodes of kube-state-metrics the cluster's selector matches on the day, None if the store has no
    sample of kube_node_labels under it at all."""
    window, at = window_of(context.day)
    # exported_node: where a honor_labels: false scrape put the node's name (`node` is then kube-state-metrics' own)
    query = (f"count(group by (node, exported_node) "
             f"(last_over_time(kube_node_labels{{{context.cluster.prometheus.selector}}}[{window}])))")
    answer = context.source.instant(query, at)
    return round(figure(answer[0]["value"][1], NODES, answer[0]["metric"], context.cluster.name)) if answer else None


def claims_bound(context: ClusterDay) -> int:
    """How many persistent volume claims (namespace, name) were Bound at some sample the day's instants can see
    (docs/spec.md "Storage"), a claim's copies (per exporter) once."""
    queries, (window, at) = day_queries(context), window_of(context.day)
    phases = queries.ksm.plain(f"max_over_time({queries.series(CLAIM_PHASE, BOUND)}[{window}])",
                               ("namespace",))
    answer = context.source.instant(f"count(max by (namespace, persistentvolumeclaim) ({phases}) == 1)", at)
    return round(figure(answer[0]["value"][1], CLAIMS, answer[0]["metric"], context.cluster.name)) if answer else 0


@dataclass(frozen=True)
class RuleAdds:
    """Of one resource on the day, in billing's units (memory in byte-hours): app containers' requests and what
    docs/spec.md rule 3 adds over them, per term (TERMS' names and SCHEDULER_TERM)."""

    app: float
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def more(self) -> float:
        return sum(self.parts.values())


@dataclass(frozen=True)
class RequestRule:
    """What the request rule (`requests: pod`, asked whatever the cluster says) adds on the day, and the pods whose
    requests billing cannot see."""

    added: dict[str, RuleAdds]  # per resource, sorted by name
    unbillable: UnbillablePods
    scheduled: bool  # kube-scheduler's own figures are read


def added_by_rule(context: ClusterDay) -> RequestRule:
    """The day sampled every ESTIMATE_STEP seconds as `requests: pod` bills it, asked at the day's last instant."""
    day = context.day
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    queries = Queries(context.cluster.model_copy(update={"requests": "pod"}), context.gpu_resources,
                      Chunk(start, end, ESTIMATE_STEP), context.store)
    added = _hours_by_term(queries, context.source, end - ESTIMATE_STEP)  # the day's last instant
    return RequestRule(added, unbillable_pods(queries, context.source, end, f"{end - start}s"), queries.scheduled)


def _hours_by_term(queries: Queries, source: PrometheusSource, at: int) -> dict[str, RuleAdds]:
    """Per resource: the hours of app containers' requests, and those rule 3 adds over them per term."""
    highest = queries.highest
    running = queries.ksm.plain(f"sum_over_time({queries.latest(queries.running())}[{queries.instants}:{queries.step}])")
    terms = {"app": queries.app_requests(highest), **queries.reserved_terms(highest),
             **({"scheduler": queries.effective(highest, resources=one_of(SCHEDULED))} if queries.scheduled else {})}
    labelled = " or ".join(f'label_replace({expression}, "term", "{term}", "", "")' for term, expression in terms.items())
    query = (f"sum by (resource, term) (({labelled}) * on (namespace, pod, uid) group_left () "
             f"max by (namespace, pod, uid) ({running}))")
    chunk = queries.chunk
    instants = (chunk.end - chunk.start) / chunk.step

    def hours_of(series: dict[str, Any]) -> float:
        """A sum over the day's instants as resource-hours, through the gate."""
        value = figure(series["value"][1], CLUSTER_REQUESTS, series["metric"], queries.cluster, instants)
        return value * chunk.step / 3600

    hours: dict[str, dict[str, float]] = {}
    for series in source.instant(query, at):
        labels = series["metric"]
        hours.setdefault(labels.get("resource", ""), {})[labels.get("term", "")] = hours_of(series)
    if queries.dra:  # instant by instant: a shared GPU's shares change as pods come and go
        running_now = f"max by (namespace, pod, uid) ({queries.ksm.plain(queries.latest(queries.running()), POD_LABELS)} == 1)"
        held = f"sum({queries.dra_gpus(queries.latest)} * on (namespace, pod, uid) group_left () {running_now})"
        for series in source.instant(f"sum_over_time({held}[{queries.instants}:{queries.step}])", at):
            hours.setdefault(DRA_GPU, {})["dra"] = hours_of(series)
    added = {}
    for resource, by_term in sorted(hours.items()):
        app = by_term.get("app", 0.0)
        parts = {TERMS[term]: 0.0 for term in TERMS}
        for term, value in by_term.items():
            if term in TERMS:
                parts[TERMS[term]] += value - (app if term == "containers" else 0.0)
        if "scheduler" in by_term:  # the whole of what is billed: the part the scheduler's figures change is the rest
            parts[SCHEDULER_TERM] = by_term["scheduler"] - app - sum(parts.values())
        added[resource] = RuleAdds(app, parts)
    return added


def held_while_pending(context: ClusterDay) -> pd.DataFrame:
    """What pods bound to a node held on the day before they ran, and what Running pods requested (reason None), as
    the bill measures them (resource, reason, quantity), the whole day asked as one chunk every ESTIMATE_STEP."""
    day = context.day
    chunk = Chunk(int(day.start.timestamp()), int(day.end.timestamp()), ESTIMATE_STEP)
    return bound_pending_hours(context.source, UsageQueries(context.cluster, context.gpu_resources, chunk, context.store),
                               chunk)


def unmetered(context: ClusterDay) -> tuple[list[str], list[str]]:
    """What `billing check`'s energy line names (docs/spec.md "Energy and carbon"): the GPUs dcgm-exporter reports on
    the day without an energy counter (`UUID on Hostname`), and the nodes kube-state-metrics lists without Kepler's
    node counters; one query, each part told apart by its `figure` label."""
    queries, (window, at) = day_queries(context), window_of(context.day)

    def seen(metric: str, by: str) -> str:
        return f"group by ({by}) (last_over_time({queries.series(metric)}[{window}]))"

    gpus = f"{seen(GPU_UTILISATION, 'UUID, Hostname')} unless on (UUID) {seen(GPU_COUNTER, 'UUID')}"
    nodes = queries.ksm.plain(f"last_over_time({queries.node_labels()}[{window}])", ("node",))
    kepler = f'label_replace({seen(NODE_COUNTER, "node_name")}, "node", "$1", "node_name", "(.*)")'
    query = (f'label_replace({gpus}, "figure", "gpu", "", "")\n'
             f'or label_replace(group by (node) ({nodes}) unless on (node) {kepler}, "figure", "node", "", "")')
    answer = [series["metric"] for series in context.source.instant(query, at)]
    return (sorted(f"{m.get('UUID', '')} on {m.get('Hostname', '')}" for m in answer if m.get("figure") == "gpu"),
            sorted(m.get("node", "") for m in answer if m.get("figure") == "node"))
