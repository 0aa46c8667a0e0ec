"""The day's view model: the numbers every page and email of a day shows, from ledger rows only.

`read_report` reads the ledger window a day needs (the last 30 days and the
month to date) and `summarize` turns those rows into a `DayReport` of plain
numbers that billing/publish/pages.py lays out. Nothing here sees collection data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

import pandas as pd
from sqlalchemy import Engine

from billing import frames
from billing.accounts import Account, AccountAssignment
from billing.charge.ownership import unallocated_reason
from billing.charge.service_units import service_units
from billing.config import ClusterConfig, NamespaceRules
from billing.directory.people import Directory
from billing.errors import RunFailed
from billing.ledger.read import (
    completed,
    daily_costs,
    directory_note,
    incomplete,
    read_bound_pending,
    read_capacity,
    read_holdings,
    read_rows,
    read_storage,
    read_unlent,
    read_waste,
    read_workload_totals,
    run_notes,
    unknown_capacity,
)
from billing.money import Totals, cents, money_sums, total
from billing.publish.allocations import AllocationStatus
from billing.publish.budgets import BudgetStatus
from billing.publish.formatting import held_gpus, held_reason, quantity
from billing.publish.links import slug
from billing.resources import GPU, POOL_PREFIX, RESERVED, UNREQUESTED


class RenderError(RunFailed):
    """The reports could not be produced; the message names the cause."""


TREND_DAYS = 30
TOP_NAMESPACES = 10
TOP_MOVERS = 5  # namespaces and workloads whose cost changed most since the day before
TOP_WORKLOADS = 10  # a team's most expensive workloads of the day
OWNER_WORKLOADS = 3  # each person's most expensive workloads in the team email


@dataclass(frozen=True)
class TrendDay:
    day: date
    cost: float | None  # None: no run of this day is recorded


@dataclass(frozen=True)
class Mover:
    """A namespace (or one of its workloads) whose cost changed from the day before."""

    cluster: str
    namespace: str
    workload: str  # '' for the whole namespace
    before: float  # 0 where it cost nothing (or did not exist) the day before
    after: float

    @property
    def change(self) -> float:
        return self.after - self.before


@dataclass(frozen=True)
class Changes:
    """What changed since the day before: the largest movers, by absolute change."""

    since: date  # the day before
    ran: bool  # False: the day before was never run, so there is nothing to compare with
    namespaces: tuple[Mover, ...] = ()
    workloads: tuple[Mover, ...] = ()  # empty where either day has no workload costs


@dataclass(frozen=True)
class ArchiveDay:
    """One run day in the archive index."""

    day: date
    cost: Totals  # per currency: amounts of two are never added
    previous: Totals | None  # the day before, None if it never ran
    incomplete: tuple[str, ...]  # clusters with gaps in the day's data
    directory_note: str  # why the run used the last known directory; '' if it read the live one

    @property
    def change(self) -> tuple[float, float | None, str] | None:
        """(cost, the day before, currency) for the change cell; None where the two days hold more than one
        currency between them, since no change subtracts one currency from another."""
        currencies = {*self.cost.currencies, *(self.previous.currencies if self.previous else ())}
        if len(currencies) > 1:
            return None
        currency = currencies.pop()
        return self.cost.amounts[currency], None if self.previous is None else self.previous.amounts[currency], currency


@dataclass(frozen=True)
class ArchiveMonth:
    month: date  # its first day
    cost: Totals  # of the days that ran, per currency
    days: tuple[ArchiveDay, ...]  # newest first


@dataclass(frozen=True)
class TeamReport:
    """One team on one day: what its page and its lead's email show."""

    team: str
    slug: str  # file name of its page, safe for any team name
    cost: float
    previous: float | None  # the day before, None if that day was never run
    month_to_date: float
    trend: list[TrendDay]
    discount: float  # list cost less cost on the day: what pod priority classes saved
    by_owner: list[dict]  # owner ('' for a team namespace), namespaces, cost
    by_namespace: list[dict]  # cluster, namespace, owner, cost
    by_usage: list[dict]  # cluster, resource, gpu_model, quantity, cost, discount
    waste: tuple[dict, ...] = ()  # owner and frames.WASTE_MEASURES (None: not measured)
    # owner, cluster, resource, gpu_model, quantity, cost, reason (the one that held most), charged
    held_before_running: tuple[dict, ...] = ()
    budget: BudgetStatus | None = None  # the month against the team's budget and its forecast; None: no budget
    leads: tuple[str, ...] = ()  # uids of the team's leads in the stored directory (see `with_directory`)
    changes: Changes | None = None
    top_workloads: tuple[dict, ...] = ()  # cluster, namespace, workload, owner, cost; none without workload costs
    owner_workloads: dict[str, tuple[dict, ...]] = field(default_factory=dict)  # owner ('' team) -> its top ones
    # Kueue quotas per cluster, resource and GPU model: quota, within, borrowed (lent by a team), beyond (borrowed
    # that no team lent) and lent (resource-hours; docs/spec.md)
    quotas: tuple[dict, ...] = ()
    recovery: float = 0.0  # a closed month's cost recovery, in month_to_date (publish/answers.py `day_report`)
    credited: float = 0.0  # a closed month's subsidies and monthly credits, in month_to_date (the same)


