"""Reading the ledger back: rows, daily costs, which days ran, and the side tables, for every publisher.

Readers of frames make them through billing.ledger.database, which imports pandas only then: readers of plain rows
(`billing report`) start without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import (
    ColumnElement,
    Engine,
    case,
    func,
    select,
)

from billing import frames
from billing.days import days_in_month
from billing.directory.people import Directory, directory_from_json
from billing.ledger.database import fetch_rows, frame_of, read_frame
from billing.ledger.tables import (
    LEDGER_COLUMNS,
    bound_pending,
    chargeback,
    closed_months,
    cluster_capacity,
    cluster_days,
    cluster_storage,
    completed_days,
    corrections,
    directory_snapshots,
    energy,
    gpu_holdings,
    invoices,
    kueue_unlent,
    month_closings,
    statement_lines,
    waste,
    workload_costs,
)
from billing.money import BILLIONTHS, in_billionths
from billing.resources import MONTH_LINES, RECOVERY

if TYPE_CHECKING:
    import pandas as pd


def money_sum(amount: ColumnElement) -> ColumnElement:
    """SQL: the sum of a money column (or expression) as money.total sums the same values in Python (each value to
    the billionth, then exactly: billing/money.py)."""
    return func.sum(func.round(amount * float(BILLIONTHS))) / float(BILLIONTHS)


def read_rows(engine: Engine, first: date, last: date, team: str | None = None) -> pd.DataFrame:
    """Ledger rows of a date range (inclusive), optionally of one team."""
    query = select(chargeback).where(chargeback.c.day.between(first, last))
    if team is not None:
        query = query.where(chargeback.c.team == team)
    return read_frame(engine, query, "the ledger", LEDGER_COLUMNS, dates=["day"])


def daily_costs(engine: Engine, first: date, last: date, team: str | None = None, owner: str | None = None
                ) -> pd.DataFrame:
    """day, currency, cost and list_cost summed per day by the database, optionally of one team or person."""
    query = select(chargeback.c.day, chargeback.c.currency, money_sum(chargeback.c.cost).label("cost"),
                   money_sum(chargeback.c.list_cost).label("list_cost")).where(chargeback.c.day.between(first, last))
    if team is not None:
        query = query.where(chargeback.c.team == team)
    if owner is not None:
        query = query.where(chargeback.c.owner == owner)
    frame = read_frame(engine, query.group_by(chargeback.c.day, chargeback.c.currency), "daily costs",
                       ["day", "currency", "cost", "list_cost"], dates=["day"])
    return frame.astype({"cost": float, "list_cost": float})


def completed(engine: Engine, first: date, last: date) -> set[date]:
    """The days in the range that a run completed."""
    query = select(completed_days.c.day).where(completed_days.c.day.between(first, last))
    return {row.day for row in fetch_rows(engine, query, "completed days")}


def month_closed(engine: Engine, month: date) -> bool:
    """Whether the month (its first day) is closed."""
    query = select(closed_months.c.month).where(closed_months.c.month == month)
    return bool(fetch_rows(engine, query, "the ledger"))


def days_billed(engine: Engine) -> tuple[int, date | None]:
    """How many days a run completed, and the latest (None before any run)."""
    query = select(func.count().label("days"), func.max(completed_days.c.day).label("last"))
    [row] = fetch_rows(engine, query, "the ledger")
    return row.days, _as_date(row.last)


def namespaces_billed(engine: Engine) -> set[str]:
    """Every namespace the ledger billed on some day: what the namespaces the accounts' assignments name are looked
    up in (billing/directory/names.py)."""
    query = select(chargeback.c.namespace).distinct()
    return {row.namespace for row in fetch_rows(engine, query, "the ledger")}


def run_notes(engine: Engine) -> dict[date, str]:
    """Every day a run completed, with its directory note ('' where it read the live directory)."""
    query = select(completed_days.c.day, completed_days.c.directory_note)
    return {row.day: row.directory_note for row in fetch_rows(engine, query, "the ledger")}


def run_record(engine: Engine, day: date) -> dict | None:
    """When the run that wrote the day completed (UTC), how many rows it wrote and its directory note; None if no
    run completed the day."""
    rows = fetch_rows(engine, select(completed_days).where(completed_days.c.day == day), f"the run of {day}")
    if not rows:
        return None
    return {"completed_at": _utc(rows[0].completed_at).isoformat(timespec="seconds"), "rows": rows[0].rows,
            "directory_note": rows[0].directory_note}


def _as_date(value: date | str | None) -> date | None:
    """A day read back by an aggregate (SQLite hands MAX of a date back as text)."""
    return value if value is None or isinstance(value, date) else date.fromisoformat(str(value))


def day_costs(engine: Engine, day: date) -> list[tuple[str, str, str, str, float]]:
    """(cluster, team, resource, currency, cost) of a day, summed by the database per currency (amounts of two
    currencies never add), in that order."""
    keys = [chargeback.c.cluster, chargeback.c.team, chargeback.c.resource, chargeback.c.currency]
    query = select(*keys, money_sum(chargeback.c.cost).label("cost")).where(chargeback.c.day == day)
    rows = fetch_rows(engine, query.group_by(*keys).order_by(*keys), "the ledger")
    return [(row.cluster, row.team, row.resource, row.currency, float(row.cost)) for row in rows]


def team_costs(engine: Engine, first: date, last: date, teams: list[str] | None = None
               ) -> dict[tuple[str, str], float]:
    """Each team's cost of a date range per currency ((team, currency) -> cost), summed by the database, optionally
    of the `teams` only."""
    keys = [chargeback.c.team, chargeback.c.currency]
    query = select(*keys, money_sum(chargeback.c.cost).label("cost")).where(chargeback.c.day.between(first, last))
    if teams is not None:
        query = query.where(chargeback.c.team.in_(teams))
    return {(row.team, row.currency): float(row.cost)
            for row in fetch_rows(engine, query.group_by(*keys).order_by(*keys), "the ledger")}


def month_to_date_costs(engine: Engine, day: date, teams: list[str] | None = None) -> dict[tuple[str, str], float]:
    """Each team's cost per currency ((team, currency) -> cost) of the month of `day` through `day` (optionally of
    the `teams` only); of a closed month, the whole month with its cost recovery (`recovered`), as its statement and
    the FOCUS export have it: a closed month is over, and its figure is the statement's. Summed as money is."""
    month = day.replace(day=1)
    last = month.replace(day=days_in_month(month)) if month_closed(engine, month) else day
    costs = {key: in_billionths(cost) for key, cost in team_costs(engine, month, last, teams).items()}
    for line in recovered(engine, month, last):
        if teams is None or line["team"] in teams:
            key = (line["team"], line["currency"])
            costs[key] = costs.get(key, 0) + in_billionths(line["amount"])
    return {key: amount / BILLIONTHS for key, amount in costs.items()}


