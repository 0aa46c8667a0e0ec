"""The nightly run of one billing day: collect, own, price, write the ledger."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from sqlalchemy import Engine

from billing import frames
from billing.charge.bill import DayBill
from billing.charge.bound_pending import held_sentence
from billing.charge.ownership import assign_owners
from billing.charge.pricing import price, price_holdings, reserve_pools, share_unrequested, unrequested_capacity
from billing.charge.quotas import queue_remarks, quota_hours, quota_rows, unlent_borrowing, unpriced_flavors
from billing.charge.workloads import kept_since, workload_costs
from billing.collect.audit import audit_cluster
from billing.collect.capacity import bills_capacity, collect_allocatable
from billing.collect.context import ClusterDay, cluster_day
from billing.collect.figures import ImpossibleFigure
from billing.collect.kueue import NOMINAL, collect_quotas
from billing.collect.preflight import preflight, refuse_missing
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import gpu_fractions
from billing.collect.replay import prometheus_source
from billing.collect.usage import ClusterUsage, collect_cluster
from billing.collect.waste import MEASURES, WORKLOAD_WASTE_KEYS, attribute_waste, collect_waste, waste_by_namespace
from billing.config import ClusterConfig, Config, Prices
from billing.days import BillingDay, billing_day
from billing.directory.names import check_names
from billing.directory.people import (
    AmbiguousDirectoryError,
    Directory,
    DirectoryError,
    directory_from_json,
    directory_to_json,
)
from billing.directory.sources import load_directory
from billing.errors import RunFailed
from billing.ledger.database import open_ledger
from billing.ledger.read import latest_directory
from billing.ledger.write import replace_day
from billing.notify.budget_alerts import send_alerts
from billing.notify.deliveries import deliver_once
from billing.notify.summaries import summary_envelopes
from billing.publish.answers import day_report, digests
from billing.publish.budgets import team_budgets
from billing.publish.dayview import DayReport
from billing.publish.pages import check_output_dir, write_pages
from billing.redact import redact
from billing.resources import CPU, GPU, MEMORY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    day: date
    rows: int
    total_cost: float
    clusters: list[ClusterUsage]
    cluster_costs: dict[str, float]  # cost of the day per configured cluster, 0.0 for one where nothing ran
    undelivered: tuple[str, ...] = ()  # one sentence per summary email that failed
    directory_warning: str = ""  # why the last known directory was used (unreachable), for reports and emails


def _log_cluster(collected: ClusterUsage) -> None:
    hours = collected.usage.groupby("resource")["quantity"].sum()
    log.info(
        "cluster %s: %d namespaces, %d pods, %.2f GPU-h, %.2f core-h, %.2f GiB-h (%d queries)",
        collected.cluster,
        collected.usage["namespace"].nunique(),
        collected.pods,
        hours.get(GPU, 0.0),
        hours.get(CPU, 0.0),
        hours.get(MEMORY, 0.0),
        collected.queries,
    )


def _read_directory(config: Config, ledger: Engine) -> tuple[Directory, str]:
    """The directory and a warning; with `on_failure: last_known` an outage falls back to the last run's copy
    (which is refused like a live one if it is ambiguous)."""
    try:
        return load_directory(config.directory), ""
    except DirectoryError as exc:
        if config.directory.on_failure != "last_known" or isinstance(exc, AmbiguousDirectoryError):
            raise  # an ambiguous directory was read fine: an older copy would only hide the ambiguity
        stored = latest_directory(ledger)
        if stored is None:
            raise DirectoryError(f"{exc}; and no earlier run stored a directory to fall back on") from None
        taken_at, content = stored
        # kept in the ledger and shown in reports and emails, so without the passwords of URLs
        warning = redact(f"{exc}; people and teams are as of the last successful run ({taken_at:%Y-%m-%d %H:%M} UTC)")
        log.warning("DIRECTORY UNAVAILABLE, USING THE LAST KNOWN ONE: %s", warning)
        return directory_from_json(content), warning


def _log_capacity(cluster: str, capacity: pd.DataFrame) -> None:
    row: Any  # a row of the frame's named columns (pandas-stubs types its fields as any scalar)
    for row in capacity.groupby("resource")[["allocatable", "requested", "unrequested", "unrequested_cost"]].sum().itertuples():
        log.info("cluster %s: %s %.1f%% requested, %.2f of %.2f resource-hours unrequested (%.2f at list price)", cluster,
                 row.Index, 100 * row.requested / row.allocatable if row.allocatable else 0.0,
                 row.unrequested, row.allocatable, row.unrequested_cost)


class IncompleteDayError(RunFailed):
    """A cluster's data has gaps beyond what --require-coverage accepts."""


