"""The nightly run of one billing day: collect, own, price, write the ledger."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd

from billing.collect import ClusterUsage, collect_cluster
from billing.config import Config
from billing.days import billing_day
from billing.directory import load_directory
from billing.ledger import open_ledger, replace_day
from billing.mail import deliver
from billing.ownership import assign_owners
from billing.pricing import price
from billing.prometheus import prometheus_source
from billing.render import DayReport, read_report, write_pages
from billing.summaries import summary_envelopes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    day: date
    rows: int
    total_cost: float
    clusters: list[ClusterUsage]
    cluster_costs: dict[str, float]  # cost of the day per configured cluster, 0.0 for an idle one
    undelivered: tuple[str, ...] = ()  # one sentence per summary email that failed


def _log_cluster(collected: ClusterUsage) -> None:
    hours = collected.usage.groupby("resource")["quantity"].sum()
    log.info(
        "cluster %s: %d namespaces, %d pods, %.2f GPU-h, %.2f core-h, %.2f GiB-h (%d queries)",
        collected.cluster,
        collected.usage["namespace"].nunique(),
        collected.pods,
        hours.get("gpu", 0.0),
        hours.get("cpu", 0.0),
        hours.get("memory", 0.0),
        collected.queries,
    )


def run_day(config: Config, day: date) -> RunSummary:
    """Bill one day; every data source is read before the ledger is touched."""
    ledger = open_ledger(config.database)
    period = billing_day(day, config.zone)
    log.info("billing %s (%s to %s UTC)", day, period.start.isoformat(), period.end.isoformat())

    collected = []
    for cluster in config.clusters:
        source = prometheus_source(cluster.name, cluster.prometheus)
        usage = collect_cluster(cluster, period, int(config.step), config.gpu_resources, source)
        _log_cluster(usage)
        collected.append(usage)
    usage = pd.concat([c.usage.assign(cluster=c.cluster) for c in collected], ignore_index=True)

    directory = load_directory(config.directory)
    ownership = assign_owners(usage["namespace"], directory, config.namespaces)
    rows = price(usage, ownership, {c.name: c.prices for c in config.clusters})

    written = replace_day(ledger, day, rows, config.currency)
    total = float(rows["cost"].sum())
    log.info(
        "%s: %d ledger rows, total cost %.2f %s", day, written, total, config.currency,
        extra={"day": day.isoformat(), "rows": written, "total_cost": total, "currency": config.currency},
    )
    costs = rows.groupby("cluster")["cost"].sum()
    cluster_costs = {c.name: float(costs.get(c.name, 0.0)) for c in config.clusters}

    report = render_day(config, day)
    undelivered: list[str] = []
    if config.email.enabled:
        envelopes, undelivered = summary_envelopes(report, directory, config.email)
        undelivered += deliver(envelopes, config.email)
    return RunSummary(day, written, total, collected, cluster_costs, tuple(undelivered))


def render_day(config: Config, day: date) -> DayReport:
    """Write a day's HTML reports from the ledger (never from collected data); return its report."""
    report = read_report(open_ledger(config.database), day, config.currency, config.namespaces.unallocated_team)
    pages = write_pages(report, Path(config.output_dir))
    log.info("%s: wrote %d report pages below %s", day, len(pages), config.output_dir)
    return report