@dataclass(frozen=True)
class DayReport:
    """All teams on one day: what the admin page and email show."""

    day: date
    currency: str
    unallocated_team: str
    cost: float
    previous: float | None
    month_to_date: float
    trend: list[TrendDay]
    discount: float
    missing_in_month: list[date]  # days of this month that were never run
    teams: list[TeamReport]  # most expensive first
    by_usage: list[dict]  # cluster, resource, quantity, cost, discount
    gpu_models: list[dict]  # gpu_model, quantity, cost
    top_namespaces: list[dict]  # cluster, namespace, teams, cost
    unallocated: list[dict]  # cluster, namespace, owner, cost (and `reason`, see `with_directory`)
    directory_note: str = ""  # why the run used the last known directory; shown as a warning
    incomplete: tuple[tuple[str, float], ...] = ()  # (cluster, coverage) with gaps in the day's data
    # cluster, resource, gpu_model, pool, allocatable, requested, requested_share, unrequested,
    # unrequested_cost, unrequested_charged_to
    capacity: tuple[dict, ...] = ()
    capacity_unknown: tuple[tuple[str, str], ...] = ()  # (cluster, why) whose capacity the run could not read
    # cluster, storageclass, provisioned, claimed, unclaimed (GiB-hours), unit_price and unclaimed_cost (None: the
    # class has no price): persistent volumes per class, the unclaimed shown at the class's price, never billed
    storage: tuple[dict, ...] = ()
    # team, cluster, gpu_kwh, cpu_kwh, shared_kwh, kwh, carbon_g (None: unknown); team '' the unattributed
    # (ledger.read.energy_sums)
    energy: tuple[dict, ...] = ()
    waste: tuple[dict, ...] = ()  # team and frames.WASTE_MEASURES (None: not measured)
    held_before_running: tuple[dict, ...] = ()  # team, cluster, resource, gpu_model, quantity, cost, reason, charged
    people: dict[str, str] = field(default_factory=dict)  # uid -> display name (cn) from the stored directory
    changes: Changes | None = None
    archive: tuple[ArchiveMonth, ...] = ()  # every day ever run, by month, newest first
    # (cluster, day): another price set came into force in the month to date (report.price_changes)
    price_changes: tuple[tuple[str, date], ...] = ()
    recovery: float = 0.0  # a closed month's cost recovery, in month_to_date (publish/answers.py `day_report`)
    credited: float = 0.0  # a closed month's subsidies and monthly credits, in month_to_date (the same)
    # account assignments ending within accounts.expiry_notice_days of the day after (publish/answers.py `day_report`)
    accounts_ending: tuple[AccountAssignment, ...] = ()
    default_account: Account | None = None  # accounts.default_account, where accounts are configured
    charged_to_default: tuple[dict, ...] = ()  # team, namespaces, cost: the day's charges no account takes
    allocations: tuple[AllocationStatus, ...] = ()  # every allocation begun, as of the day (publish/answers.py)

    def team(self, name: str) -> TeamReport:
        return next(t for t in self.teams if t.team == name)

    def allocations_of(self, team: str) -> tuple[AllocationStatus, ...]:
        """The allocations the team's charges drew on or its accounts hold: its page's and its leads' email's."""
        return tuple(status for status in self.allocations if team in status.teams)

    @property
    def quotas(self) -> tuple[dict, ...]:
        """Every team's Kueue quotas (`TeamReport.quotas` with its `team`), by team name: the admins' table."""
        return tuple({"team": t.team, **row} for t in sorted(self.teams, key=lambda t: t.team) for row in t.quotas)