def _check_coverage(collected: list[ClusterUsage], day: date, required: float) -> None:
    for usage in collected:
        if usage.coverage < 1:
            log.warning("cluster %s: kube-state-metrics data is missing for %.1f%% of %s; pods then are not billed",
                        usage.cluster, 100 * (1 - usage.coverage), day)
        if usage.coverage < required:
            raise IncompleteDayError(
                f"cluster {usage.cluster}: kube-state-metrics data covers only {usage.coverage:.1%} of {day}, "
                f"below the required {required:.1%}; the ledger keeps its previous rows"
            )


def _refuse_no_data(collected: ClusterUsage, cluster: ClusterConfig, day: date) -> None:
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


# a day's summaries: those not sent yet, all again, none (--no-email), or none as a backfill's day before yesterday
Summaries = Literal["send", "resend", "none", "backfilled"]
WHY_NONE = {"none": "--no-email", "backfilled": "a backfill of a day before yesterday; --email sends them"}


def run_day(config: Config, day: date, require_coverage: float = 0.0,
            turn: AbstractContextManager | None = None, summaries: Summaries = "send") -> RunSummary:
    """Bill one day: collect from every cluster, bill into the ledger, publish pages and emails.

    Every data source is read before the ledger is touched, so a failed run leaves it as it was. The ledger
    is written and the day published within `turn`: a backfill collects several days at once and lets them
    write one at a time, oldest first (billing/jobs/backfill.py)."""
    check_output_dir(Path(config.output_dir))
    ledger = open_ledger(config.database)
    period = billing_day(day, config.zone)
    log.info("billing %s (%s to %s UTC)", day, period.start.isoformat(), period.end.isoformat())
    if period.end > datetime.now(timezone.utc):
        log.warning("%s has not ended yet in %s: its bill is partial until the day is run again", day, config.timezone)
    # the price sets in force that day: a day no set covers is refused before any store is asked
    prices = {cluster.name: cluster.prices_on(day) for cluster in config.clusters}

    collected = [_collect_cluster(config, cluster, period) for cluster in config.clusters]
    _check_coverage([c.usage for c in collected], day, require_coverage)
    directory, directory_warning = _read_directory(config, ledger)
    check_names(config, directory)  # a team or person the config names that it does not hold: exit 2, nothing written
    with turn or nullcontext():
        rows, written = _bill(config, ledger, day, prices, collected, directory, directory_warning)
        undelivered = _publish(config, ledger, day, directory, summaries)

    costs = rows.groupby("cluster")["cost"].sum()
    return RunSummary(
        day,
        written,
        float(rows["cost"].sum()),
        [c.usage for c in collected],
        {c.name: float(costs.get(c.name, 0.0)) for c in config.clusters},
        tuple(undelivered),
        directory_warning=directory_warning,
    )


@dataclass(frozen=True)
class _Collected:
    """What one cluster's store said about the day: usage, capacity, waste and Kueue's quotas."""

    usage: ClusterUsage
    capacity: pd.DataFrame  # frames.CAPACITY
    wasted: pd.DataFrame  # frames.WASTE and cluster
    workload_wasted: pd.DataFrame  # waste.WORKLOAD_WASTE_KEYS, MEASURES and cluster; no rows with workloads off
    quotas: pd.DataFrame  # collect/kueue.SAMPLES; none without `kueue`
    capacity_unknown: str = ""  # why `capacity` has no rows, where an impossible figure left it unknown


def _collect_cluster(config: Config, cluster: ClusterConfig, period: BillingDay) -> _Collected:
    return collect_from(config, cluster, period, prometheus_source(cluster.name, cluster.prometheus))


def collect_from(config: Config, cluster: ClusterConfig, period: BillingDay, source: PrometheusSource) -> _Collected:
    """One cluster-day from its store; refused when a family the bill needs has no sample (`billing check`'s
    preflight), when the store holds no data, when a figure is impossible (collect/figures.py) or when it fails its
    self-audit. (The demo's recorder asks the same questions through a recording source.)"""
    try:
        return _collected(config, cluster, period, source)
    except ImpossibleFigure as refused:
        raise refused.on(period.date) from None