def team_daily_costs(engine: Engine, team: str, first: date, last: date) -> dict[str, dict[date, float]]:
    """Per currency, what a team was charged on each day of a date range, summed by the database; days without rows
    are absent."""
    query = select(chargeback.c.day, chargeback.c.currency, money_sum(chargeback.c.cost).label("cost")).where(
        chargeback.c.team == team, chargeback.c.day.between(first, last))
    costs: dict[str, dict[date, float]] = {}
    for row in fetch_rows(engine, query.group_by(chargeback.c.day, chargeback.c.currency), "the ledger"):
        costs.setdefault(row.currency, {})[row.day] = float(row.cost)
    return costs


def first_run(engine: Engine) -> date | None:
    """The earliest day a run completed: when billing began (None before any run)."""
    query = select(func.min(completed_days.c.day).label("day"))
    rows = fetch_rows(engine, query, "completed days")
    return rows[0].day if rows else None


def incomplete(engine: Engine, first: date, last: date) -> list[tuple[date, str, float]]:
    """(day, cluster, coverage) of every cluster-day in the range with gaps in its data."""
    query = (
        select(cluster_days)
        .where(cluster_days.c.day.between(first, last), cluster_days.c.coverage < 1)
        .order_by(cluster_days.c.day, cluster_days.c.cluster)
    )
    return [(row.day, row.cluster, row.coverage) for row in fetch_rows(engine, query, "data coverage")]


