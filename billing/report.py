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

from sqlalchemy import Engine, case, func, literal, select

from billing.days import days_between, yesterday
from billing.ledger import chargeback, completed, fetch, incomplete

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

# resource-hours of a group, one column per resource
HOURS_COLUMNS = {"gpu": "gpu_hours", "cpu": "cpu_core_hours", "memory": "memory_gib_hours"}


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


def _column(kind: str):
    return chargeback.c.team if kind == "team" else chargeback.c.owner


def _where(subject: Subject, first: date, last: date) -> list:
    conditions = [chargeback.c.day.between(first, last)]
    if subject.kind != "all":
        conditions.append(_column(subject.kind) == subject.name)
    return conditions


def _detail_query(subject: Subject, first: date, last: date):
    columns = [chargeback.c[name] for name in DETAIL_COLUMNS]
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
    order = [key] if by == "day" else [cost.desc(), key]
    return (
        select(key.label(by), *hours, cost.label("cost"), chargeback.c.currency)
        .where(*_where(subject, first, last))
        .group_by(key, chargeback.c.currency)
        .order_by(*order)
    )


def known_names(engine: Engine, kind: str) -> list[str]:
    """Every team (kind "team") or person ("person") the ledger has rows of, sorted."""
    column = _column(kind)
    return sorted(row["name"] for row in fetch(engine, select(column.label("name")).distinct()) if row["name"] is not None)


def _known(engine: Engine, subject: Subject) -> None:
    """Raise ReportError naming the closest names when the ledger never saw this team or person."""
    column = _column(subject.kind)
    if fetch(engine, select(literal(1).label("found")).where(column == subject.name).limit(1)):
        return
    closest = difflib.get_close_matches(subject.name, known_names(engine, subject.kind), n=3, cutoff=0.5)
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
    query = _detail_query(subject, first, last) if by is None else _grouped_query(subject, first, last, by)
    rows = fetch(engine, query)
    done = completed(engine, first, last)
    missing = [day for day in days_between(first, last) if day not in done]
    money = _currency(rows, subject, first, last, currency)
    columns = [name for name in query.selected_columns.keys() if name != "currency"]
    return Report(subject, first, last, money, by, columns, rows, missing, incomplete(engine, first, last))
