"""Ad hoc questions answered from the ledger: what did a team, or a person, spend?

`build_report` turns a question (whose spending, which days, grouped by what)
into a `Report`: plain rows summed by the database (GROUP BY, not a year of
rows loaded into memory; the SQL is billing/ledger/questions.py), the total,
and the days in the range that no run completed. Missing days are listed, never counted as zero. Formatting the
report for a terminal, a spreadsheet or a browser is `billing.publish.report_formats`.

Breakdowns below the namespace (`--by workload`, `--by label:NAME`) read the
workload rows; a ledger row that no workload row breaks down (a day billed
before they were kept, with workloads off, or past `workloads.keep_days`)
counts as NOT_BROKEN_DOWN in its namespace, so a breakdown still adds up to
the namespace and team totals, and the report names those days.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy import Engine

from billing.config import ClusterConfig
from billing.days import days_between, days_in_month
from billing.directory.people import directory_from_json
from billing.ledger.questions import (
    HOURS_COLUMNS,
    LIST_COST,
    NOT_BROKEN_DOWN,
    REQUESTED_COST,
    UNREQUESTED_SHARE,
    Subject,
    days_not_broken_down,
    has_rows,
    held_before_running,
    held_by_namespace,
    known_names,
    label_sets,
    ledger_rows,
    quantities,
    workload_rows,
)
from billing.ledger.read import completed, energy_sums, incomplete, latest_directory, recovered
from billing.money import Totals, total
from billing.publish.asked import ReportError
from billing.publish.budgets import BudgetStatus
from billing.publish.choices import GROUPINGS, LABEL_PREFIX, WORKLOAD
from billing.publish.credits import CREDIT_WORDS
from billing.publish.formatting import COST_RECOVERY
from billing.resources import Names

# per namespace: the shared GPU resources held (MIG slices, time-sliced replicas), as
# [{"resource", "held_hours", "gpu_hours"}]; only in reports by namespace whose range has some
HELD_COLUMN = "gpu_held"
SUMS = Names(lambda: [*HOURS_COLUMNS.values(), "cost"])  # what a group's row sums


class UnknownSubject(ReportError):
    """The ledger has no rows of the team or person asked about. The message may suggest the closest names;
    `plain` says the same without them."""

    def __init__(self, message: str, plain: str = "") -> None:
        super().__init__(message)
        self.plain = plain or message


@dataclass(frozen=True)
class Report:
    """The answer: rows of DETAIL_COLUMNS (ungrouped) or of the group key and its sums.

    Grouped rows hold the --by word (e.g. "namespace"), the HOURS_COLUMNS and
    "cost". Rows of several teams (an all-teams or a person's report) also
    hold "team" when ungrouped. Values are the ledger's, unrounded. Every row
    keeps its "currency" (not a column): a group in two currencies is two rows.
    """

    subject: Subject
    first: date
    last: date
    currency: str  # the rows' one currency; where they hold several (see `totals`), the configured one
    by: str | None
    columns: list[str]
    rows: list[dict]
    missing_days: list[date]
    incomplete: list[tuple[date, str, float]] = field(default_factory=list)  # (day, cluster, coverage) with data gaps
    budget: BudgetStatus | None = None  # a team's month of `last` against its budget (billing/publish/budgets.py)
    people: dict[str, str] = field(default_factory=dict)  # uid -> display name (cn) from the stored directory
    leads: tuple[str, ...] = ()  # a team report's team leads (uids), from the stored directory
    # breakdowns below the namespace: days with costs that no workload row breaks down; None for other reports
    without_breakdown: list[date] | None = None
    # (cluster, day): another price set came into force inside the range (docs/spec.md "Prices over time and cost
    # recovery"); from the config, see `price_changes`
    price_changes: list[tuple[str, date]] = field(default_factory=list)
    # per resource (by workload: per workload and resource), what pods bound to a node held before they ran: quantity,
    # cost, charged (any of it), reason (the one that held most); in the rows' costs only where charged (docs/spec.md
    # "Rule 2: running")
    held_before_running: list[dict] = field(default_factory=list)
    # the cost recovery in the rows: per closed month the range holds whole, team and cluster (ledger.read.recovered)
    recovered: list[dict] = field(default_factory=list)
    # closed months with cost recovery that the range holds only part of: their recovery, booked on the whole month,
    # is not in the rows
    recovery_apart: list[date] = field(default_factory=list)
    # per team and cluster the kWh and grams of CO2e (docs/spec.md "Energy and carbon"; `ledger.read.energy_sums`), a
    # figure None where unknown; an all-teams report's also the unattributed (team ''); none without energy or for a person
    energy: list[dict] = field(default_factory=list)

    @property
    def totals(self) -> Totals:
        """The cost per currency the rows hold (each row keeps its `currency`): a ledger priced in two currencies
        shows both totals, never their sum; `currency` where there are no rows."""
        return Totals.of(((self.currency_of(row), row["cost"]) for row in self.rows), self.currency)

    def currency_of(self, row: dict) -> str:
        """A row's currency: its own, as the ledger holds it; a row made without one is in the report's."""
        return str(row.get("currency", self.currency))

    @property
    def total_cost(self) -> float:
        """The one figure of a report in one currency; ReportError where the rows hold several (see `totals`)."""
        return self.totals.one(lambda held: ReportError(
            f"the ledger holds costs in {held} for {self.subject.title} between {self.first} and {self.last}, "
            "which add up to no one figure; ask for a range with one currency"))[1]


def price_changes(clusters: list[ClusterConfig], first: date, last: date) -> list[tuple[str, date]]:
    """(cluster, day) for each day after `first`, up to `last`, on which a cluster's next price set came into force:
    a report over such a range adds up hours at different prices."""
    return [(cluster.name, day) for cluster in clusters for day in cluster.price_changes(first, last)]


def breakdown_column(by: str) -> str:
    """The row key of a breakdown below the namespace: `workload`, or `label_NAME` for `label:NAME`."""
    return WORKLOAD if by == WORKLOAD else "label_" + by.removeprefix(LABEL_PREFIX)


def _by_label(rows: list[dict], name: str, column: str) -> list[dict]:
    """Rows per namespace and label set summed per namespace and value of cost label `name`
    ('' where a pod had none) into `column`; a label set without the label (a day billed before it was
    configured) counts as NOT_BROKEN_DOWN."""
    summed: dict[tuple, dict] = {}
    for row in rows:
        labels = {} if row["labels"] is None else json.loads(row["labels"])
        key = (row["namespace"], labels.get(name, NOT_BROKEN_DOWN), row["currency"])
        into = summed.setdefault(key, {"namespace": key[0], column: key[1], **dict.fromkeys(SUMS, 0.0),
                                       "currency": key[2]})
        for measure in SUMS:
            into[measure] += row[measure]
    return sorted(summed.values(), key=lambda row: (-row["cost"], row["namespace"], row[column]))


def _days_without_breakdown(engine: Engine, subject: Subject, first: date, last: date, label: str | None) -> list[date]:
    """Days whose costs are (partly) not broken down: ledger rows without workload rows, and for a cost
    label, workload rows whose label set lacks it."""
    days = days_not_broken_down(engine, subject, first, last)
    if label is not None:
        days |= {day for day, labels in label_sets(engine, subject, first, last) if label not in json.loads(labels)}
    return sorted(days)


def _known(engine: Engine, subject: Subject) -> None:
    """Raise ReportError naming the closest names when the ledger never saw this team or person."""
    if has_rows(engine, subject):
        return
    closest = difflib.get_close_matches(subject.name or "", known_names(engine, subject.kind), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(closest)}" if closest else ""
    plain = f"no {subject.kind} named {subject.name!r} in the ledger"
    raise UnknownSubject(plain + hint, plain)


def build_report(
    engine: Engine, subject: Subject, first: date, last: date, by: str | None, currency: str,
    clusters: Sequence[ClusterConfig] = (),
) -> Report:
    """Ask the ledger; `currency` (the configured one) names the money of a report without rows, or with rows in
    several currencies; `by` as checked by `breakdown`; where a price set of `clusters` weighs service units, the rows
    have theirs (SERVICE_UNITS)."""
    if subject.kind != "all":
        _known(engine, subject)
    without_breakdown = None
    if by is not None and by not in GROUPINGS:
        rows, columns = _breakdown_rows(engine, subject, first, last, by)
        label = None if by == WORKLOAD else by.removeprefix(LABEL_PREFIX)
        without_breakdown = _days_without_breakdown(engine, subject, first, last, label)
    else:
        rows, columns = _ledger_rows(engine, subject, first, last, by)
        if any(_weighs(cluster) for cluster in clusters):
            columns.insert(columns.index("cost"), SERVICE_UNITS)
            _with_service_units(rows, engine, subject, first, last, by, clusters)
    whole = (first.replace(day=1), last.replace(day=days_in_month(last)))  # the months the range touches
    touched = recovered(engine, *whole, subject.name) if subject.kind == "team" else \
        recovered(engine, *whole) if subject.kind == "all" else []
    months = [line for line in touched if first <= line["month"] and _month_end(line["month"]) <= last]
    rows = _with_recovery(rows, columns, by, months)
    done = completed(engine, first, last)
    missing = [day for day in days_between(first, last) if day not in done]
    held = {row["currency"] for row in rows}
    people, leads = _who(engine, subject, rows)
    return Report(subject, first, last, held.pop() if len(held) == 1 else currency, by, columns, rows, missing, incomplete(engine, first, last),
                  people=people, leads=leads, without_breakdown=without_breakdown,
                  held_before_running=_per_resource(held_before_running(engine, subject, first, last, by == WORKLOAD)),
                  recovered=months, recovery_apart=sorted({line["month"] for line in touched} - {line["month"] for line in months}),
                  energy=[] if subject.kind == "person" else energy_sums(engine, first, last, subject.name))


SERVICE_UNITS = "service_units"  # a row's SU (docs/spec.md "Service units, credits and subsidies"); None: none


def _weighs(cluster: ClusterConfig) -> bool:
    """Whether a price set of the cluster weighs service units."""
    sets = cluster.prices if isinstance(cluster.prices, list) else [cluster.prices]
    return any(prices.service_units is not None for prices in sets)


def _with_service_units(rows: list[dict], engine: Engine, subject: Subject, first: date, last: date, by: str | None,
                        clusters: Sequence[ClusterConfig]) -> None:
    """Each row's SU: a ledger row's own, a group's the sum of its rows' (by resource, where a GPU row is counted
    under the GPU resources it held, none). Imported here: a report without SU loads neither pandas nor pricing."""
    import pandas as pd

    from billing.charge.service_units import SU_COLUMNS, service_units

    if by is None:
        figures = service_units(pd.DataFrame(rows, columns=SU_COLUMNS), clusters) if rows else pd.Series([])
        for row, figure in zip(rows, figures, strict=True):
            row[SERVICE_UNITS] = None if math.isnan(figure) else float(figure)
        return
    sums: dict[object, float] = {}
    if by != "resource":
        weighed = pd.DataFrame(quantities(engine, subject, first, last, GROUPINGS[by]), columns=["key", *SU_COLUMNS])
        sums = weighed.assign(su=service_units(weighed, clusters)).groupby("key", dropna=False)["su"].sum(
            min_count=1).dropna().to_dict()
    for row in rows:
        row[SERVICE_UNITS] = float(sums[row[by]]) if row[by] in sums else None


def _month_end(month: date) -> date:
    return month.replace(day=days_in_month(month))


RECOVERED_INTO = ("team", "cluster")  # groupings whose rows take a closed month's cost recovery in; others show it apart
MONEY_SUMS = {"cost", LIST_COST}  # a cost recovery line adds to these: cost at no other price, no requested hours


def _with_recovery(rows: list[dict], columns: list[str], by: str | None, months: list[dict]) -> list[dict]:
    """The rows with the cost recovery of the closed months the range holds whole (ledger.read.recovered), so that
    a team's, a cluster's and the range's figures are their statements' and `billing export`'s: by team or
    cluster in the team's or cluster's row, else as a row of its own per month and cluster, named COST_RECOVERY
    (resource `recovery`), with no hours."""
    for line in months:
        into = next((row for row in rows if by in RECOVERED_INTO and row[by] == line[by]
                     and row["currency"] == line["currency"]), None)
        if into is None:
            into = {column: _recovery_key(column, line) for column in columns} | {"currency": line["currency"]}
            rows.append(into)
        for column in MONEY_SUMS & into.keys():
            into[column] += line["amount"]
    return rows


KEY_COLUMNS = {*GROUPINGS, *GROUPINGS.values(), WORKLOAD}  # a row's key; the other columns are figures


def _recovery_key(column: str, line: dict) -> object:
    """A cost recovery row's cell: its cluster and team, its kind as resource (`recovery`, `subsidy`,
    `monthly-credit`), its name in the other keys, no hours."""
    if column in ("cluster", "team"):
        return line[column]
    if column == "resource":
        return line["kind"]
    if column in KEY_COLUMNS or column.startswith("label_"):
        return f"{CREDIT_WORDS.get(line['kind'], COST_RECOVERY)} {line['month']:%Y-%m}"
    return [] if column == HELD_COLUMN else None if column == SERVICE_UNITS else 0.0


def _per_resource(held: list[dict]) -> list[dict]:
    """Rows per resource, currency and reason (workload first where asked per workload) as one per resource and
    currency (per workload, resource and currency; NOT_BROKEN_DOWN for days billed with workloads off, as in the
    rows): the sums, each currency's apart, and the reason with the most resource-hours."""
    found: dict[tuple, dict] = {}
    for row in held:
        key = (({"workload": row["workload"] or NOT_BROKEN_DOWN} if "workload" in row else {})
               | {"resource": row["resource"], "currency": row["currency"]})
        kept = found.setdefault(tuple(key.values()), {**key, "quantity": 0.0, "cost": 0.0, "charged": False,
                                                      "reason": row["reason"], "most": 0.0})
        kept["quantity"] += row["quantity"]
        kept["cost"] = total([kept["cost"], row["cost"]])  # money, summed as every figure is
        kept["charged"] = kept["charged"] or bool(row["charged"])
        if row["quantity"] > kept["most"]:
            kept.update(reason=row["reason"], most=row["quantity"])
    return [{k: v for k, v in row.items() if k != "most"} for row in found.values()]


