"""Kueue's quotas as kueue-controller-manager exports them, read at each of the day's instants (docs/spec.md "Kueue
quotas"): a ClusterQueue's nominal quota, its admitted workloads' usage and its lending limit per flavor and
resource. The arithmetic on them is billing/charge/quotas.py's; here only what a range query answers, each figure
through the gate (billing/collect/figures.py).

Several kueue-controller-manager replicas each export the gauges. Kueue labels them with `replica_role` (leader,
follower, standalone; pkg/util/roletracker): at each instant the leader's copy is read, else a copy that is no
follower's, else a follower's. Copies of the one chosen role that disagree (older Kueue, no role) refuse the day
with both figures: nothing tells which replica is current, and the larger was a stale follower's quota once."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from billing.collect.context import ClusterDay
from billing.collect.figures import LENDING_LIMIT as LENDING_LIMIT_FIGURES
from billing.collect.figures import NOMINAL_QUOTA, QUEUE_USAGE, Family, figure, written
from billing.errors import RunFailed

NOMINAL = "kueue_cluster_queue_nominal_quota"
USAGE = "kueue_cluster_queue_resource_usage"
LENDING_LIMIT = "kueue_cluster_queue_lending_limit"
FAMILIES: dict[str, Family] = {NOMINAL: NOMINAL_QUOTA, USAGE: QUEUE_USAGE, LENDING_LIMIT: LENDING_LIMIT_FIGURES}
QUEUE_LABELS = ["cohort", "cluster_queue", "flavor", "resource"]  # Kueue's label names (pkg/metrics)
REPLICA_LABELS = ["replica_role", "instance"]  # which replica's copy a series is
SAMPLES = ["family", *QUEUE_LABELS, "t", "value"]  # what collect_quotas answers, one row per series and instant
# the order in which a role's copies are read: the leader's, then a single replica's or one of a Kueue without roles
ROLES = {"leader": 0, "standalone": 1, "": 1, "follower": 2}


class ReplicasDisagree(RunFailed):
    """Two kueue-controller-manager replicas of one role report different figures for one queue at one instant."""


def quota_query(context: ClusterDay) -> str:
    """Each family's value at each instant (rule 1's lookback, as the store's engine writes it) per queue, flavor,
    resource and replica, under the cluster's selector, its name in `family`: one query per chunk, for a few series."""
    selector = context.cluster.prometheus.selector.strip()
    by = ", ".join([*QUEUE_LABELS, *REPLICA_LABELS])
    return "\nor ".join(f'label_replace(max by ({by}) ({context.store.engine.latest(f"{name}{{{selector}}}")}), '
                        f'"family", "{name}", "", "")' for name in FAMILIES)


def collect_quotas(context: ClusterDay) -> pd.DataFrame:
    """Every Kueue quota series of the cluster-day at each instant it is visible (SAMPLES), one replica's copy each;
    none without `kueue`. A cluster with `kueue` whose store has no quota at all is refused, as a family the bill
    needs (docs/spec.md "Rule 10: no data is not zero"): its teams would pay no quota and the day would look
    complete."""
    if context.cluster.kueue is None:
        return pd.DataFrame(columns=SAMPLES)
    cluster = context.cluster.name
    rows = []
    for chunk in context.chunks():
        for series in context.source.range(quota_query(context), chunk.start, chunk.last, context.step):
            labels = series["metric"]
            name = labels.get("family", "")
            rows += [(name, *(labels.get(label, "") for label in [*QUEUE_LABELS, *REPLICA_LABELS]), float(t),
                      figure(v, FAMILIES[name], labels, cluster)) for t, v in series["values"]]
    if not any(family == NOMINAL for family, *_ in rows):
        raise RunFailed(
            f"cluster {cluster}: the store holds no {NOMINAL} sample on {context.day.date} under the "
            "cluster's selector, so its Kueue quotas cannot be billed: scrape kueue-controller-manager's metrics "
            "(docs/deploy.md), or remove clusters[].kueue; nothing was billed and the day stays missing")
    return one_replica(rows, cluster)


def one_replica(rows: Iterable[tuple], cluster: str) -> pd.DataFrame:
    """SAMPLES from rows of (family, *QUEUE_LABELS, *REPLICA_LABELS, t, value): per series and instant the copies of
    the first role in ROLES' order, which must agree (ReplicasDisagree names both figures)."""
    copies = pd.DataFrame(rows, columns=["family", *QUEUE_LABELS, *REPLICA_LABELS, "t", "value"])
    copies["rank"] = copies["replica_role"].map(ROLES).fillna(ROLES[""])
    key = ["family", *QUEUE_LABELS, "t"]
    chosen = copies[copies["rank"] == copies.groupby(key)["rank"].transform("min")]
    spread = chosen.groupby(key)["value"].agg(["min", "max"])
    differing = spread[spread["min"] != spread["max"]]
    if len(differing):
        (family, *labels, t), = differing.index[:1]
        figures = chosen.set_index(key).loc[(family, *labels, t)]
        both = " and ".join(f"{written(value)} from {instance or 'a replica'} ({role or 'no replica_role'})"
                            for role, instance, value in figures[["replica_role", "instance", "value"]].values[:2])
        shown = ", ".join(f'{name}="{value}"' for name, value in zip(QUEUE_LABELS, labels))
        at = pd.Timestamp(t, unit="s", tz="UTC").isoformat()
        raise ReplicasDisagree(
            f"cluster {cluster}: kueue-controller-manager replicas disagree on {family}{{{shown}}} at {at}: {both}, "
            "and no replica_role says which is the leader's; run a Kueue whose gauges carry replica_role, or "
            "scrape the leader only, then run the day again; nothing was billed")
    return chosen.drop_duplicates(key)[SAMPLES].reset_index(drop=True)