def unknown_capacity(engine: Engine, day: date) -> list[tuple[str, str]]:
    """(cluster, why) of every cluster whose capacity of the day is unknown."""
    query = (select(cluster_days.c.cluster, cluster_days.c.capacity_unknown)
             .where(cluster_days.c.day == day, cluster_days.c.capacity_unknown != "")
             .order_by(cluster_days.c.cluster))
    return [(row.cluster, row.capacity_unknown) for row in fetch_rows(engine, query, "capacity unknown")]


def read_capacity(engine: Engine, day: date) -> pd.DataFrame:
    """Each cluster's capacity of a day (frames.CAPACITY.columns); no rows for a day run before capacity was kept."""
    query = select(cluster_capacity).where(cluster_capacity.c.day == day).order_by(
        cluster_capacity.c.cluster, cluster_capacity.c.pool, cluster_capacity.c.resource, cluster_capacity.c.gpu_model)
    return read_frame(engine, query, "cluster capacity", ["day", *frames.CAPACITY.columns])[frames.CAPACITY.columns]


def read_storage(engine: Engine, day: date) -> pd.DataFrame:
    """Each cluster's persistent volumes per storage class on a day (frames.STORAGE_CAPACITY.columns; a class without a
    price has NaN unit price and cost); none for a cluster without claims, or a day billed before revision 0019."""
    query = select(cluster_storage).where(cluster_storage.c.day == day).order_by(
        cluster_storage.c.cluster, cluster_storage.c.storageclass)
    rows = read_frame(engine, query, "cluster storage", ["day", *frames.STORAGE_CAPACITY.columns])
    return rows[frames.STORAGE_CAPACITY.columns].astype({"unit_price": float, "unclaimed_cost": float})


