"""A cluster-day's collection: what is asked of its store, in which order, and what the bill may not do without.

`collect_day` is the one recipe `billing run` and `billing backfill` collect a cluster-day by (the demo's recorder
asks the same questions through a recording source): the usage first, whose answers show most families present;
then the preflight of what they did not show; the self-audit; the nodes' allocatable capacity; waste; Kueue's
quotas; persistent volumes' storage, whose rows join the usage's; energy, where the cluster asks for it. What it returns is one `CollectedDay`, which billing/charge/bill.py bills.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import date

import pandas as pd

from billing import frames
from billing.collect.audit import audit_cluster
from billing.collect.capacity import bills_capacity, collect_allocatable
from billing.collect.context import ClusterDay, cluster_day
from billing.collect.energy import EnergyDay, collect_energy, refuse_unmeasured
from billing.collect.figures import ImpossibleFigure
from billing.collect.kueue import collect_quotas
from billing.collect.preflight import preflight, refuse_missing
from billing.collect.prometheus import PrometheusSource
from billing.collect.storage import StorageDay, collect_storage
from billing.collect.usage import ClusterUsage, collect_cluster
from billing.collect.waste import MEASURES, WORKLOAD_WASTE_KEYS, collect_waste, waste_by_namespace
from billing.config import ClusterConfig, Config
from billing.config.energy import Energy
from billing.days import BillingDay
from billing.errors import RunFailed
from billing.resources import CPU, ENERGY, GPU, MEMORY, RESOURCES

log = logging.getLogger(__name__)


class IncompleteDayError(RunFailed):
    """A cluster's data has gaps beyond what --require-coverage accepts."""


@dataclass(frozen=True)
class CollectedDay:
    """What one cluster's store said about the day: usage (storage's rows among it), allocatable capacity, waste,
    Kueue's quotas and the storage per class."""

    cluster: ClusterConfig
    usage: ClusterUsage  # without what only the collection reads (ClusterUsage.billed)
    allocatable: pd.DataFrame | None  # frames.ALLOCATABLE; None where a figure of it is impossible and the bill needs none
    wasted: pd.DataFrame  # frames.WASTE and cluster
    workload_wasted: pd.DataFrame  # waste.WORKLOAD_WASTE_KEYS, MEASURES and cluster; no rows with workloads off
    quotas: pd.DataFrame  # collect/kueue.SAMPLES; none without `kueue`
    capacity_unknown: str = ""  # why `allocatable` is None
    # frames.STORAGE_CLASSES: per storage class the volumes provisioned, claimed and unclaimed (shown, never billed);
    # no rows on a day without persistent volume claims
    storage_classes: pd.DataFrame = field(default_factory=frames.STORAGE_CLASSES.empty)
    # per namespace its kWh (docs/spec.md "Energy and carbon"), and the cluster's `energy` set in force on the day
    # (its price and carbon intensity); both None for a cluster without `energy`
    energy: EnergyDay | None = None
    energy_in_force: Energy | None = None


def collect_day(config: Config, cluster: ClusterConfig, period: BillingDay, source: PrometheusSource) -> CollectedDay:
    """One cluster-day from its store; refused when a family the bill needs has no sample (`billing check`'s
    preflight), when the store holds no data, when a figure is impossible (collect/figures.py) or when it fails its
    self-audit."""
    try:
        return _collected(config, cluster, period, source)
    except ImpossibleFigure as refused:
        raise refused.on(period.date) from None


def _collected(config: Config, cluster: ClusterConfig, period: BillingDay, source: PrometheusSource) -> CollectedDay:
    context = cluster_day(cluster, period, int(config.step), config.gpu_resources, source)  # the store asked once
    cost_labels = config.cost_labels if config.workloads.enabled else None
    usage = collect_cluster(context, cost_labels)
    storage = collect_storage(context, cost_labels, usage.pod_workloads)
    # after the usage and storage, whose answers show most families present: the preflight asks only what they did
    # not show
    seen = replace(usage.seen, found=usage.seen.found | storage.seen)
    refuse_missing(preflight(context, config.workloads.enabled, seen))
    refuse_no_data(usage, cluster, period.date)
    if config.audit.enabled:
        # the audit asks the queries without the breakdown: with it, each audited group of pods evaluates every
        # pod's workload again (measured at 50,000 pods: 53 s instead of 2 s); tests audit the breakdown instead
        audit = audit_cluster(context, usage.running, usage.exact, config.audit.pods)
        log.info("cluster %s: self-audit of %d pods instant by instant agrees (%d queries, %.2f s)", cluster.name,
                 audit.pods, audit.queries, audit.seconds)
    allocatable, capacity_unknown = _allocatable(context)
    wasted, workload_wasted = _collect_waste(config, context, usage, storage)
    quotas = collect_quotas(context)
    energy = _collect_energy(context, set(usage.usage["namespace"]))
    in_force = cluster.energy_on(period.date)
    _log_cluster(usage)
    billed = _with_storage(usage, storage).billed()
    return CollectedDay(cluster, billed, allocatable, wasted.assign(cluster=cluster.name),
                        workload_wasted.assign(cluster=cluster.name), quotas, capacity_unknown, storage.classes, energy,
                        in_force)