def window_start(day: date) -> date:
    """First day a report needs: the trend's first day or the month's, whichever is earlier."""
    return min(day.replace(day=1), day - timedelta(days=TREND_DAYS - 1))


def read_report(engine: Engine, day: date, currency: str, unallocated_team: str) -> DayReport:
    """The report of a day, from the ledger."""
    first = window_start(day)
    runs = completed(engine, first, day)
    if day not in runs:
        raise RenderError(f"the ledger records no run of {day}; run `billing run --date {day}` first")
    rows = read_rows(engine, first, day)
    report = summarize(rows, runs, day, currency, unallocated_team, read_unlent(engine, day))
    gaps = tuple((cluster, coverage) for _, cluster, coverage in incomplete(engine, day, day))
    capacity = _capacity(read_capacity(engine, day), rows[rows["day"] == day])
    wasted = read_waste(engine, day).assign(owner=lambda f: f["owner"].fillna(""))
    held = read_holdings(engine, day)
    pending = read_bound_pending(engine, day, day).assign(owner=lambda f: f["owner"].fillna(""))
    teams = [replace(t, waste=_waste(wasted[wasted["team"] == t.team], "owner"),
                     by_usage=_with_held(t.by_usage, held[held["team"] == t.team]),
                     held_before_running=held_rows(pending[pending["team"] == t.team], "owner"))
             for t in report.teams]
    report = replace(report, directory_note=directory_note(engine, day), incomplete=gaps, capacity=capacity,
                     capacity_unknown=tuple(unknown_capacity(engine, day)), storage=_storage(read_storage(engine, day)),
                     teams=teams, waste=_waste(wasted, "team"), held_before_running=held_rows(pending, "team"))
    report = with_workloads(report, read_workload_totals(engine, day - timedelta(days=1), day))
    return replace(report, archive=read_archive(engine, report.currency))


def read_archive(engine: Engine, currency: str) -> tuple[ArchiveMonth, ...]:
    """Every day the ledger records a run of, with its cost per currency (a day without rows: 0 in `currency`, the
    configured one), its change and its run's notes, by month."""
    runs = run_notes(engine)
    costs: dict[date, list[tuple[str, float]]] = {}
    for day, in_currency, cost in money_sums(daily_costs(engine, date.min, date.max), ["day", "currency"], ["cost"]
                                             )[["day", "currency", "cost"]].itertuples(index=False):
        costs.setdefault(day, []).append((in_currency, float(cost)))
    gaps: dict[date, list[str]] = {}
    for day, cluster, _ in incomplete(engine, date.min, date.max):
        gaps.setdefault(day, []).append(cluster)
    days = [ArchiveDay(day, Totals.of(costs.get(day, []), currency),
                       Totals.of(costs.get(day - timedelta(days=1), []), currency)
                       if day - timedelta(days=1) in runs else None,
                       tuple(gaps.get(day, ())), runs[day]) for day in sorted(runs, reverse=True)]
    months: dict[date, list[ArchiveDay]] = {}
    for entry in days:
        months.setdefault(entry.day.replace(day=1), []).append(entry)
    return tuple(ArchiveMonth(month, Totals.of([cost for d in entries for cost in costs.get(d.day, [])], currency),
                              tuple(entries)) for month, entries in months.items())