def _collected(config: Config, cluster: ClusterConfig, period: BillingDay, source: PrometheusSource) -> _Collected:
    context = cluster_day(cluster, period, int(config.step), config.gpu_resources, source)  # the store asked once
    cost_labels = config.cost_labels if config.workloads.enabled else None
    usage = collect_cluster(context, cost_labels)
    # after the usage, whose answers show most families present: the preflight asks only what they did not show
    refuse_missing(preflight(context, config.workloads.enabled, usage.seen))
    _refuse_no_data(usage, cluster, period.date)
    if config.audit.enabled:
        # the audit asks the queries without the breakdown: with it, each audited group of pods evaluates every
        # pod's workload again (measured at 50,000 pods: 53 s instead of 2 s); tests audit the breakdown instead
        audit = audit_cluster(context, usage.running, usage.exact, config.audit.pods)
        log.info("cluster %s: self-audit of %d pods instant by instant agrees (%d queries, %.2f s)", cluster.name,
                 audit.pods, audit.queries, audit.seconds)
    allocatable, capacity_unknown = _allocatable(context)
    wasted, workload_wasted = _collect_waste(config, context, usage)
    capacity = (frames.CAPACITY.empty() if allocatable is None
                else unrequested_capacity(allocatable, usage.usage, cluster.prices_on(period.date), cluster.name))
    quotas = _kueue_quotas(context, config)
    _log_cluster(usage)
    _log_capacity(cluster.name, capacity)
    billed = replace(usage, pod_hours=frames.POD_HOURS.empty())  # waste's alone: not held through the bill
    return _Collected(billed, capacity, wasted.assign(cluster=cluster.name),
                      workload_wasted.assign(cluster=cluster.name), quotas, capacity_unknown)


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


def _kueue_quotas(context: ClusterDay, config: Config) -> pd.DataFrame:
    """Kueue's quotas of the cluster-day; refused where a listed queue holds GPUs of a flavor without a priced model
    (its team would pay quota and use twice), with a warning for each queue billed to nobody or without a series."""
    quotas = collect_quotas(context)
    cluster, day = context.cluster, context.day.date
    if cluster.kueue is None:
        return quotas
    unpriced = unpriced_flavors(quotas, cluster, cluster.prices_on(day), gpu_fractions(config.gpu_resources))
    if unpriced:
        raise RunFailed(f"cluster {cluster.name} on {day}: " + "; ".join(unpriced) + "; nothing was billed and the day "
                        "stays missing")
    for remark in queue_remarks(cluster.kueue, set(quotas.loc[quotas["family"] == NOMINAL, "cluster_queue"])):
        log.warning("cluster %s: %s", cluster.name, remark)
    return quotas


def _collect_waste(config: Config, context: ClusterDay, usage: ClusterUsage) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Waste per namespace (frames.WASTE.columns) and per workload (none with workloads off); with workloads on,
    the namespace's is the sum over its workloads, from the same queries."""
    none = pd.DataFrame(columns=[*WORKLOAD_WASTE_KEYS, *MEASURES])
    if not config.waste.enabled:
        return pd.DataFrame(columns=frames.WASTE.columns), none
    by_workload = config.workloads.enabled
    wasted = collect_waste(context, config.waste.gpu_utilisation_below, by_workload=by_workload, usage=usage)
    return (waste_by_namespace(wasted), wasted) if by_workload else (wasted, none)


def _bill(config: Config, ledger: Engine, day: date, prices: dict[str, Prices], collected: list[_Collected],
          directory: Directory, directory_warning: str) -> tuple[pd.DataFrame, int]:
    """Own, price (each cluster at the day's `prices`) and write the day's ledger rows in one transaction; the rows
    and how many were written."""
    usage = pd.concat([c.usage.usage.assign(cluster=c.usage.cluster) for c in collected], ignore_index=True)
    capacity = pd.concat([c.capacity for c in collected], ignore_index=True)
    wasted = pd.concat([c.wasted for c in collected], ignore_index=True)
    workload_wasted = pd.concat([c.workload_wasted for c in collected], ignore_index=True)
    pending = pd.concat([c.usage.bound_pending.assign(cluster=c.usage.cluster) for c in collected], ignore_index=True)
    ownership = assign_owners(pd.concat([usage["namespace"], wasted["namespace"], pending["namespace"]]), directory,
                              config.namespaces)
    # what namespaces requested; reserved pools' capacity and credits; unrequested shared where a cluster says so
    rows = price(usage, ownership, prices)
    holdings = pd.concat([c.usage.holdings.assign(cluster=c.usage.cluster) for c in collected], ignore_index=True)
    held = price_holdings(holdings, ownership, rows)
    pool_rows = reserve_pools(capacity, usage, ownership, config.clusters, prices)
    quota_rows, unlent = _quota_rows(config, prices, collected, rows)
    pool_rows = pd.concat([pool_rows, quota_rows], ignore_index=True)
    sharing = [c.name for c in config.clusters if c.unrequested == "share"]
    shared_rows = share_unrequested(capacity[capacity["cluster"].isin(sharing)], rows, config.namespaces.unallocated_team)
    rows = pd.concat([rows, pool_rows, shared_rows], ignore_index=True)
    workloads = _workload_rows(config, prices, collected, ownership, rows)
    charging = [c.name for c in config.clusters if c.bound_pending == "charge"]
    bound_pending = price(pending, ownership, prices, below=["workload", "reason"])
    bound_pending = bound_pending.assign(charged=bound_pending["cluster"].isin(charging))
    _log_bound_pending(bound_pending, rows)

    bill = DayBill(rows, capacity, attribute_waste(wasted, ownership), held, workloads,
                   attribute_waste(workload_wasted, ownership) if workloads is not None else None,
                   {c.usage.cluster: c.usage.coverage for c in collected}, bound_pending=bound_pending, unlent=unlent,
                   capacity_unknown={c.usage.cluster: c.capacity_unknown for c in collected if c.capacity_unknown})
    written = replace_day(
        ledger, day, bill, config.currency,
        snapshot=None if directory_warning else directory_to_json(directory), directory_note=directory_warning,
        workloads_since=kept_since(datetime.now(config.zone).date(), config.workloads.keep_days),
    )
    total = float(rows["cost"].sum())
    log.info(
        "%s: %d ledger rows, total cost %.2f %s", day, written, total, config.currency,
        extra={"day": day.isoformat(), "rows": written, "total_cost": total, "currency": config.currency},
    )
    return rows, written