def _collect_energy(context: ClusterDay, namespaces: set[str]) -> EnergyDay | None:
    """The cluster-day's energy where the cluster has an `energy` section, a row for each of the day's billed
    `namespaces`; refused without its counters where it is priced (rule 10)."""
    settings = context.cluster.energy_on(context.day.date)
    if settings is None:
        return None
    energy = collect_energy(context)
    if settings.price_kwh is not None:
        refuse_unmeasured(energy, context.cluster.name, context.day.date)
    return energy.covering(namespaces)


def _with_storage(usage: ClusterUsage, storage: StorageDay) -> ClusterUsage:
    """The usage with storage's rows after its own, per namespace and (where collected) per workload."""
    if storage.usage.empty:
        return usage
    workloads = usage.workloads
    if workloads is not None and storage.workloads is not None:
        workloads = pd.concat([workloads, storage.workloads], ignore_index=True)
    return replace(usage, usage=pd.concat([usage.usage, storage.usage], ignore_index=True), workloads=workloads)


def refuse_no_data(collected: ClusterUsage, cluster: ClusterConfig, day: date) -> None:
    """No data is not zero (docs/spec.md "Rule 10: no data is not zero"): a cluster-day at whose instants no kube-state-metrics
    series was visible and no pod Running had no sample at all (a selector typo, a day outside
    retention, a scrape that never ran), and billing it would record a false zero as complete."""
    if collected.coverage == 0 and collected.pods == 0 and collected.usage.empty:
        selector = cluster.prometheus.selector.strip()
        where = f"under the selector {selector}" if selector else "at all"
        raise IncompleteDayError(
            f"cluster {cluster.name}: Prometheus holds no kube-state-metrics sample for {day} {where} (a selector "
            "typo, a day outside retention, or a scrape that never ran); nothing was billed and the day stays missing"
        )


def check_coverage(collected: list[CollectedDay], day: date, required: float) -> None:
    """Warn of each cluster's share of the day without kube-state-metrics data; refuse the day where it is more than
    --require-coverage accepts."""
    for usage in (c.usage for c in collected):
        if usage.coverage < 1:
            log.warning("cluster %s: kube-state-metrics data is missing for %.1f%% of %s; pods then are not billed",
                        usage.cluster, 100 * (1 - usage.coverage), day)
        if usage.coverage < required:
            raise IncompleteDayError(
                f"cluster {usage.cluster}: kube-state-metrics data covers only {usage.coverage:.1%} of {day}, "
                f"below the required {required:.1%}; the ledger keeps its previous rows"
            )


def _allocatable(context: ClusterDay) -> tuple[pd.DataFrame | None, str]:
    """The cluster's allocatable capacity, and ''; or where its bill needs none (capacity.bills_capacity) and a
    figure of it is impossible, None and why, which the night's log says and the pages show."""
    try:
        return collect_allocatable(context), ""
    except ImpossibleFigure as refused:
        if bills_capacity(context.cluster):
            raise
        log.warning("cluster %s: its capacity on %s is unknown: %s; its bill needs none (no reserved pool, Kueue quota "
                    "or shared unrequested capacity), so the day is billed", context.cluster.name, context.day.date,
                    refused.reason)
        return None, refused.reason


def _collect_waste(config: Config, context: ClusterDay, usage: ClusterUsage,
                   storage: StorageDay) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Waste per namespace (frames.WASTE.columns) and per workload (none with workloads off); with workloads on,
    the namespace's is the sum over its workloads, from the same queries. The usage's and storage's figures are
    taken, not asked again."""
    none = pd.DataFrame(columns=[*WORKLOAD_WASTE_KEYS, *MEASURES])
    if not config.waste.enabled:
        return pd.DataFrame(columns=frames.WASTE.columns), none
    by_workload = config.workloads.enabled
    wasted = collect_waste(context, config.waste.gpu_utilisation_below, by_workload=by_workload, usage=usage,
                           sizes=storage.sizes)
    return (waste_by_namespace(wasted), wasted) if by_workload else (wasted, none)


def hours_by_resource(usage: ClusterUsage) -> dict[str, float]:
    """The cluster-day's resource-hours of each resource (0.0 of one no pod used), as the night's log and the pushed
    run metrics say them; energy's kWh are no resource-hours of the usage (charge bills them where priced)."""
    by_resource = usage.usage.groupby("resource")["quantity"].sum()
    return {resource: float(by_resource.get(resource, 0.0)) for resource in RESOURCES if resource != ENERGY}


def _log_cluster(collected: ClusterUsage) -> None:
    hours = hours_by_resource(collected)
    log.info(
        "cluster %s: %d namespaces, %d pods, %.2f GPU-h, %.2f core-h, %.2f GiB-h (%d queries)",
        collected.cluster,
        collected.usage["namespace"].nunique(),
        collected.pods,
        hours[GPU],
        hours[CPU],
        hours[MEMORY],
        collected.queries,
    )