def with_workloads(report: DayReport, workloads: pd.DataFrame) -> DayReport:
    """The report with workload movers and each team's top workloads, from the workload costs (day, cluster,
    namespace, team, owner, workload, cost) of the day and the day before; a day without workload costs
    (collection off, or billed before it) shows namespaces only."""
    days = set(workloads["day"])
    comparable = report.day in days and report.day - timedelta(days=1) in days
    teams_rows = dict(tuple(workloads.groupby("team", sort=False)))  # once: a big day has many rows per team

    def moved(current: Changes | None, scope: pd.DataFrame) -> Changes | None:
        if current is None or not (comparable and current.ran):
            return current
        return replace(current, workloads=_movers(scope, report.day, ["cluster", "namespace", "workload"]))

    teams = []
    for team in report.teams:
        scope = teams_rows.get(team.team, workloads.iloc[:0])
        mine = scope[scope["day"] == report.day].assign(owner=lambda f: f["owner"].fillna(""))
        top = _grouped(mine, ["cluster", "namespace", "workload", "owner"], ["cost"])
        teams.append(replace(
            team, changes=moved(team.changes, scope), top_workloads=tuple(top[:TOP_WORKLOADS]),
            owner_workloads={owner: tuple(r for r in top if r["owner"] == owner)[:OWNER_WORKLOADS]
                             for owner in dict.fromkeys(r["owner"] for r in top)},
        ))
    return replace(report, teams=teams, changes=moved(report.changes, workloads))


def changes(rows: pd.DataFrame, runs: set[date], day: date) -> Changes:
    """The namespaces whose cost changed most since the day before (by absolute change), from ledger rows."""
    since = day - timedelta(days=1)
    if since not in runs:
        return Changes(since, ran=False)
    return Changes(since, ran=True, namespaces=_movers(rows, day, ["cluster", "namespace"]))


def _movers(rows: pd.DataFrame, day: date, keys: list[str]) -> tuple[Mover, ...]:
    """The TOP_MOVERS groups of `keys` with the largest absolute change of cost (to the cent) from day-1 to day;
    something that appeared or disappeared counts from or to 0."""
    def costs(on: date) -> pd.Series:
        return money_sums(rows[rows["day"] == on], keys, ["cost"]).set_index(keys)["cost"]

    both = pd.concat({"before": costs(day - timedelta(days=1)), "after": costs(day)}, axis=1).fillna(0.0)
    both = both.assign(size=(both["after"] - both["before"]).abs().round(2)).reset_index()
    both = both[both["size"] > 0].sort_values(["size", *keys], ascending=[False] + [True] * len(keys))
    return tuple(Mover(r["cluster"], r["namespace"], r.get("workload", ""), float(r["before"]), float(r["after"]))
                 for r in both.head(TOP_MOVERS).to_dict("records"))


def _with_held(by_usage: list[dict], held: pd.DataFrame) -> list[dict]:
    """Usage rows with `held`: on a GPU row partly held as shared GPU resources, what each part was, in its own
    units and in the row's GPU-hours (`24.00 × 3g.40gb slice-h = 10.29 GPU-h, 34.16 GPU-h as whole GPUs`)."""
    sums = held.groupby(["cluster", "gpu_model", "resource"], as_index=False)[["held_hours", "gpu_hours"]].sum()
    texts = {}
    for key, group in sums.groupby(["cluster", "gpu_model"]):
        is_shared = group["held_hours"] != group["gpu_hours"]
        if not is_shared.any():
            continue
        parts = [f"{held_gpus([part])} = {quantity(part['gpu_hours'], GPU)}"
                 for part in group[is_shared].to_dict("records")]
        whole = group.loc[~is_shared, "gpu_hours"].sum()
        texts[key] = ", ".join([*parts, *([f"{quantity(whole, GPU)} as whole GPUs"] if cents(whole) else [])])
    return [{**row, "held": texts.get((row["cluster"], row["gpu_model"]), "") if row["resource"] == GPU else ""}
            for row in by_usage]


def with_service_units(report: DayReport, clusters: Sequence[ClusterConfig]) -> DayReport:
    """Each team's usage rows of the day with their SU (`service_units`, None: none), where a price set of
    `clusters` weighs them (docs/spec.md "Service units, credits and subsidies")."""
    teams = []
    for team in report.teams:
        usage = pd.DataFrame(team.by_usage, columns=["cluster", "resource", "gpu_model", "quantity"]).assign(
            day=report.day)
        figures = service_units(usage, clusters)
        teams.append(replace(team, by_usage=[{**row, "service_units": None if pd.isna(figure) else float(figure)}
                                             for row, figure in zip(team.by_usage, figures, strict=True)]))
    return replace(report, teams=teams)


