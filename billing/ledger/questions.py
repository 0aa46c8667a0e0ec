"""`billing report`'s questions as SQL: the ledger's rows of a team, a person or every team, summed by the database.

billing/publish/report.py asks these and shapes the answer (currencies, names, label breakdowns); the GROUP BY
runs here, so a year of rows is never loaded into memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from sqlalchemy import Engine, Select, Table, Text, case, exists, func, literal, not_, or_, select, union_all

from billing.ledger.database import fetch
from billing.ledger.read import money_sum
from billing.ledger.tables import bound_pending, chargeback, gpu_holdings, workload_costs
from billing.resources import GPU, RESOURCES, UNREQUESTED, per_resource

# the workload (or label value) of ledger rows that no workload row breaks down; no Kubernetes name looks like it
NOT_BROKEN_DOWN = "(not broken down)"
ROW_KEY = ("day", "cluster", "namespace", "team", "resource", "gpu_model")  # a chargeback row's primary key

DETAIL_COLUMNS = ["day", "cluster", "namespace", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost"]
LIST_COST = "list_cost"  # cost at list price, before priority-class discounts: in CSV and JSON only

# A group's cost apart: what its requested hours cost, and its share of capacity nobody requested
# (`unrequested: share`), so that cost ÷ hours is never read as a unit price; only in reports that have such a share
REQUESTED_COST, UNREQUESTED_SHARE = "requested_cost", "unrequested_share"

# resource-hours of a group, one column per resource
HOURS_COLUMNS = per_resource("hours_column")


@dataclass(frozen=True)
class Subject:
    """Whose spending: one team (`kind="team"`), one person (`"person"`), or every team (`"all"`)."""

    kind: str
    name: str | None = None

    @property
    def title(self) -> str:
        return {"team": f"team {self.name}", "person": f"person {self.name}", "all": "all teams"}[self.kind]


def _column(kind: str, table: Table = chargeback):
    return table.c.team if kind == "team" else table.c.owner


def _where(subject: Subject, first: date, last: date, table: Table = chargeback) -> list:
    conditions = [table.c.day.between(first, last)]
    if subject.kind != "all":
        conditions.append(_column(subject.kind, table) == subject.name)
    return conditions


def _detail_query(subject: Subject, first: date, last: date) -> Select:
    columns = [chargeback.c[name] for name in [*DETAIL_COLUMNS, LIST_COST]]
    if subject.kind != "team":
        columns.insert(1, chargeback.c.team)
    order = [chargeback.c[name] for name in ROW_KEY]
    return select(*columns, chargeback.c.currency).where(*_where(subject, first, last)).order_by(*order)


def _hours(table: Table) -> dict:
    """HOURS_COLUMNS label -> a row's quantity if it is of that resource, else 0."""
    return {label: case((table.c.resource == resource, table.c.quantity), else_=0.0)
            for resource, label in HOURS_COLUMNS.items()}


