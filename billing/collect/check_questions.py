"""What `billing check` asks the store beyond what a run asks: the PromQL of its questions, answered as counts and
flags.

billing/jobs/check.py turns the counts into sentences; the query text lives here, beside the collectors, so that
jobs/ holds none.
"""

from __future__ import annotations

from dataclasses import dataclass

from billing.collect.context import ClusterDay
from billing.collect.figures import NODES, PODS, figure
from billing.collect.preflight import day_queries, window_of
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import APP_REQUESTS, INIT_INFO, INIT_REQUESTS, Queries
from billing.config import kube_label


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