def _waste(wasted: pd.DataFrame, key: str) -> tuple[dict, ...]:
    """The waste measures (frames.WASTE_MEASURES) per `key`, most idle GPU-hours first; None where not measured."""
    measures = list(frames.WASTE_MEASURES)
    sums = wasted.groupby(key, as_index=False)[measures].sum(min_count=1)
    sums = sums.sort_values([*measures, key], ascending=[*(False for _ in measures), True], na_position="last")
    return tuple({k: None if pd.isna(v) else v for k, v in row.items()} for row in sums.to_dict("records"))


def held_rows(pending: pd.DataFrame, key: str) -> tuple[dict, ...]:
    """What pods bound to a node held before they ran, per `key` (team or owner), cluster, resource and GPU model,
    most costly first: quantity, cost, the reason that held the most resource-hours, and whether it was charged."""
    keys = [key, "cluster", "resource", "gpu_model"]
    if pending.empty:
        return ()
    by_reason = pending.groupby([*keys, "reason"], as_index=False)[["quantity"]].sum()
    dominant = by_reason.sort_values(["quantity", "reason"], ascending=[False, True]).drop_duplicates(keys)
    sums = pending.groupby(keys, as_index=False).agg(quantity=("quantity", "sum"), charged=("charged", "max")).merge(
        money_sums(pending, keys, ["cost"]), on=keys)  # money, summed as every figure is
    rows = sums.merge(dominant[[*keys, "reason"]], on=keys).sort_values(["cost", *keys], ascending=[False, *[True] * 4])
    return tuple({**row, "charged": bool(row["charged"])} for row in rows.to_dict("records"))


@dataclass(frozen=True)
class HeldTable:
    """A held-before-running table as a person reads it (held_rows, or a range's rows per resource): the rows that
    cost at least a cent, with the reason in words; the total of every row, those under half a cent too (a
    Rounding row makes up the difference); `charged` True or False where all rows agree, and said once above the
    table then, None where some were charged and some only shown (a column then, and what was charged)."""

    rows: tuple[dict, ...]
    total: float
    charged: bool | None
    charged_total: float


def held_table(rows: Iterable[dict]) -> HeldTable:
    every = list(rows)
    statuses = {bool(row["charged"]) for row in every}
    return HeldTable(
        rows=tuple({**row, "reason": held_reason(row["reason"]), "kubernetes_reason": row["reason"]}
                   for row in every if cents(row["cost"])),
        total=total(row["cost"] for row in every),
        charged=statuses.pop() if len(statuses) == 1 else None,
        charged_total=total(row["cost"] for row in every if row["charged"]),
    )


def _capacity(capacity: pd.DataFrame, today: pd.DataFrame) -> tuple[dict, ...]:
    """Capacity rows with the share requested and who paid for what was unrequested: '' nobody, else who."""
    shared = set(today.loc[today["resource"].str.startswith(UNREQUESTED), "cluster"])
    reserved = today[today["resource"].str.startswith(RESERVED)]
    pool_teams = {(c, ns.removeprefix(POOL_PREFIX)): team
                  for c, ns, team in zip(reserved["cluster"], reserved["namespace"], reserved["team"])}

    def charged_to(row: dict) -> str:
        if row["pool"]:
            team = pool_teams.get((row["cluster"], row["pool"]))
            return f"to {team} (reserved)" if team else ""
        return "to teams" if row["cluster"] in shared else ""

    return tuple(
        {**row, "requested_share": row["requested"] / row["allocatable"] if row["allocatable"] else None,
         "unrequested_charged_to": charged_to(row)}
        for row in capacity.to_dict("records")
    )


def _storage(storage: pd.DataFrame) -> tuple[dict, ...]:
    """Storage rows for the page: None for the price and cost of a class without a price (NaN in the frame)."""
    return tuple({key: None if pd.isna(value) else value for key, value in row.items()}
                 for row in storage.to_dict("records"))


def _sum(frame: pd.DataFrame) -> float:
    return total(frame["cost"])