def _quota_rows(config: Config, prices: dict[str, Prices], collected: list[_Collected],
                rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each Kueue cluster's quota rows and credits (docs/spec.md "Kueue quotas"), from its quotas at each instant;
    and what its queues' namespaces borrowed that no team lent (frames.UNLENT, shown on the pages)."""
    fractions = gpu_fractions(config.gpu_resources)
    billed, unlent = [], []
    for cluster, found in zip(config.clusters, collected):
        if cluster.kueue is not None:
            hours, lent = quota_hours(found.quotas, int(config.step), cluster.kueue, fractions)
            billed.append(quota_rows(hours, lent, rows, cluster, prices[cluster.name]))
            unlent.append(unlent_borrowing(hours, lent, rows, cluster))
    billed, unlent = [f for f in billed if len(f)], [f for f in unlent if len(f)]
    return (pd.concat(billed, ignore_index=True) if billed else frames.ROWS.empty(),
            pd.concat(unlent, ignore_index=True) if unlent else frames.UNLENT.empty())


def _log_bound_pending(bound_pending: pd.DataFrame, rows: pd.DataFrame) -> None:
    """Per cluster and resource: what pods bound to a node held before they ran, its share of the cluster's bill
    (the charged part of it, or what it would add) and the reason that held most of it."""
    bills = rows.groupby("cluster")["cost"].sum()
    cluster: Any  # the group keys (pandas-stubs types them as Hashable)
    resource: Any
    for (cluster, resource), held in bound_pending.groupby(["cluster", "resource"]):
        bill = float(bills.get(cluster, 0.0))
        share = f"{held['cost'].sum() / bill:.1%} of the bill" if bill else ""
        if share and not held["charged"].all():
            share += " (shown, not charged)"
        log.info("cluster %s: %s", cluster, held_sentence(resource, held, share))


def _workload_rows(config: Config, prices: dict[str, Prices], collected: list[_Collected], ownership: pd.DataFrame,
                   rows: pd.DataFrame) -> pd.DataFrame | None:
    """The day's rows split over workloads and cost labels; None with workloads off."""
    if not config.workloads.enabled:
        return None
    usage = pd.concat([c.usage.workloads.assign(cluster=c.usage.cluster) for c in collected
                       if c.usage.workloads is not None] or [pd.DataFrame(columns=["cluster", *frames.WORKLOAD_USAGE.columns])],
                      ignore_index=True)
    return workload_costs(usage, ownership, prices, rows, config.cost_labels)


def _publish(config: Config, ledger: Engine, day: date, directory: Directory, summaries: Summaries) -> list[str]:
    """Pages from the ledger, then summaries and digests (each once, billing/notify/deliveries.py; none with
    `summaries` "none" or "backfilled") and budget alerts; one sentence per undelivered message."""
    report = render_day(config, day)
    undelivered: list[str] = []
    if config.email.enabled and summaries not in WHY_NONE:
        envelopes, undelivered = summary_envelopes(report, directory, config.email, digests(ledger, config, day),
                                                   config.reports_url)
        undelivered += deliver_once(envelopes, config.email, ledger, day, resend=summaries == "resend")
    elif config.email.enabled:
        log.info("email: no daily summaries for %s (%s)", day, WHY_NONE[summaries])
    undelivered += send_alerts(ledger, day, team_budgets(config.budgets, directory), config.budgets.alert_at,
                               directory, config.email, config.currency, config.reports_url)
    return undelivered


def render_day(config: Config, day: date) -> DayReport:
    """Write a day's HTML reports from the ledger (never from collected data); return its report."""
    report = day_report(open_ledger(config.database), config, day)
    pages = write_pages(report, Path(config.output_dir))
    log.info("%s: wrote %d report pages below %s", day, len(pages), config.output_dir)
    return report