def _ledger_rows(engine: Engine, subject: Subject, first: date, last: date, by: str | None
                 ) -> tuple[list[dict], list[str]]:
    """Rows and columns of a report from the ledger's own columns: its rows, or grouped by a GROUPINGS word."""
    rows, columns = ledger_rows(engine, subject, first, last, by, None if by is None else GROUPINGS[by])
    held = held_by_namespace(engine, subject, first, last) if by == "namespace" else {}
    if held:
        columns.insert(columns.index("gpu_hours") + 1, HELD_COLUMN)
        for row in rows:
            row[HELD_COLUMN] = held.get(row["namespace"], [])
    if UNREQUESTED_SHARE in columns and not any(row[UNREQUESTED_SHARE] for row in rows):
        columns = [c for c in columns if c not in (REQUESTED_COST, UNREQUESTED_SHARE)]  # nothing to tell apart
        rows = [{k: v for k, v in row.items() if k not in (REQUESTED_COST, UNREQUESTED_SHARE)} for row in rows]
    return rows, columns


def _who(engine: Engine, subject: Subject, rows: list[dict]) -> tuple[dict[str, str], tuple[str, ...]]:
    """Display names of the people in the rows and a team's leads, from the directory the last run stored."""
    stored = latest_directory(engine)
    if stored is None:
        return {}, ()
    directory = directory_from_json(stored[1])
    team = directory.team(subject.name) if subject.kind == "team" and subject.name else None
    leads = team.leads if team else ()
    uids = {row.get("owner") or row.get("person") for row in rows} | set(leads)
    if subject.kind == "person":
        uids.add(subject.name)
    people = {uid: person.name for uid in uids if uid and (person := directory.person(uid)) and person.name}
    return people, leads


def _breakdown_rows(engine: Engine, subject: Subject, first: date, last: date, by: str
                    ) -> tuple[list[dict], list[str]]:
    """Rows and columns by workload or cost label: namespace, the breakdown_column, HOURS_COLUMNS, cost."""
    column = breakdown_column(by)
    if by == WORKLOAD:
        rows = workload_rows(engine, subject, first, last, WORKLOAD)
    else:
        rows = _by_label(workload_rows(engine, subject, first, last, "labels"),
                         by.removeprefix(LABEL_PREFIX), column)
    return rows, ["namespace", column, *SUMS]