def _grouped(frame: pd.DataFrame, keys: list[str], values: list[str]) -> list[dict]:
    """Sums of `values` per `keys`, most expensive first."""
    sums = money_sums(frame, keys, values)
    return sums.sort_values(["cost", *keys], ascending=[False] + [True] * len(keys)).to_dict("records")


def _trend(frame: pd.DataFrame, runs: set[date], day: date) -> list[TrendDay]:
    costs = money_sums(frame, ["day"], ["cost"]).set_index("day")["cost"]
    days = [day - timedelta(days=n) for n in range(TREND_DAYS - 1, -1, -1)]
    return [TrendDay(d, float(costs.get(d, 0.0)) if d in runs or d in costs.index else None) for d in days]


def _names(values: pd.Series) -> str:
    return ", ".join(sorted(set(values)))


def _figures(rows: pd.DataFrame, runs: set[date], day: date) -> dict:
    """The headline numbers of any part of the ledger window: all teams, or one."""
    previous = day - timedelta(days=1)
    today = rows[rows["day"] == day]
    return {
        "cost": _sum(today),
        "discount": total(today["list_cost"]) - _sum(today),
        "previous": _sum(rows[rows["day"] == previous]) if previous in runs else None,
        "month_to_date": _sum(rows[rows["day"] >= day.replace(day=1)]),
        "trend": _trend(rows, runs, day),
    }


def headline(day_costs: pd.DataFrame, runs: set[date], day: date) -> dict:
    """cost, discount, previous, month_to_date and trend of `day` from per-day sums (day, cost, list_cost),
    as the pages' figures show them; `billing serve` gets the sums from the database."""
    return _figures(day_costs, runs, day)


def _team_report(team: str, rows: pd.DataFrame, runs: set[date], day: date) -> TeamReport:
    today = rows[rows["day"] == day]
    owners = today.assign(owner=today["owner"].fillna(""))
    by_owner = money_sums(owners, ["owner"], ["cost"]).merge(
        owners.groupby("owner", as_index=False).agg(namespaces=("namespace", _names)), on="owner")
    return TeamReport(
        team=team,
        slug=slug(team),
        **_figures(rows, runs, day),
        by_owner=by_owner.sort_values(["cost", "owner"], ascending=[False, True]).to_dict("records"),
        by_namespace=_grouped(owners, ["cluster", "namespace", "owner"], ["cost"]),
        by_usage=_grouped(_with_discount(today), ["cluster", "resource", "gpu_model"], ["quantity", "cost", "discount"]),
        changes=changes(rows, runs, day),
    )


def _quotas(today: pd.DataFrame, unlent: pd.DataFrame) -> dict[str, tuple[dict, ...]]:
    """Per team, its Kueue quotas of the day from the ledger's rows (docs/spec.md "Kueue quotas"), per cluster,
    resource and GPU model in resource-hours: `quota` (its quota- rows), `within` (its credit- rows on a cluster with
    quotas), `lent` (its lent- rows), `borrowed` (the lent- rows of the namespaces it is charged for, by its share
    of their use) and `beyond` (borrowed that no team lent, from `unlent`, frames.UNLENT)."""
    kind = today["resource"].str.extract(r"^(?:(quota|credit|lent)-)?(\w+)$")
    rows = today.assign(kind=kind[0].fillna(""), base=kind[1])
    kueue_clusters = set(rows.loc[rows["kind"] == "quota", "cluster"])
    rows = rows[rows["cluster"].isin(kueue_clusters)]
    if rows.empty:
        return {}
    keys = ["team", "cluster", "base", "gpu_model"]
    own = rows[rows["kind"].isin(["quota", "credit", "lent"])].pivot_table(
        index=keys, columns="kind", values="quantity", aggfunc="sum").reset_index()
    used = rows[rows["kind"] == ""].groupby([*keys, "namespace"], as_index=False)["quantity"].sum()
    used["share"] = used["quantity"] / used.groupby(["cluster", "namespace", "base", "gpu_model"])["quantity"].transform("sum")
    lent = rows[rows["kind"] == "lent"].groupby(["cluster", "namespace", "base", "gpu_model"], as_index=False)["quantity"].sum()
    borrowed = used.merge(lent, on=["cluster", "namespace", "base", "gpu_model"], suffixes=("", "_lent"))
    borrowed["borrowed"] = -borrowed["quantity_lent"] * borrowed["share"]
    beyond = unlent.rename(columns={"resource": "base", "quantity": "beyond"}).groupby(keys, as_index=False)["beyond"].sum()
    table = own.merge(borrowed.groupby(keys, as_index=False)["borrowed"].sum(), on=keys, how="outer").merge(
        beyond, on=keys, how="outer")
    table = table.reindex(columns=[*keys, "quota", "credit", "lent", "borrowed", "beyond"]).fillna(0.0)
    table = table.assign(within=-table["credit"], lent=-table["lent"], resource=table["base"])
    columns = ["cluster", "resource", "gpu_model", "quota", "within", "borrowed", "beyond", "lent"]
    return {str(team): tuple(group.sort_values(columns[:3])[columns].to_dict("records"))
            for team, group in table.groupby("team")}