def read_energy(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """kWh and carbon per day, cluster, namespace and team from first to last (day and frames.CHARGED_ENERGY.columns;
    NaN where unknown; shared 0 on a day billed before revision 0023); none for a cluster without `energy`, or a day
    billed before revision 0022."""
    query = select(energy).where(energy.c.day.between(first, last)).order_by(
        energy.c.day, energy.c.cluster, energy.c.team, energy.c.namespace)
    rows = read_frame(engine, query, "energy", ["day", *frames.CHARGED_ENERGY.columns], dates=["day"])
    return rows.astype({"gpu_kwh": float, "cpu_kwh": float, "carbon_g": float, "shared_kwh": float,
                        "shared_carbon_g": float})


def energy_sums(engine: Engine, first: date, last: date, team: str | None = None) -> list[dict]:
    """Per team and cluster (of one team, or every team's), the kWh of its namespaces from first to last (GPUs', CPU
    and memory's, its share of the unattributed where its cluster shares it, all three: `kwh`) and their grams of CO2e;
    team '' is the cluster's unattributed energy, less what was shared (`shared_kwh` negative). A figure is None where
    some day of it is unknown (docs/spec.md "Energy and carbon"), never the sum of the known days alone. Plain rows: a
    report loads no pandas. None of a day billed before revision 0022 or of a cluster without `energy`."""
    def known(column: ColumnElement) -> ColumnElement:
        return case((func.count(column) == func.count(), func.sum(column)))

    chosen = [] if team is None else [energy.c.team == team]
    query = (select(energy.c.team, energy.c.cluster, known(energy.c.gpu_kwh), known(energy.c.cpu_kwh),
                    func.sum(energy.c.shared_kwh), known(energy.c.gpu_kwh + energy.c.cpu_kwh + energy.c.shared_kwh),
                    known(energy.c.carbon_g + energy.c.shared_carbon_g))
             .where(energy.c.day.between(first, last), *chosen)
             .group_by(energy.c.team, energy.c.cluster).order_by(energy.c.team, energy.c.cluster))
    return [dict(zip(("team", "cluster", "gpu_kwh", "cpu_kwh", "shared_kwh", "kwh", "carbon_g"), row))
            for row in fetch_rows(engine, query, "energy")]


def read_waste(engine: Engine, day: date) -> pd.DataFrame:
    """What each namespace's teams held but did not use on a day (frames.CHARGED_WASTE.columns)."""
    query = select(waste).where(waste.c.day == day).order_by(waste.c.team, waste.c.owner, waste.c.namespace)
    rows = read_frame(engine, query, "waste", ["day", *frames.CHARGED_WASTE.columns])[frames.CHARGED_WASTE.columns]
    return rows.astype(dict.fromkeys(frames.WASTE_MEASURES, float))


def read_bound_pending(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """What pods bound to a node held while Pending from first to last, per team and reason
    (frames.BOUND_PENDING_COSTS.columns); none for days billed before revision 0013."""
    query = select(bound_pending).where(bound_pending.c.day.between(first, last))
    columns = [c.name for c in bound_pending.columns]
    return read_frame(engine, query, "bound Pending usage", columns)[frames.BOUND_PENDING_COSTS.columns]


def read_unlent(engine: Engine, day: date) -> pd.DataFrame:
    """What Kueue queues' namespaces borrowed on a day that no team lent (frames.UNLENT.columns); none for days billed
    before revision 0014."""
    query = select(kueue_unlent).where(kueue_unlent.c.day == day)
    columns = [c.name for c in kueue_unlent.columns]
    return read_frame(engine, query, "Kueue borrowing no team lent", columns)[frames.UNLENT.columns]


def read_holdings(engine: Engine, day: date) -> pd.DataFrame:
    """What the day's `gpu` rows held per GPU resource (frames.HOLDINGS.columns); none for days billed before 0003."""
    query = select(gpu_holdings).where(gpu_holdings.c.day == day)
    columns = [c.name for c in gpu_holdings.columns]
    return read_frame(engine, query, "GPU holdings", columns)[frames.HOLDINGS.columns]


def read_workload_costs(engine: Engine, first: date, last: date, team: str | None = None,
                        owner: str | None = None) -> pd.DataFrame:
    """Costs per workload and cost labels of a date range (day, frames.WORKLOAD_COSTS, currency),
    optionally of one team or person; no rows for days billed before 0005 or with workloads off."""
    query = select(workload_costs).where(workload_costs.c.day.between(first, last))
    if team is not None:
        query = query.where(workload_costs.c.team == team)
    if owner is not None:
        query = query.where(workload_costs.c.owner == owner)
    columns = [c.name for c in workload_costs.columns]
    return read_frame(engine, query, "workload costs", columns, dates=["day"])


WORKLOAD_TOTAL_KEYS = ["day", "cluster", "namespace", "team", "owner", "workload"]


def read_workload_totals(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """Cost per WORKLOAD_TOTAL_KEYS of a date range, over resources and cost labels: what the pages rank
    workloads by, summed in the database (a big day has a few times fewer workloads than workload rows)."""
    keys = [workload_costs.c[key] for key in WORKLOAD_TOTAL_KEYS]
    query = (select(*keys, money_sum(workload_costs.c.cost)).where(workload_costs.c.day.between(first, last))
             .group_by(*keys))
    return read_frame(engine, query, "workload costs", [*WORKLOAD_TOTAL_KEYS, "cost"], dates=["day"])


def waste_sums(engine: Engine, first: date, last: date, by: str, team: str | None = None,
               owner: str | None = None) -> pd.DataFrame:
    """The waste measures (frames.WASTE_MEASURES) of a date range summed per `by` (namespace, owner or team)
    by the database, optionally of one team or person; NULL (NaN) where no day of the group measured it."""
    measures = [func.sum(waste.c[m]).label(m) for m in frames.WASTE_MEASURES]
    query = select(waste.c[by], *measures).where(waste.c.day.between(first, last))
    if team is not None:
        query = query.where(waste.c.team == team)
    if owner is not None:
        query = query.where(waste.c.owner == owner)
    rows = read_frame(engine, query.group_by(waste.c[by]).order_by(waste.c[by]), "waste",
                      [by, *frames.WASTE_MEASURES])
    return rows.astype(dict.fromkeys(frames.WASTE_MEASURES, float))


def stored_directory(engine: Engine) -> Directory | None:
    """The directory the last successful run stored, if any."""
    stored = latest_directory(engine)
    return directory_from_json(stored[1]) if stored else None


def latest_directory(engine: Engine) -> tuple[datetime, str] | None:
    """(taken_at in UTC, content) of the stored directory snapshot, if any run left one."""
    query = select(directory_snapshots).order_by(directory_snapshots.c.taken_at.desc()).limit(1)
    rows = fetch_rows(engine, query, "the stored directory")
    if not rows:
        return None
    return _utc(rows[0].taken_at), rows[0].content


def _utc(moment: datetime) -> datetime:
    """A stored moment in UTC: SQLite hands it back naive (it stored UTC), PostgreSQL in the session's zone."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def directory_note(engine: Engine, day: date) -> str:
    """Why the day's run used the last known directory; '' if it read the live one (or never ran)."""
    query = select(completed_days.c.directory_note).where(completed_days.c.day == day)
    rows = fetch_rows(engine, query, f"the run of {day}")
    return rows[0].directory_note if rows else ""


def recovered(engine: Engine, first: date, last: date, team: str | None = None) -> list[dict]:
    """month, team, cluster, kind, amount, currency: per team, cluster and kind, the cost recovery of each closed month
    that lies within first..last (a closed month's statement books it for the whole month, so a range holding part of
    the month holds none of it), with what re-runs of the month's days moved since (corrections of resource
    `recovery`), so that beside the ledger's rows as they are now a recovered cluster's month still adds up to its
    cost; and its subsidies and monthly credits (kinds MONTH_LINES); optionally of one team. Each amount is summed as
    money is (`money_sum`): what `billing export`, `billing report`, serve and the budgets add to the ledger's rows
    of a closed month."""
    lines = (select(statement_lines.c.month, statement_lines.c.team, statement_lines.c.cluster,
                    statement_lines.c.kind, statement_lines.c.amount, statement_lines.c.currency)
             .where(statement_lines.c.kind.in_(MONTH_LINES), statement_lines.c.month.between(first, last))
             .order_by(statement_lines.c.month, statement_lines.c.line))
    moved = (select(corrections.c.corrects, corrections.c.team, corrections.c.cluster, corrections.c.resource,
                    corrections.c.amount, corrections.c.currency)
             .where(corrections.c.resource == RECOVERY, corrections.c.corrects.between(first, last))
             .order_by(corrections.c.corrects, corrections.c.booked_at))
    if team is not None:
        lines, moved = lines.where(statement_lines.c.team == team), moved.where(corrections.c.team == team)
    sums: dict[tuple, int] = {}
    for day, who, cluster, kind, amount, currency in [*fetch_rows(engine, lines, "cost recovery lines"),
                                                      *fetch_rows(engine, moved, "cost recovery corrections")]:
        month = day.replace(day=1)  # a line's month, a correction's day (whose resource is its kind, `recovery`)
        if _within(month, first, last):
            key = (month, who, cluster, kind, currency)
            sums[key] = sums.get(key, 0) + in_billionths(amount)
    return [{"month": month, "team": who, "cluster": cluster, "kind": kind, "amount": amount / BILLIONTHS,
             "currency": currency} for (month, who, cluster, kind, currency), amount in sums.items()]


def read_recovery(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """`recovered` as a frame (month, team, cluster, kind, amount, currency), for the FOCUS export."""
    columns = ["month", "team", "cluster", "kind", "amount", "currency"]
    return frame_of([tuple(row[c] for c in columns) for row in recovered(engine, first, last)], columns)


def read_corrections(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """Corrections as a frame (month booked in, corrects, team, cluster, resource, amount, currency, and where the
    range holds them: `booked`, booked in a month within first..last; `left_out`, correcting a day whose rows are
    in the range, or for a cost recovery correction a closed month within it, as `recovered` holds its line), each
    summed over its bookings as money is, for the FOCUS export."""
    query = (select(corrections.c.month, corrections.c.corrects, corrections.c.team, corrections.c.cluster,
                    corrections.c.resource, corrections.c.currency, money_sum(corrections.c.amount).label("amount"))
             .where(corrections.c.month.between(first, last) | corrections.c.corrects.between(first, last))
             .group_by(corrections.c.month, corrections.c.corrects, corrections.c.team, corrections.c.cluster,
                       corrections.c.resource, corrections.c.currency)
             .order_by(corrections.c.month, corrections.c.corrects, corrections.c.cluster, corrections.c.team,
                       corrections.c.resource))
    rows = []
    for booked_in, day, team, cluster, resource, currency, amount in fetch_rows(engine, query, "corrections"):
        left_out = _within(day.replace(day=1), first, last) if resource == RECOVERY else first <= day <= last
        rows.append((booked_in, day, team, cluster, resource, amount, currency, _within(booked_in, first, last),
                     left_out))
    columns = ["month", "corrects", "team", "cluster", "resource", "amount", "currency", "booked", "left_out"]
    return frame_of(rows, columns)


def _within(month: date, first: date, last: date) -> bool:
    """A whole month lies within first..last: what is booked on a month as a whole is in such a range only."""
    return first <= month and month.replace(day=days_in_month(month)) <= last


@dataclass(frozen=True)
class MonthActivity:
    """When a month's records came about, for FOCUS 1.4's Created and LastUpdated columns: its days' first and
    latest runs (as the ledger holds them: a re-run replaces a day's time), the latest correction booked in it and
    the latest close or reopen of it; None where there is none."""

    first_run: datetime | None
    last_run: datetime | None
    last_booked: datetime | None
    last_closing: datetime | None


def month_activity(engine: Engine, month: date) -> MonthActivity:
    first, last = month, month.replace(day=days_in_month(month))
    runs = select(func.min(completed_days.c.completed_at), func.max(completed_days.c.completed_at)) \
        .where(completed_days.c.day.between(first, last))
    booked = select(func.max(corrections.c.booked_at)).where(corrections.c.month == month)
    logged = select(func.max(month_closings.c.logged_at)).where(month_closings.c.month == month)
    (first_run, last_run), = fetch_rows(engine, runs, f"the runs of {month:%Y-%m}")
    (last_booked,), = fetch_rows(engine, booked, f"the corrections booked in {month:%Y-%m}")
    (last_closing,), = fetch_rows(engine, logged, f"the closings of {month:%Y-%m}")
    return MonthActivity(*(None if moment is None else _utc(moment)
                           for moment in (first_run, last_run, last_booked, last_closing)))


def invoice_files(engine: Engine, month: date, cluster: str) -> list[str]:
    """The provider's invoices imported for a cluster's month (billing invoice import), as `<file> (sha256 <12
    digits>…)`, in the order imported."""
    query = select(invoices.c.file_name, invoices.c.sha256).where(invoices.c.month == month,
                                                                  invoices.c.cluster == cluster) \
        .order_by(invoices.c.imported_at)
    return [f"{name} (sha256 {sha[:12]}…)" for name, sha in fetch_rows(engine, query, f"the invoices of {cluster}")]
