"""Kueue's quotas as kueue-controller-manager exports them, read at each of the day's instants (docs/spec.md "Kueue
quotas"): a ClusterQueue's nominal quota, its admitted workloads' usage and its lending limit per flavor and
resource. The arithmetic on them is billing/charge/quotas.py's; here only what an instant query answers.

Kueue's gauges carry `replica_role` (leader, follower, standalone) and any custom labels; billing keeps
(cohort, cluster_queue, flavor, resource) and counts a series reported by several replicas once, the largest."""

from __future__ import annotations

import pandas as pd

from billing.collect.context import ClusterDay
from billing.errors import RunFailed

NOMINAL = "kueue_cluster_queue_nominal_quota"
USAGE = "kueue_cluster_queue_resource_usage"
LENDING_LIMIT = "kueue_cluster_queue_lending_limit"
FAMILIES = (NOMINAL, USAGE, LENDING_LIMIT)
QUEUE_LABELS = ["cohort", "cluster_queue", "flavor", "resource"]  # Kueue's label names (pkg/metrics)
SAMPLES = ["family", *QUEUE_LABELS, "t", "value"]  # what collect_quotas answers, one row per series and instant


def quota_query(context: ClusterDay, family: str) -> str:
    """The family's value at each instant (rule 1's lookback, as the store's engine writes it) per queue, flavor
    and resource, under the cluster's selector."""
    selector = context.cluster.prometheus.selector.strip()
    return f"max by ({', '.join(QUEUE_LABELS)}) ({context.store.engine.latest(f'{family}{{{selector}}}')})"


def collect_quotas(context: ClusterDay) -> pd.DataFrame:
    """Every Kueue quota series of the cluster-day at each instant it is visible (SAMPLES); none without `kueue`.
    A cluster with `kueue` whose store has no quota at all is refused, as a family the bill needs (docs/spec.md
    "Rule 10: no data is not zero"): its teams would pay no quota and the day would look complete."""
    if context.cluster.kueue is None:
        return pd.DataFrame(columns=SAMPLES)
    rows = []
    for chunk in context.chunks():
        for family in FAMILIES:
            for series in context.source.range(quota_query(context, family), chunk.start, chunk.last, context.step):
                labels = [series["metric"].get(label, "") for label in QUEUE_LABELS]
                rows += [(family, *labels, float(t), float(v)) for t, v in series["values"]]
    if not any(family == NOMINAL for family, *_ in rows):
        raise RunFailed(
            f"cluster {context.cluster.name}: the store holds no {NOMINAL} sample on {context.day.date} under the "
            "cluster's selector, so its Kueue quotas cannot be billed: scrape kueue-controller-manager's metrics "
            "(docs/deploy.md), or remove clusters[].kueue; nothing was billed and the day stays missing")
    return pd.DataFrame(rows, columns=SAMPLES)
