"""Each person's own summary (`email.personal`): what their namespaces cost, and what they held idle.

`digest_period` says which days a run's digest covers (every run's day, or
the week ending on a Sunday's run); `digests_of` makes the ledger's rows of
those days, as billing/publish/answers.py reads them (`personal_digests`), into
one `PersonalDigest` per person with costs, their share of each
namespace as in `billing report --person`, their most expensive workloads
where the days were broken down by workload, and what their pods bound to a
node held before they ran. The letter is `billing.notify.letters.person_letter`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import pandas as pd

from billing import frames
from billing.days import days_between
from billing.money import money_sums, one_currency, total
from billing.publish.dayview import RenderError, held_rows

SUNDAY = 6  # date.weekday()
TOP_WORKLOADS = 5  # a letter names the most expensive few; `billing serve` has them all


@dataclass(frozen=True)
class PersonalDigest:
    uid: str
    first: date
    last: date
    currency: str
    cost: float  # from first to last
    month_to_date: float  # the month of `last`, to `last`
    by_namespace: list[dict]  # cluster, namespace, cost: their share, most expensive first
    idle_gpu_hours: float | None  # None: no cluster of theirs measures it
    unused_cpu_core_hours: float | None
    unused_storage_gib_hours: float | None
    missing_days: list[date]  # days of the period never billed
    reports_url: str
    # cluster, namespace, workload, cost: the TOP_WORKLOADS most expensive, their share; empty without workload rows
    top_workloads: list[dict] = field(default_factory=list)
    # what their pods bound to a node held before they ran, as on their team's page (dayview.held_rows); empty: nothing
    held_before_running: tuple[dict, ...] = ()


def digest_period(day: date, personal: str) -> tuple[date, date] | None:
    """The days the run of `day` reports to each person: the day (daily), the week to a Sunday (weekly), or none."""
    if personal == "daily":
        return day, day
    if personal == "weekly" and day.weekday() == SUNDAY:
        return day - timedelta(days=6), day
    return None


def digests_of(first: date, last: date, *, rows: pd.DataFrame, waste: pd.DataFrame, workloads: pd.DataFrame,
               pending: pd.DataFrame, runs: set[date], currency: str, reports_url: str) -> list[PersonalDigest]:
    """One digest per person whose namespaces cost something from first to last, by uid: from the ledger's rows of
    the month of `last` to it and of the period (`rows`), the period's waste per owner, workload costs, what pods
    bound to a node held before they ran, and the days run. Each in the currency of the person's own rows
    (`currency`, the configured one, where they have none); RenderError where they are in two."""
    month = last.replace(day=1)
    rows = rows[rows["owner"].notna()]
    period = rows[rows["day"] >= first]
    waste = waste.dropna(subset=["owner"]).set_index("owner")
    tops = top_workloads(workloads)
    missing = [day for day in days_between(first, last) if day not in runs]
    digests = []
    uid: Any  # a person's uid (pandas-stubs types group keys as any scalar)
    for uid, mine in period.groupby("owner"):
        cost = total(mine["cost"])
        if cost <= 0:
            continue
        month_rows = rows[(rows["owner"] == uid) & (rows["day"] >= month)]
        held = one_currency([*mine["currency"], *month_rows["currency"]], currency,
                            _in_two(str(uid), min(first, month), last))
        namespaces = money_sums(mine, ["cluster", "namespace"], ["cost"])
        idle = waste.loc[uid] if uid in waste.index else pd.Series(dict.fromkeys(frames.WASTE_MEASURES))
        measured = {m: None if pd.isna(idle[m]) else float(idle[m]) for m in frames.WASTE_MEASURES}
        digests.append(PersonalDigest(
            uid, first, last, held, cost,
            month_to_date=total(month_rows["cost"]),
            by_namespace=namespaces.sort_values(["cost", "cluster", "namespace"], ascending=[False, True, True])
            .to_dict("records"),
            **measured, missing_days=missing, reports_url=reports_url, top_workloads=tops.get(uid, []),
            held_before_running=held_rows(pending[pending["owner"] == uid], "owner"),
        ))
    return digests


def _in_two(uid: str, first: date, last: date) -> Callable[[str], RenderError]:
    """The refusal of a person's summary whose own rows are in two currencies (`both`, as one_currency names them)."""
    return lambda both: RenderError(f"{uid}'s costs from {first} to {last} are in {both}; a person's summary is one "
                                    f"figure per period, and amounts of two currencies never add")


def top_workloads(rows: pd.DataFrame) -> dict[str, list[dict]]:
    """Per person: cluster, namespace, workload and cost of their TOP_WORKLOADS most expensive workloads among the
    workload cost rows (their share of each, across their teams), most expensive first."""
    rows = rows[rows["owner"].notna()]
    sums = money_sums(rows, ["owner", "cluster", "namespace", "workload"], ["cost"])
    ordered = sums.sort_values(["cost", "cluster", "namespace", "workload"], ascending=[False, True, True, True])
    return {str(uid): mine.drop(columns="owner").head(TOP_WORKLOADS).to_dict("records")
            for uid, mine in ordered.groupby("owner", sort=False)}
