"""The ledger's latest day as Prometheus metrics, for Grafana beside the clusters' own dashboards.

Team leads read cost where they read everything else. `billing serve`
answers these on /metrics to a scraper with its token, read from the ledger
at each scrape; they have that one source, so that a dashboard summing them
counts each cost once (the nightly job pushes only its own health,
billing/jobs/metrics.py). They are aggregates only, per team, cluster and
resource, never per person: anyone who may read the metrics sees what every
team spent, nothing more.

The figures are the latest billed day's (a backfill of older days does not move
them back) and the month to date through it, so that a dashboard's "yesterday"
is always the newest day billing has: `billing_cost_day_timestamp_seconds` says
which day that is. Names follow Prometheus' conventions; amounts are in the
`currency` label's unit, so no name claims a unit it cannot know. Each cost series is its own rows' currency: where
a team's rows are in two (a cluster priced in another, or the installation's currency changed), it has a series per
currency, never their sum (docs/spec.md "Currencies"); a budget is in the configured currency.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import Engine

from billing.config import Config
from billing.days import billing_day
from billing.ledger.read import day_costs, days_billed, energy_sums, month_to_date_costs, stored_directory
from billing.publish.budgets import team_budgets
from billing.resources import RESOURCES


@dataclass(frozen=True)
class CostFigures:
    day: date  # the latest billed day
    day_start: float  # its first instant, Unix time (it starts at midnight in the configured zone)
    currency: str  # the configured one, the budgets'
    costs: list[tuple[str, str, str, str, float]]  # (cluster, team, ledger resource, currency, cost) of the day
    # (team, currency) -> the month to date through `day`; a closed month's as its statement has it
    month_to_date: dict[tuple[str, str], float]
    budgets: dict[str, float]  # team -> its monthly budget, where it has one
    # the latest billed day's kWh and grams of CO2e per team and cluster, team '' the unattributed (ledger.read.energy_sums)
    energy: tuple[dict, ...] = ()


def read_cost_figures(engine: Engine, config: Config) -> CostFigures | None:
    """The latest billed day's costs, each team's month to date and budget; None before any day was billed."""
    _, latest = days_billed(engine)
    if latest is None:
        return None
    return CostFigures(latest, billing_day(latest, config.zone).start.timestamp(), config.currency,
                       day_costs(engine, latest), month_to_date_costs(engine, latest),
                       team_budgets(config.budgets, stored_directory(engine)), tuple(energy_sums(engine, latest, latest)))


def add_cost_metrics(registry: CollectorRegistry, figures: CostFigures) -> None:
    """The figures as gauges in `registry`."""
    Gauge("billing_cost_day_timestamp_seconds", "Start of the latest billed day, whose costs billing_cost gives.",
          registry=registry).set(figures.day_start)
    cost = Gauge("billing_cost", f"Cost of the latest billed day per cluster, team and ledger resource ({', '.join(RESOURCES)}; "
                 "unrequested-*, reserved-*, credit-* for shared unrequested capacity and reserved pools), in the currency.",
                 ["cluster", "team", "resource", "currency"], registry=registry)
    for cluster, team, resource, currency, amount in figures.costs:
        cost.labels(cluster, team, resource, currency).set(amount)
    month = Gauge("billing_month_to_date_cost", "Cost of the month to date through the latest billed day, per team; of a closed month, the month as its statement has it, cost recovery included.",
                  ["team", "currency"], registry=registry)
    for (team, currency), amount in figures.month_to_date.items():
        month.labels(team, currency).set(amount)
    budget = Gauge("billing_month_budget", "A team's budget for the month of the latest billed day.",
                   ["team", "currency"], registry=registry)
    for team, amount in figures.budgets.items():
        budget.labels(team, figures.currency).set(amount)
    _add_energy_metrics(registry, figures.energy)


def _add_energy_metrics(registry: CollectorRegistry, rows: tuple[dict, ...]) -> None:
    """The latest billed day's energy and carbon per cluster and team (docs/spec.md "Energy and carbon"), and each
    cluster's unattributed kWh; a figure that is unknown has no series, never 0."""
    if not rows:
        return
    kwh = Gauge("billing_energy_kwh", "Energy of the latest billed day per cluster and team: kWh of its namespaces' GPUs, "
                "CPU and memory, and its share of the unattributed where the cluster shares it.", ["cluster", "team"],
                registry=registry)
    carbon = Gauge("billing_carbon_grams", "Carbon of the latest billed day per cluster and team, grams of CO2e at the "
                   "cluster's carbon intensity.", ["cluster", "team"], registry=registry)
    unattributed = Gauge("billing_energy_unattributed_kwh", "Energy of the latest billed day no pod accounts for (idle "
                         "power, GPUs held by none) per cluster, kWh, less what was shared over the teams; not billed.",
                         ["cluster"], registry=registry)
    for row in rows:
        if row["team"] == "":
            if row["kwh"] is not None:
                unattributed.labels(row["cluster"]).set(row["kwh"])
            continue
        if row["kwh"] is not None:
            kwh.labels(row["cluster"], row["team"]).set(row["kwh"])
        if row["carbon_g"] is not None:
            carbon.labels(row["cluster"], row["team"]).set(row["carbon_g"])