def _grouped_query(subject: Subject, first: date, last: date, by: str, column: str) -> Select:
    key = chargeback.c[column]
    hours = [func.sum(hours).label(label) for label, hours in _hours(chargeback).items()]
    cost = money_sum(chargeback.c.cost)
    parts = [
        money_sum(case((chargeback.c.resource.in_(list(RESOURCES)), chargeback.c.cost), else_=0.0)).label(REQUESTED_COST),
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


def _resource_query(subject: Subject, first: date, last: date) -> Select:
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
    ).where(*_where(subject, first, last), or_(chargeback.c.resource != GPU, not_(has_holdings)))
    holdings = select(
        held.c.resource, *(held.c.gpu_hours if resource == GPU else zero.label(label)
                           for resource, label in HOURS_COLUMNS.items()),
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


def ledger_rows(engine: Engine, subject: Subject, first: date, last: date, by: str | None = None,
                column: str | None = None) -> tuple[list[dict], list[str]]:
    """Rows and their columns (currency apart) from the ledger's own columns: its rows ordered by ROW_KEY, or
    grouped under the label `by` by the ledger `column` (by "resource": the GPU resources held apart)."""
    if by is None or column is None:
        query = _detail_query(subject, first, last)
    else:
        query = _resource_query(subject, first, last) if by == "resource" else _grouped_query(
            subject, first, last, by, column)
    columns = [name for name in query.selected_columns.keys() if name != "currency"]  # noqa: SIM118 (iterating gives columns)
    return fetch(engine, query), columns


def quantities(engine: Engine, subject: Subject, first: date, last: date, column: str) -> list[dict]:
    """The subject's resource-hours per ledger `column` (a report's grouping, as `key`), day, cluster, resource and GPU
    model: what service units are weighed from (billing/charge/service_units.py)."""
    keys = [chargeback.c[column].label("key"), *(chargeback.c[name] for name in ("day", "cluster", "resource", "gpu_model"))]
    query = (select(*keys, func.sum(chargeback.c.quantity).label("quantity"))
             .where(*_where(subject, first, last)).group_by(*keys))
    return fetch(engine, query)


def held_by_namespace(engine: Engine, subject: Subject, first: date, last: date) -> dict[str, list[dict]]:
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


def held_before_running(engine: Engine, subject: Subject, first: date, last: date, per_workload: bool = False
                        ) -> list[dict]:
    """What the subject's pods bound to a node held before they ran (docs/spec.md "Rule 2: running"), per resource,
    currency (amounts of two never add) and reason (and `per_workload`, per workload first: '' where workloads were
    off), with its cost and whether any of it was charged; none for days billed before revision 0013."""
    held = bound_pending
    keys = [*([held.c.workload] if per_workload else []), held.c.resource, held.c.currency, held.c.reason]
    query = (
        select(*keys, func.sum(held.c.quantity).label("quantity"),
               money_sum(held.c.cost).label("cost"), func.max(held.c.charged).label("charged"))
        .where(*_where(subject, first, last, held))
        .group_by(*keys)
        .order_by(*keys)
    )
    return fetch(engine, query)


def _not_broken_down(subject: Subject, first: date, last: date) -> list:
    """The subject's ledger rows of the range that no workload row breaks down."""
    covered = exists().where(*(workload_costs.c[key] == chargeback.c[key] for key in ROW_KEY))
    return [*_where(subject, first, last), not_(covered)]


def workload_rows(engine: Engine, subject: Subject, first: date, last: date, key: str) -> list[dict]:
    """Sums per namespace and `key` (workload, or labels: the cost label set as JSON) of the workload rows, and of
    the ledger rows no workload row breaks down as workload NOT_BROKEN_DOWN without a label set (None)."""
    work = workload_costs
    parts = union_all(
        select(work.c.namespace, work.c.workload, work.c.labels,
               *(hours.label(label) for label, hours in _hours(work).items()), work.c.cost, work.c.currency)
        .where(*_where(subject, first, last, work)),
        select(chargeback.c.namespace, literal(NOT_BROKEN_DOWN).label(work.c.workload.name), literal(None, Text).label("labels"),
               *(hours.label(label) for label, hours in _hours(chargeback).items()), chargeback.c.cost,
               chargeback.c.currency)
        .where(*_not_broken_down(subject, first, last)),
    ).subquery()
    keys = [parts.c.namespace, parts.c[key]]
    cost = money_sum(parts.c.cost)
    return fetch(engine, (
        select(*keys, *(func.sum(parts.c[label]).label(label) for label in HOURS_COLUMNS.values()),
               cost.label("cost"), parts.c.currency)
        .group_by(*keys, parts.c.currency)
        .order_by(cost.desc(), *keys)
    ))


def days_not_broken_down(engine: Engine, subject: Subject, first: date, last: date) -> set[date]:
    """Days with ledger rows of the subject that no workload row breaks down."""
    query = select(chargeback.c.day).where(*_not_broken_down(subject, first, last)).distinct()
    return {row["day"] for row in fetch(engine, query)}


def label_sets(engine: Engine, subject: Subject, first: date, last: date) -> list[tuple[date, str]]:
    """(day, cost label set as JSON) of each distinct label set of the subject's workload rows."""
    query = select(workload_costs.c.day, workload_costs.c.labels).where(
        *_where(subject, first, last, workload_costs)).distinct()
    return [(row["day"], row["labels"]) for row in fetch(engine, query)]


def known_names(engine: Engine, kind: str) -> list[str]:
    """Every team (kind "team") or person ("person") the ledger has rows of, sorted."""
    column = _column(kind)
    return sorted(row["name"] for row in fetch(engine, select(column.label("name")).distinct()) if row["name"] is not None)


def has_rows(engine: Engine, subject: Subject) -> bool:
    """Whether the ledger has any row of the team or person, on any day."""
    query = select(literal(1).label("found")).where(_column(subject.kind) == subject.name).limit(1)
    return bool(fetch(engine, query))
