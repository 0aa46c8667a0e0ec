"""Ad hoc questions answered from the ledger: what did a team, or a person, spend?

`build_report` turns a question (whose spending, which days, grouped by what)
into a `Report`: plain rows summed by the database (GROUP BY, not a year of
rows loaded into memory), the total, and the days in the range that no run
completed. Missing days are listed, never counted as zero. Formatting the
report for a terminal, a spreadsheet or a browser is `billing.report_formats`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import date, datetime
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, Table, case, exists, func, literal, not_, or_, select, union_all

from billing.budgets import BudgetStatus
from billing.days import days_between, yesterday
from billing.directory import directory_from_json
from billing.ledger import chargeback, completed, fetch, gpu_holdings, incomplete, latest_directory
from billing.resources import CPU, GPU, IDLE, MEMORY, RESOURCES

# --by word -> ledger column
GROUPINGS = {
    "team": "team",
    "person": "owner",
    "namespace": "namespace",
    "cluster": "cluster",
    "resource": "resource",
    "gpu_model": "gpu_model",
    "day": "day",
}

DETAIL_COLUMNS = ["day", "cluster", "namespace", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost"]
LIST_COST = "list_cost"  # cost at list price, before priority-class discounts: in CSV and JSON only

# A group's cost apart: what its requested hours cost, and its share of capacity nobody requested
# (`idle: share`), so that cost ÷ hours is never read as a unit price; only in reports that have such a share
REQUESTED_COST, UNREQUESTED_SHARE = "requested_cost", "unrequested_share"

# resource-hours of a group, one column per resource
HOURS_COLUMNS = {GPU: "gpu_hours", CPU: "cpu_core_hours", MEMORY: "memory_gib_hours"}
# per namespace: the shared GPU resources held (MIG slices, time-sliced replicas), as
# [{"resource", "held_hours", "gpu_hours"}]; only in reports by namespace whose range has some
HELD_COLUMN = "gpu_held"


class ReportError(Exception):
    """The question cannot be answered as asked (an unknown team, mixed currencies)."""


class UnknownSubject(ReportError):
    """The ledger has no rows of the team or person asked about."""


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
    budget: BudgetStatus | None = None  # a team's month of `last` against its budget (billing/budgets.py)
    people: dict[str, str] = field(default_factory=dict)  # uid -> display name (cn) from the stored directory
    leads: tuple[str, ...] = ()  # a team report's team leads (uids), from the stored directory

    @property
    def total_cost(self) -> float:
        return sum((row["cost"] for row in self.rows), 0.0)


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
    order = [chargeback.c[name] for name in ("day", "cluster", "namespace", "team", "resource", "gpu_model")]
    return select(*columns, chargeback.c.currency).where(*_where(subject, first, last)).order_by(*order)


def _grouped_query(subject: Subject, first: date, last: date, by: str):
    key = chargeback.c[GROUPINGS[by]]
    hours = [
        func.sum(case((chargeback.c.resource == resource, chargeback.c.quantity), else_=0.0)).label(label)
        for resource, label in HOURS_COLUMNS.items()
    ]
    cost = func.sum(chargeback.c.cost)
    parts = [
        func.sum(case((chargeback.c.resource.in_(RESOURCES), chargeback.c.cost), else_=0.0)).label(REQUESTED_COST),
        func.sum(case((chargeback.c.resource.startswith(IDLE), chargeback.c.cost), else_=0.0)).label(UNREQUESTED_SHARE),
    ]
    order = [key] if by == "day" else [cost.desc(), key]
    return (
        select(key.label(by), *hours, *parts, cost.label("cost"), func.sum(chargeback.c.list_cost).label(LIST_COST),
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
    cost = func.sum(parts.c.cost)
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
    raise UnknownSubject(f"no {subject.kind} named {subject.name!r} in the ledger{hint}")


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
    """Ask the ledger; `currency` names the money of a report without rows."""
    if subject.kind != "all":
        _known(engine, subject)
    if by is None:
        query = _detail_query(subject, first, last)
    else:
        query = _resource_query(subject, first, last) if by == "resource" else _grouped_query(subject, first, last, by)
    rows = fetch(engine, query)
    done = completed(engine, first, last)
    missing = [day for day in days_between(first, last) if day not in done]
    money = _currency(rows, subject, first, last, currency)
    columns = [name for name in query.selected_columns.keys() if name != "currency"]  # noqa: SIM118 (iterating gives columns)
    held = _held(engine, subject, first, last) if by == "namespace" else {}
    if held:
        columns.insert(columns.index("gpu_hours") + 1, HELD_COLUMN)
        for row in rows:
            row[HELD_COLUMN] = held.get(row["namespace"], [])
    if UNREQUESTED_SHARE in columns and not any(row[UNREQUESTED_SHARE] for row in rows):
        columns = [c for c in columns if c not in (REQUESTED_COST, UNREQUESTED_SHARE)]  # nothing to tell apart
        rows = [{k: v for k, v in row.items() if k not in (REQUESTED_COST, UNREQUESTED_SHARE)} for row in rows]
    people, leads = _who(engine, subject, rows)
    return Report(subject, first, last, money, by, columns, rows, missing, incomplete(engine, first, last),
                  people=people, leads=leads)


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
