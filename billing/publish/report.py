"""Ad hoc questions answered from the ledger: what did a team, or a person, spend?

`build_report` turns a question (whose spending, which days, grouped by what)
into a `Report`: plain rows summed by the database (GROUP BY, not a year of
rows loaded into memory), the total, and the days in the range that no run
completed. Missing days are listed, never counted as zero. Formatting the
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
from dataclasses import dataclass, field
from datetime import date, datetime
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, Table, Text, case, exists, func, literal, not_, or_, select, union_all

from billing.config import ClusterConfig
from billing.days import days_between, yesterday
from billing.directory.people import directory_from_json
from billing.errors import UsageError
from billing.ledger.database import fetch
from billing.ledger.read import completed, incomplete, latest_directory, money_sum
from billing.ledger.tables import chargeback, gpu_holdings, workload_costs
from billing.publish.budgets import BudgetStatus
from billing.publish.choices import GROUPINGS, LABEL_PREFIX, WORKLOAD
from billing.publish.formatting import total
from billing.resources import CPU, GPU, MEMORY, RESOURCES, UNREQUESTED

# the workload (or label value) of ledger rows that no workload row breaks down; no Kubernetes name looks like it
NOT_BROKEN_DOWN = "(not broken down)"
ROW_KEY = ("day", "cluster", "namespace", "team", "resource", "gpu_model")  # a chargeback row's primary key

DETAIL_COLUMNS = ["day", "cluster", "namespace", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost"]
LIST_COST = "list_cost"  # cost at list price, before priority-class discounts: in CSV and JSON only

# A group's cost apart: what its requested hours cost, and its share of capacity nobody requested
# (`unrequested: share`), so that cost ÷ hours is never read as a unit price; only in reports that have such a share
REQUESTED_COST, UNREQUESTED_SHARE = "requested_cost", "unrequested_share"

# resource-hours of a group, one column per resource
HOURS_COLUMNS = {GPU: "gpu_hours", CPU: "cpu_core_hours", MEMORY: "memory_gib_hours"}
# per namespace: the shared GPU resources held (MIG slices, time-sliced replicas), as
# [{"resource", "held_hours", "gpu_hours"}]; only in reports by namespace whose range has some
HELD_COLUMN = "gpu_held"
SUMS = [*HOURS_COLUMNS.values(), "cost"]  # what a group's row sums


class ReportError(UsageError):
    """The question cannot be answered as asked (an unknown team, mixed currencies)."""


class UnknownSubject(ReportError):
    """The ledger has no rows of the team or person asked about. The message may suggest the closest names;
    `plain` says the same without them."""

    def __init__(self, message: str, plain: str = "") -> None:
        super().__init__(message)
        self.plain = plain or message


@dataclass(frozen=True)
class Subject:
    """Whose spending: one team (`kind="team"`), one person (`"person"`), or every team (`"all"`)."""

    kind: str
    name: str | None = None

    @property
    def title(self) -> str:
        return {"team": f"team {self.name}", "person": f"person {self.name}", "all": "all teams"}[self.kind]


@dataclass(frozen=True)
class Report:
    """The answer: rows of DETAIL_COLUMNS (ungrouped) or of the group key and its sums.

    Grouped rows hold the --by word (e.g. "namespace"), the HOURS_COLUMNS and
    "cost". Rows of several teams (an all-teams or a person's report) also
    hold "team" when ungrouped. Values are the ledger's, unrounded.
    """

    subject: Subject
    first: date
    last: date
    currency: str
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

    @property
    def total_cost(self) -> float:
        return total(row["cost"] for row in self.rows)


def price_changes(clusters: list[ClusterConfig], first: date, last: date) -> list[tuple[str, date]]:
    """(cluster, day) for each day after `first`, up to `last`, on which a cluster's next price set came into force:
    a report over such a range adds up hours at different prices."""
    return [(cluster.name, day) for cluster in clusters for day in cluster.price_changes(first, last)]


def report_range(
    zone: ZoneInfo, first: date | None, last: date | None, now: datetime | None = None
) -> tuple[date, date]:
    """The days asked for; by default the month to date (on the 1st: all of last month).

    Without --to the range ends yesterday; without --from it starts on the
    first day of the month of its end.
    """
    last = last or yesterday(zone, now)
    first = first or last.replace(day=1)
    if last < first:
        raise ReportError(f"the range ends ({last}) before it starts ({first})")
    return first, last


def _column(kind: str, table: Table = chargeback):
    return table.c.team if kind == "team" else table.c.owner


def _where(subject: Subject, first: date, last: date, table: Table = chargeback) -> list:
    conditions = [table.c.day.between(first, last)]
    if subject.kind != "all":
        conditions.append(_column(subject.kind, table) == subject.name)
    return conditions


def _detail_query(subject: Subject, first: date, last: date):
    columns = [chargeback.c[name] for name in [*DETAIL_COLUMNS, LIST_COST]]
    if subject.kind != "team":
        columns.insert(1, chargeback.c.team)
    order = [chargeback.c[name] for name in ROW_KEY]
    return select(*columns, chargeback.c.currency).where(*_where(subject, first, last)).order_by(*order)


def _hours(table: Table) -> dict:
    """HOURS_COLUMNS label -> a row's quantity if it is of that resource, else 0."""
    return {label: case((table.c.resource == resource, table.c.quantity), else_=0.0)
            for resource, label in HOURS_COLUMNS.items()}


def _grouped_query(subject: Subject, first: date, last: date, by: str):
    key = chargeback.c[GROUPINGS[by]]
    hours = [func.sum(hours).label(label) for label, hours in _hours(chargeback).items()]
    cost = money_sum(chargeback.c.cost)
    parts = [
        money_sum(case((chargeback.c.resource.in_(RESOURCES), chargeback.c.cost), else_=0.0)).label(REQUESTED_COST),
        money_sum(case((chargeback.c.resource.startswith(UNREQUESTED), chargeback.c.cost), else_=0.0)).label(UNREQUESTED_SHARE),
    ]
    order = [key] if by == "day" else [cost.desc(), key]
    return (
        select(key.label(by), *hours, *parts, cost.label("cost"), money_sum(chargeback.c.list_cost).label(LIST_COST),
               chargeback.c.currency)
        .where(*_where(subject, first, last))
        .group_by(key, chargeback.c.currency)
        .order_by(*order)
    )


def _resource_query(subject: Subject, first: date, last: date):
    """By resource, a `gpu` row counts under the GPU resources it held (gpu_holdings: nvidia_com_gpu,
    nvidia_com_mig_1g_10gb, ...); rows without holdings (days billed before they were kept) stay `gpu`."""
    held = gpu_holdings
    row_keys = ("day", "cluster", "namespace", "team", "gpu_model")
    has_holdings = exists().where(*(held.c[key] == chargeback.c[key] for key in row_keys))
    zero = literal(0.0)
    ledger = select(
        chargeback.c.resource.label("resource"),
        *(case((chargeback.c.resource == resource, chargeback.c.quantity), else_=zero).label(label)
          for resource, label in HOURS_COLUMNS.items()),
        zero.label("held_hours"), chargeback.c.cost, chargeback.c.currency,
    ).where(*_where(subject, first, last), or_(chargeback.c.resource != "gpu", not_(has_holdings)))
    holdings = select(
        held.c.resource, held.c.gpu_hours, zero.label("cpu_core_hours"), zero.label("memory_gib_hours"),
        held.c.held_hours, held.c.cost, held.c.currency,
    ).where(*_where(subject, first, last, held))
    parts = union_all(ledger, holdings).subquery()
    cost = money_sum(parts.c.cost)
    return (
        select(parts.c.resource.label("resource"), *(func.sum(parts.c[label]).label(label)
                                                      for label in [*HOURS_COLUMNS.values(), "held_hours"]),
               cost.label("cost"), parts.c.currency)
        .group_by(parts.c.resource, parts.c.currency)
        .order_by(cost.desc(), parts.c.resource)
    )


def _held(engine: Engine, subject: Subject, first: date, last: date) -> dict[str, list[dict]]:
    """Per namespace: the shared GPU resources it held, where one unit was not one physical GPU."""
    held = gpu_holdings
    query = (
        select(held.c.namespace, held.c.resource, func.sum(held.c.held_hours).label("held_hours"),
               func.sum(held.c.gpu_hours).label("gpu_hours"))
        .where(*_where(subject, first, last, held), held.c.held_hours != held.c.gpu_hours)
        .group_by(held.c.namespace, held.c.resource)
        .order_by(held.c.namespace, held.c.resource)
    )
    found: dict[str, list[dict]] = {}
    for row in fetch(engine, query):
        found.setdefault(row.pop("namespace"), []).append(row)
    return found


def breakdown(by: str | None, cost_labels: list[str]) -> str | None:
    """`by` checked: a GROUPINGS word, `workload`, or `label:NAME` of a configured cost label (else ReportError)."""
    if by is None or by in GROUPINGS or by == WORKLOAD:
        return by
    if by.startswith(LABEL_PREFIX):
        name = by.removeprefix(LABEL_PREFIX)
        if name in cost_labels:
            return by
        configured = f"names {', '.join(cost_labels)}" if cost_labels else "is empty"
        raise ReportError(f"cannot break down by label {name!r}: it is not in the config key cost_labels, "
                          f"which {configured}")
    raise ReportError(f"cannot group by {by!r}: give one of {', '.join(GROUPINGS)}, {WORKLOAD} or {LABEL_PREFIX}NAME")


def breakdown_column(by: str) -> str:
    """The row key of a breakdown below the namespace: `workload`, or `label_NAME` for `label:NAME`."""
    return WORKLOAD if by == WORKLOAD else "label_" + by.removeprefix(LABEL_PREFIX)


def _not_broken_down(subject: Subject, first: date, last: date):
    """The subject's ledger rows of the range that no workload row breaks down."""
    covered = exists().where(*(workload_costs.c[key] == chargeback.c[key] for key in ROW_KEY))
    return [*_where(subject, first, last), not_(covered)]


def _breakdown_query(subject: Subject, first: date, last: date, key: str):
    """Sums per namespace and `key` (workload, or labels: the cost label set) of the workload rows, and of
    the ledger rows no workload row breaks down as workload NOT_BROKEN_DOWN without a label set (NULL)."""
    work = workload_costs
    parts = union_all(
        select(work.c.namespace, work.c.workload, work.c.labels,
               *(hours.label(label) for label, hours in _hours(work).items()), work.c.cost, work.c.currency)
        .where(*_where(subject, first, last, work)),
        select(chargeback.c.namespace, literal(NOT_BROKEN_DOWN).label(WORKLOAD), literal(None, Text).label("labels"),
               *(hours.label(label) for label, hours in _hours(chargeback).items()), chargeback.c.cost,
               chargeback.c.currency)
        .where(*_not_broken_down(subject, first, last)),
    ).subquery()
    keys = [parts.c.namespace, parts.c[key]]
    cost = money_sum(parts.c.cost)
    return (
        select(*keys, *(func.sum(parts.c[label]).label(label) for label in HOURS_COLUMNS.values()),
               cost.label("cost"), parts.c.currency)
        .group_by(*keys, parts.c.currency)
        .order_by(cost.desc(), *keys)
    )


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
    day = chargeback.c.day
    days = {row["day"] for row in fetch(engine, select(day).where(*_not_broken_down(subject, first, last)).distinct())}
    if label is not None:
        sets = select(workload_costs.c.day, workload_costs.c.labels).where(
            *_where(subject, first, last, workload_costs)).distinct()
        days |= {row["day"] for row in fetch(engine, sets) if label not in json.loads(row["labels"])}
    return sorted(days)


def known_names(engine: Engine, kind: str) -> list[str]:
    """Every team (kind "team") or person ("person") the ledger has rows of, sorted."""
    column = _column(kind)
    return sorted(row["name"] for row in fetch(engine, select(column.label("name")).distinct()) if row["name"] is not None)


def _known(engine: Engine, subject: Subject) -> None:
    """Raise ReportError naming the closest names when the ledger never saw this team or person."""
    column = _column(subject.kind)
    if fetch(engine, select(literal(1).label("found")).where(column == subject.name).limit(1)):
        return
    closest = difflib.get_close_matches(subject.name or "", known_names(engine, subject.kind), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(closest)}" if closest else ""
    plain = f"no {subject.kind} named {subject.name!r} in the ledger"
    raise UnknownSubject(plain + hint, plain)


def _currency(rows: list[dict], subject: Subject, first: date, last: date, fallback: str) -> str:
    currencies = sorted({row.pop("currency") for row in rows})
    if len(currencies) > 1:
        raise ReportError(
            f"the ledger holds costs in {' and '.join(currencies)} for {subject.title} "
            f"between {first} and {last}; ask for a range with one currency"
        )
    return currencies[0] if currencies else fallback


def build_report(
    engine: Engine, subject: Subject, first: date, last: date, by: str | None, currency: str
) -> Report:
    """Ask the ledger; `currency` names the money of a report without rows; `by` as checked by `breakdown`."""
    if subject.kind != "all":
        _known(engine, subject)
    without_breakdown = None
    if by is not None and by not in GROUPINGS:
        rows, columns = _breakdown_rows(engine, subject, first, last, by)
        label = None if by == WORKLOAD else by.removeprefix(LABEL_PREFIX)
        without_breakdown = _days_without_breakdown(engine, subject, first, last, label)
    else:
        rows, columns = _ledger_rows(engine, subject, first, last, by)
    done = completed(engine, first, last)
    missing = [day for day in days_between(first, last) if day not in done]
    money = _currency(rows, subject, first, last, currency)
    people, leads = _who(engine, subject, rows)
    return Report(subject, first, last, money, by, columns, rows, missing, incomplete(engine, first, last),
                  people=people, leads=leads, without_breakdown=without_breakdown)


def _ledger_rows(engine: Engine, subject: Subject, first: date, last: date, by: str | None
                 ) -> tuple[list[dict], list[str]]:
    """Rows and columns of a report from the ledger's own columns: its rows, or grouped by a GROUPINGS word."""
    if by is None:
        query = _detail_query(subject, first, last)
    else:
        query = _resource_query(subject, first, last) if by == "resource" else _grouped_query(subject, first, last, by)
    rows = fetch(engine, query)
    columns = [name for name in query.selected_columns.keys() if name != "currency"]  # noqa: SIM118 (iterating gives columns)
    held = _held(engine, subject, first, last) if by == "namespace" else {}
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
        rows = fetch(engine, _breakdown_query(subject, first, last, WORKLOAD))
    else:
        rows = _by_label(fetch(engine, _breakdown_query(subject, first, last, "labels")),
                         by.removeprefix(LABEL_PREFIX), column)
    return rows, ["namespace", column, *SUMS]