def _with_discount(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.assign(discount=rows["list_cost"] - rows["cost"])


def summarize(rows: pd.DataFrame, runs: set[date], day: date, currency: str, unallocated_team: str,
              unlent: pd.DataFrame | None = None) -> DayReport:
    """Ledger rows of the report window (see `window_start`) as the day's numbers; `unlent`: the day's Kueue
    borrowing no team lent (frames.UNLENT), none unless given."""
    others = sorted(set(rows["currency"]) - {currency})
    if others:
        raise RenderError(
            f"the ledger holds costs in {', '.join(others)} between {window_start(day)} and {day}, "
            f"but the configured currency is {currency}; reports do not add up different currencies"
        )
    today = rows[rows["day"] == day]
    quotas = _quotas(today, frames.UNLENT.empty() if unlent is None else unlent)
    teams = [replace(_team_report(str(team), team_rows, runs, day), quotas=quotas.get(str(team), ()))
             for team, team_rows in rows.groupby("team")]
    teams.sort(key=lambda t: (-t.cost, -t.month_to_date, t.team))
    month = [day.replace(day=n) for n in range(1, day.day + 1)]
    namespaces = money_sums(today, ["cluster", "namespace"], ["cost"]).merge(
        today.groupby(["cluster", "namespace"], as_index=False).agg(teams=("team", _names)), on=["cluster", "namespace"])
    return DayReport(
        day=day,
        currency=currency,
        unallocated_team=unallocated_team,
        **_figures(rows, runs, day),
        missing_in_month=[d for d in month if d not in runs and d != day],
        teams=teams,
        by_usage=_grouped(_with_discount(today), ["cluster", "resource"], ["quantity", "cost", "discount"]),
        gpu_models=_grouped(today[today["resource"] == GPU], ["gpu_model"], ["quantity", "cost"]),
        top_namespaces=namespaces.sort_values(["cost", "cluster", "namespace"], ascending=[False, True, True])
        .head(TOP_NAMESPACES)
        .to_dict("records"),
        unallocated=_grouped(today[today["team"] == unallocated_team].assign(owner=lambda f: f["owner"].fillna("")),
                             ["cluster", "namespace", "owner"], ["cost"]),
        changes=changes(rows, runs, day),
    )


def with_directory(report: DayReport, directory: Directory | None, rules: NamespaceRules) -> DayReport:
    """The report with who people are: display names, each team's leads, and why each unallocated
    namespace has no team (its ledger owner says the person was on no team; else the name rules say why)."""
    if directory is None:
        return report
    teams = [replace(t, leads=found.leads if (found := directory.team(t.team)) else ()) for t in report.teams]
    uids = {row["owner"] for team in teams for row in team.by_owner} | {uid for team in teams for uid in team.leads}
    people = {uid: person.name for uid in uids if uid and (person := directory.person(uid)) and person.name}
    unallocated = [{**row, "reason": unallocated_reason(row["namespace"], row["owner"] or None, directory, rules)}
                   for row in report.unallocated]
    return replace(report, people=people, teams=teams, unallocated=unallocated)


# --- charts -----------------------------------------------------------------
