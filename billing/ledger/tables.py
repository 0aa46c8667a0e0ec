"""The ledger: the `chargeback` table of SPEC.md, the source of truth.

A day is written in one transaction that deletes the day's previous rows,
inserts the new ones and records the day as completed, so a failed run
leaves the previous rows intact and never half a day. Reports read from
here only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
from sqlalchemy import (
    Column,
    Connection,
    Date,
    DateTime,
    Double,
    Engine,
    Index,
    Integer,
    MetaData,
    Select,
    Table,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import SQLAlchemyError

from billing.frames import require_columns
from billing.ledger import migrate
from billing.private import create_private_file, private_directory

log = logging.getLogger(__name__)

metadata = MetaData()
INSERT_BATCH = 10_000  # rows per INSERT of a frame (ledger._insert)


def _charged() -> list[Column]:
    """Who a row is about: a day's namespace on a cluster, the team charged (SPEC rule 7), its person."""
    return [
        Column("day", Date, primary_key=True),
        Column("cluster", Text, primary_key=True),
        Column("namespace", Text, primary_key=True),
        Column("team", Text, primary_key=True),
        Column("owner", Text, nullable=True),
    ]


chargeback = Table(
    "chargeback",
    metadata,
    *_charged(),
    # cpu, memory, gpu; reserved-*, credit-*, idle-*: reserved pools and shared idle (billing/charge/pricing.py)
    Column("resource", Text, primary_key=True),
    Column("gpu_model", Text, primary_key=True),
    Column("quantity", Double, nullable=False),
    Column("unit_price", Double, nullable=False),
    Column("cost", Double, nullable=False),  # what the team pays: list_cost less priority-class discounts
    Column("currency", Text, nullable=False),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    Column("list_cost", Double, nullable=False),  # quantity x unit_price (revision 0002)
    Index("chargeback_team_day", "team", "day"),
    Index("chargeback_owner_day", "owner", "day"),
)

completed_days = Table(
    "completed_days",
    metadata,
    Column("day", Date, primary_key=True),
    Column("completed_at", DateTime(timezone=True), nullable=False),
    Column("rows", Integer, nullable=False),
    # '' when the run read the directory; else why it used the last known one (reports show it)
    Column("directory_note", Text, nullable=False, server_default=""),
)

directory_snapshots = Table(  # the directory of the last successful run, for `on_failure: last_known`
    "directory_snapshots",
    metadata,
    Column("taken_at", DateTime(timezone=True), primary_key=True),
    Column("content", Text, nullable=False),  # JSON, opaque to the ledger
)

cluster_days = Table(  # how complete each cluster's data of a day was (data gaps)
    "cluster_days",
    metadata,
    Column("day", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    # share of the day's instants at which kube-state-metrics data was there; below 1 the day is incomplete
    Column("coverage", Double, nullable=False),
)

cluster_capacity = Table(  # what each cluster's nodes offered, and what no request covered
    "cluster_capacity",
    metadata,
    Column("day", Date, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("resource", Text, primary_key=True),  # cpu, memory or gpu
    Column("gpu_model", Text, primary_key=True),
    Column("pool", Text, primary_key=True),  # the reserved pool of the nodes, '' for the rest
    Column("allocatable", Double, nullable=False),  # resource-hours the nodes offered
    Column("requested", Double, nullable=False),  # resource-hours requested by Running pods
    Column("idle", Double, nullable=False),  # allocatable - requested, not below 0
    Column("unit_price", Double, nullable=False),
    Column("idle_cost", Double, nullable=False),  # idle x unit_price
)

waste = Table(  # what pods held but did not use, per namespace and team like the costs (billing/collect/waste.py)
    "waste",
    metadata,
    *_charged(),
    Column("idle_gpu_hours", Double, nullable=True),  # GPUs held below the utilisation threshold; NULL: no DCGM
    Column("unused_cpu_core_hours", Double, nullable=True),  # requested but not used; NULL: no cAdvisor
)

gpu_holdings = Table(  # what each `gpu` row held: whole GPUs, MIG slices, time-sliced replicas (GPU sharing)
    "gpu_holdings",
    metadata,
    *_charged(),
    Column("resource", Text, primary_key=True),  # the GPU resource as kube-state-metrics names it
    Column("gpu_model", Text, primary_key=True),
    Column("held_hours", Double, nullable=False),  # hours of the resource's units (slice-hours, replica-hours)
    Column("gpu_hours", Double, nullable=False),  # the physical-GPU-hours the chargeback `gpu` row bills for them
    Column("cost", Double, nullable=False),  # their share of the chargeback row's cost
    Column("currency", Text, nullable=False),
)

# --- costs below the namespace: workloads and cost labels (SPEC "Workloads and experiment labels") ---
# Their rows add up exactly to `chargeback` per (day, cluster, namespace, team, resource, gpu_model)
# and to `waste` per (day, cluster, namespace, team). A cost label set is one JSON object, '{}' for none:
# which labels there are is configuration (`cost_labels`), not schema.

workload_costs = Table(
    "workload_costs",
    metadata,
    *_charged(),
    # Kind/name of the top-level controller; Pod/<name> for none; '(namespace)' for a part of a row no pod's
    # workload requested (reserved-*, credit-*, idle-* rows; a cluster whose workloads were not collected)
    Column("workload", Text, primary_key=True),
    # JSON object of every configured cost label as Kubernetes names it, json.dumps(..., sort_keys=True) with its
    # default separators: '{"example.com/project": "atlas", "experiment": ""}' ('' where a pod has none);
    # '{}' without cost_labels
    Column("labels", Text, primary_key=True),
    Column("resource", Text, primary_key=True),  # as in chargeback
    Column("gpu_model", Text, primary_key=True),
    Column("quantity", Double, nullable=False),
    Column("cost", Double, nullable=False),
    Column("list_cost", Double, nullable=False),
    Column("currency", Text, nullable=False),
    Index("workload_costs_team_day", "team", "day"),
    Index("workload_costs_owner_day", "owner", "day"),
)

workload_waste = Table(
    "workload_waste",
    metadata,
    *_charged(),
    Column("workload", Text, primary_key=True),
    Column("idle_gpu_hours", Double, nullable=True),
    Column("unused_cpu_core_hours", Double, nullable=True),
)

# --- budgets and monthly statements (billing/publish/budgets.py, billing/publish/statement.py) ---

budget_alerts = Table(  # each budget threshold a team's month crossed, so that its alert goes out once
    "budget_alerts",
    metadata,
    Column("month", Date, primary_key=True),  # first day of the month
    Column("team", Text, primary_key=True),
    Column("threshold", Double, primary_key=True),  # a share of the budget from budgets.alert_at
    Column("day", Date, nullable=False),  # the run that found it crossed
    Column("spent", Double, nullable=False),  # the month's cost then
    Column("budget", Double, nullable=False),
    Column("sent_at", DateTime(timezone=True), nullable=False),
)

closed_months = Table(  # months finance has closed: their statements are kept in statement_lines
    "closed_months",
    metadata,
    Column("month", Date, primary_key=True),
    Column("closed_at", DateTime(timezone=True), nullable=False),
    Column("closed_by", Text, nullable=False),
    Column("missing_days", Text, nullable=False),  # days never run when it was closed, comma-separated
)

month_closings = Table(  # the log of every close and reopen
    "month_closings",
    metadata,
    Column("month", Date, primary_key=True),
    Column("logged_at", DateTime(timezone=True), primary_key=True),
    Column("action", Text, nullable=False),  # close or reopen
    Column("who", Text, nullable=False),  # --by, else the operating-system user
)

statement_lines = Table(  # a closed month's statement as it was closed, line by line
    "statement_lines",
    metadata,
    Column("month", Date, primary_key=True),
    Column("line", Integer, primary_key=True, autoincrement=False),
    Column("team", Text, nullable=False),
    Column("cost_center", Text, nullable=False),
    Column("cluster", Text, nullable=False),
    Column("kind", Text, nullable=False),  # charge, discount, credit, idle, reserved, adjustment
    Column("resource", Text, nullable=False),
    Column("gpu_model", Text, nullable=False),
    Column("corrects", Date, nullable=True),  # the day an adjustment corrects
    Column("quantity", Double, nullable=True),
    Column("amount", Double, nullable=False),
    Column("currency", Text, nullable=False),
)

adjustments = Table(  # what a re-run of a closed month's day changed, booked in the first open month
    "adjustments",
    metadata,
    Column("month", Date, primary_key=True),  # first day of the month it is booked in
    Column("corrects", Date, primary_key=True),  # the re-run day
    Column("team", Text, primary_key=True),
    Column("cluster", Text, primary_key=True),
    Column("resource", Text, primary_key=True),
    Column("booked_at", DateTime(timezone=True), primary_key=True),
    Column("amount", Double, nullable=False),  # new cost less the cost it replaced
    Column("currency", Text, nullable=False),
)

LEDGER_COLUMNS = [c.name for c in chargeback.columns]
CAPACITY_COLUMNS = [c.name for c in cluster_capacity.columns if c.name != "day"]
WASTE_COLUMNS = [c.name for c in waste.columns if c.name != "day"]
HOLDING_COLUMNS = [c.name for c in gpu_holdings.columns if c.name not in ("day", "currency")]
WORKLOAD_COST_COLUMNS = [c.name for c in workload_costs.columns if c.name not in ("day", "currency")]
WORKLOAD_WASTE_COLUMNS = [c.name for c in workload_waste.columns if c.name != "day"]
NAME_COLUMNS = ["cluster", "namespace", "team", "owner", "gpu_model"]
# Kubernetes' longest names (DNS subdomains); far longer ones are not real names, and PostgreSQL
# could not index them anyway (a key entry must fit in a third of a page).
LONGEST_NAME = 253
# a re-run's change of a closed day below this is floating-point noise of summing in another order, not money
CORRECTION_NOISE = 1e-9


class LedgerError(Exception):
    """The database could not be reached or written; the message names it."""


class NoLedgerYet(LedgerError):
    """The database (an SQLite file) or its ledger tables do not exist yet; the first run creates them."""


def _where(engine: Engine) -> str:
    return f"database {engine.url.render_as_string(hide_password=True)}"


def _engine(url: str, create: bool = True) -> Engine:
    """Connections are checked before use: a database restarted while the job
    collected for an hour must not fail the write with a stale connection.
    Without `create` a missing SQLite file is NoLedgerYet instead of made."""
    try:
        engine = create_engine(url, pool_pre_ping=True)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise LedgerError(f"config key database: cannot use {url.split('@')[-1]!r} ({exc})") from None
    if engine.url.get_backend_name() == "sqlite":
        _real_sqlite_transactions(engine)
        if engine.url.database not in (None, "", ":memory:"):
            path = Path(engine.url.database)
            if not create and not path.exists():
                raise NoLedgerYet(f"{_where(engine)}: the file {path} does not exist yet (the first billing run creates it)")
            try:
                private_directory(path.parent)  # like output_dir, but the ledger holds names and emails
            except OSError as exc:
                raise LedgerError(f"{_where(engine)}: cannot create its directory ({exc.strerror})") from None
            try:
                create_private_file(path)
            except OSError as exc:
                raise LedgerError(f"{_where(engine)}: cannot create the file ({exc.strerror})") from None
    return engine


def _real_sqlite_transactions(engine: Engine) -> None:
    """Transactions on SQLite that hold DDL too, as they do on PostgreSQL.

    Python's sqlite3 (before 3.12's autocommit=False) begins a transaction only
    before INSERT/UPDATE/DELETE and runs every other statement, CREATE TABLE
    included, on its own: a schema change killed halfway stayed half made.
    SQLAlchemy's recipe for pysqlite: switch that off and emit BEGIN ourselves;
    a connection's `sqlite_begin` execution option can make it BEGIN EXCLUSIVE.
    """

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection, connection_record) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql(connection.get_execution_options().get(migrate.SQLITE_BEGIN, "BEGIN"))


def open_ledger(url: str, create: bool = True) -> Engine:
    """An engine on the ledger database at the schema this billing needs.

    A new, empty database gets the schema (without `create`, which `billing
    check` uses to change nothing, it is NoLedgerYet); one at an older schema
    revision is left alone with the advice to run `billing db upgrade`.
    """
    engine = _engine(url, create)
    try:
        with engine.connect() as conn:
            empty, current = migrate.is_empty(conn), migrate.current_revision(conn)
        if empty and not create:
            raise NoLedgerYet(f"{_where(engine)} holds no ledger tables yet (the first billing run creates them)")
        if empty:
            migrate.upgrade(engine)
        elif current != migrate.head_revision():
            raise LedgerError(
                f"{_where(engine)} has ledger schema revision {current or 'none'}, this billing needs "
                f"{migrate.head_revision()}: run `billing db upgrade` first"
            )
    except SQLAlchemyError as exc:
        raise LedgerError(f"{_where(engine)}: opening the ledger failed: {_cause(exc)}") from None
    return engine


def upgrade_schema(url: str) -> tuple[str | None, str]:
    """Apply pending migrations; (from, to) revisions."""
    engine = _engine(url)
    try:
        return migrate.upgrade(engine)
    except SQLAlchemyError as exc:
        raise LedgerError(f"{_where(engine)}: upgrading the schema failed, nothing changed: {_cause(exc)}") from None


def _cause(exc: SQLAlchemyError) -> str:
    cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    if cause == "database is locked":  # SQLite's busy timeout (5 s unless the URL says ?timeout=) ran out
        cause += " (another process held the database longer than the busy timeout; ?timeout=SECONDS on the URL waits longer)"
    return cause


def _serialise_runs_of(conn: Connection, day: date) -> None:
    """Make a second run of the same day wait for the first, then replace its rows.

    SQLite allows one writer at a time anyway; PostgreSQL would otherwise let
    the second run's delete miss the first's new rows and fail on the key.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": day.toordinal()})


def serialise_with_runs(conn: Connection, days: list[date]) -> None:
    """Wait for the runs of these days, and make new ones wait for this transaction (closing a month)."""
    for day in days:
        _serialise_runs_of(conn, day)


def replace_day(
    engine: Engine,
    day: date,
    rows: pd.DataFrame,
    currency: str,
    snapshot: str | None = None,
    directory_note: str = "",
    coverage: dict[str, float] | None = None,
    capacity: pd.DataFrame | None = None,
    wasted: pd.DataFrame | None = None,
    held: pd.DataFrame | None = None,
    workloads: pd.DataFrame | None = None,
    workload_wasted: pd.DataFrame | None = None,
    workloads_since: date | None = None,
) -> int:
    """Replace the day's rows in one transaction; return how many were written.

    `snapshot`, the directory the run read, replaces the stored one in the same
    transaction, so only a run that succeeded leaves one behind;
    `directory_note` records why a run used the last known directory instead;
    `coverage` is each cluster's share of the day with kube-state-metrics data;
    `capacity` (CAPACITY_COLUMNS) each cluster's allocatable, requested and idle resource-hours;
    `wasted` (WASTE_COLUMNS) what each namespace's teams held but did not use;
    `held` (HOLDING_COLUMNS) which GPU resources the `gpu` rows held;
    `workloads` (WORKLOAD_COST_COLUMNS) and `workload_wasted` (WORKLOAD_WASTE_COLUMNS) the same costs
    and waste below the namespace; `workloads_since` (workloads.keep_days): workload rows of earlier
    days are deleted, and none are written for a day before it.
    """
    require_columns(rows, [c for c in LEDGER_COLUMNS if c not in ("day", "currency", "computed_at")], f"rows of {day}")
    _refuse_long_names(engine, day, rows)
    computed_at = datetime.now(timezone.utc)
    records = rows.assign(day=day, currency=currency, computed_at=computed_at)[LEDGER_COLUMNS]
    values = records.astype(object).to_dict("records")
    for value in values:  # pandas writes a missing owner as NaN; the table wants NULL
        value["owner"] = value["owner"] if isinstance(value["owner"], str) else None
    try:
        with engine.begin() as conn:
            _serialise_runs_of(conn, day)
            _book_corrections(conn, day, values, currency, computed_at)
            conn.execute(delete(chargeback).where(chargeback.c.day == day))
            if values:
                conn.execute(insert(chargeback), values)
            conn.execute(delete(completed_days).where(completed_days.c.day == day))
            conn.execute(
                insert(completed_days).values(
                    day=day, completed_at=computed_at, rows=len(values), directory_note=directory_note
                )
            )
            conn.execute(delete(cluster_days).where(cluster_days.c.day == day))
            if coverage:
                conn.execute(insert(cluster_days), [{"day": day, "cluster": c, "coverage": v} for c, v in coverage.items()])
            conn.execute(delete(cluster_capacity).where(cluster_capacity.c.day == day))
            if capacity is not None and len(capacity):
                conn.execute(insert(cluster_capacity), capacity[CAPACITY_COLUMNS].assign(day=day).to_dict("records"))
            conn.execute(delete(waste).where(waste.c.day == day))
            if wasted is not None and len(wasted):
                _insert(conn, waste, wasted[WASTE_COLUMNS].assign(day=day))
            conn.execute(delete(gpu_holdings).where(gpu_holdings.c.day == day))
            if held is not None and len(held):
                _insert(conn, gpu_holdings, held[HOLDING_COLUMNS].assign(day=day, currency=currency))
            conn.execute(delete(workload_costs).where(workload_costs.c.day == day))
            kept = workloads_since is None or day >= workloads_since
            if workloads_since is not None:
                conn.execute(delete(workload_costs).where(workload_costs.c.day < workloads_since))
                conn.execute(delete(workload_waste).where(workload_waste.c.day < workloads_since))
            if kept and workloads is not None and len(workloads):
                _insert(conn, workload_costs, workloads[WORKLOAD_COST_COLUMNS].assign(day=day, currency=currency))
            conn.execute(delete(workload_waste).where(workload_waste.c.day == day))
            if kept and workload_wasted is not None and len(workload_wasted):
                _insert(conn, workload_waste, workload_wasted[WORKLOAD_WASTE_COLUMNS].assign(day=day))
            if snapshot is not None:
                conn.execute(delete(directory_snapshots))
                conn.execute(insert(directory_snapshots).values(taken_at=computed_at, content=snapshot))
    except SQLAlchemyError as exc:
        raise LedgerError(f"{_where(engine)}: writing {day} failed, previous rows kept: {_cause(exc)}") from None
    return len(values)


def month_after(month: date) -> date:
    """The first day of the next month."""
    return (month.replace(day=1) + timedelta(days=32)).replace(day=1)


def first_open_month(conn: Connection, after: date) -> date:
    """The first month after `after`'s that is not closed: where corrections of a closed month are booked."""
    closed = {row.month for row in conn.execute(select(closed_months.c.month).where(closed_months.c.month > after))}
    month = month_after(after)
    while month in closed:
        month = month_after(month)
    return month


def _book_corrections(conn: Connection, day: date, new_rows: list[dict], currency: str, booked_at: datetime) -> None:
    """A re-run of a closed month's day: book what it changes per (team, cluster, resource) as adjustments.

    Called in the day's transaction before its old rows go, so the rows and the
    adjustments are written together or not at all.
    """
    month = day.replace(day=1)
    if conn.execute(select(closed_months.c.month).where(closed_months.c.month == month)).first() is None:
        return
    key = [chargeback.c.team, chargeback.c.cluster, chargeback.c.resource]
    old = {tuple(row[:3]): row[3] for row in conn.execute(
        select(*key, func.sum(chargeback.c.cost)).where(chargeback.c.day == day).group_by(*key))}
    new: dict[tuple, float] = {}
    for row in new_rows:
        k = (row["team"], row["cluster"], row["resource"])
        new[k] = new.get(k, 0.0) + row["cost"]
    booked_in = first_open_month(conn, month)
    corrections = [
        {"month": booked_in, "corrects": day, "team": team, "cluster": cluster, "resource": resource,
         "booked_at": booked_at, "amount": new.get(k, 0.0) - old.get(k, 0.0), "currency": currency}
        for k in sorted(old.keys() | new.keys()) for team, cluster, resource in [k]
    ]
    corrections = [c for c in corrections if abs(c["amount"]) > CORRECTION_NOISE]
    if corrections:
        conn.execute(insert(adjustments), corrections)
    (log.warning if corrections else log.info)("%s is in %s, a closed month: its statement stays; %d adjustment(s) totalling %.2f %s booked in %s",
                day, f"{month:%Y-%m}", len(corrections), sum(c["amount"] for c in corrections), currency,
                f"{booked_in:%Y-%m}")


@contextmanager
def transaction(engine: Engine, what: str) -> Iterator[Connection]:
    """One transaction; a database failure becomes a LedgerError naming the database and `what`, nothing kept."""
    try:
        with engine.begin() as conn:
            yield conn
    except SQLAlchemyError as exc:
        raise LedgerError(f"{_where(engine)}: {what} failed, nothing changed: {_cause(exc)}") from None


def _insert(conn: Connection, table: Table, frame: pd.DataFrame) -> None:
    """A frame's rows into `table`, INSERT_BATCH at a time: a big day's workload rows as records all at once
    took 120 MB more than the rest of the run at its peak."""
    for start in range(0, len(frame), INSERT_BATCH):
        conn.execute(insert(table), _nulls(frame.iloc[start:start + INSERT_BATCH]))


def _nulls(frame: pd.DataFrame) -> list[dict]:
    """Records with SQL NULL where pandas has NaN or None."""
    values = frame.astype(object)
    values, columns = values.where(values.notna(), None), list(frame.columns)
    return [dict(zip(columns, row)) for row in values.itertuples(index=False, name=None)]  # twice as fast as to_dict


def _refuse_long_names(engine: Engine, day: date, rows: pd.DataFrame) -> None:
    """The same clear error on SQLite and PostgreSQL for a name no Kubernetes object can have."""
    for column in NAME_COLUMNS:
        names = rows[column].dropna().astype(str)
        long = names[names.str.len() > LONGEST_NAME]
        if len(long):
            name = long.iloc[0]
            raise LedgerError(
                f"{_where(engine)}: not writing {day}, previous rows kept: the {column} {name[:40]!r}… has "
                f"{len(name)} characters, more than the {LONGEST_NAME} of any Kubernetes name"
            )


def _fetch(engine: Engine, query, what: str) -> list:
    """All rows of a query; a failure is one sentence naming the database and what was read."""
    try:
        with engine.connect() as conn:
            return list(conn.execute(query).all())
    except SQLAlchemyError as exc:
        raise LedgerError(f"{_where(engine)}: reading {what} failed: {_cause(exc)}") from None


def _frame(engine: Engine, query, what: str, columns: list[str]) -> pd.DataFrame:
    """All rows of a query as a DataFrame (from plain tuples: pandas probes SQLAlchemy rows key by key, ten times
    slower on a big day's workload rows)."""
    return pd.DataFrame([tuple(row) for row in _fetch(engine, query, what)], columns=columns)


def read_rows(engine: Engine, first: date, last: date, team: str | None = None) -> pd.DataFrame:
    """Ledger rows of a date range (inclusive), optionally of one team."""
    query = select(chargeback).where(chargeback.c.day.between(first, last))
    if team is not None:
        query = query.where(chargeback.c.team == team)
    frame = _frame(engine, query, "the ledger", LEDGER_COLUMNS)
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    return frame


def daily_costs(engine: Engine, first: date, last: date, team: str | None = None, owner: str | None = None
                ) -> pd.DataFrame:
    """day, currency, cost and list_cost summed per day by the database, optionally of one team or person."""
    query = select(chargeback.c.day, chargeback.c.currency, func.sum(chargeback.c.cost).label("cost"),
                   func.sum(chargeback.c.list_cost).label("list_cost")).where(chargeback.c.day.between(first, last))
    if team is not None:
        query = query.where(chargeback.c.team == team)
    if owner is not None:
        query = query.where(chargeback.c.owner == owner)
    frame = _frame(engine, query.group_by(chargeback.c.day, chargeback.c.currency), "daily costs",
                   ["day", "currency", "cost", "list_cost"])
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    return frame.astype({"cost": float, "list_cost": float})


def fetch(engine: Engine, query: Select) -> list[dict]:
    """The rows of a read-only query as dicts (column label -> value), for report queries."""
    return [dict(row._mapping) for row in _fetch(engine, query, "the ledger")]


def completed(engine: Engine, first: date, last: date) -> set[date]:
    """The days in the range that a run completed."""
    query = select(completed_days.c.day).where(completed_days.c.day.between(first, last))
    return {row.day for row in _fetch(engine, query, "completed days")}


def incomplete(engine: Engine, first: date, last: date) -> list[tuple[date, str, float]]:
    """(day, cluster, coverage) of every cluster-day in the range with gaps in its data."""
    query = (
        select(cluster_days)
        .where(cluster_days.c.day.between(first, last), cluster_days.c.coverage < 1)
        .order_by(cluster_days.c.day, cluster_days.c.cluster)
    )
    return [(row.day, row.cluster, row.coverage) for row in _fetch(engine, query, "data coverage")]


def read_capacity(engine: Engine, day: date) -> pd.DataFrame:
    """Each cluster's capacity of a day (CAPACITY_COLUMNS); no rows for a day run before capacity was kept."""
    query = select(cluster_capacity).where(cluster_capacity.c.day == day).order_by(
        cluster_capacity.c.cluster, cluster_capacity.c.pool, cluster_capacity.c.resource, cluster_capacity.c.gpu_model)
    return _frame(engine, query, "cluster capacity", ["day", *CAPACITY_COLUMNS])[CAPACITY_COLUMNS]


def read_waste(engine: Engine, day: date) -> pd.DataFrame:
    """What each namespace's teams held but did not use on a day (WASTE_COLUMNS)."""
    query = select(waste).where(waste.c.day == day).order_by(waste.c.team, waste.c.owner, waste.c.namespace)
    rows = _frame(engine, query, "waste", ["day", *WASTE_COLUMNS])[WASTE_COLUMNS]
    return rows.astype({"idle_gpu_hours": float, "unused_cpu_core_hours": float})


def read_holdings(engine: Engine, day: date) -> pd.DataFrame:
    """What the day's `gpu` rows held per GPU resource (HOLDING_COLUMNS); none for days billed before 0003."""
    query = select(gpu_holdings).where(gpu_holdings.c.day == day)
    columns = [c.name for c in gpu_holdings.columns]
    return _frame(engine, query, "GPU holdings", columns)[HOLDING_COLUMNS]


def read_workload_costs(engine: Engine, first: date, last: date, team: str | None = None,
                        owner: str | None = None) -> pd.DataFrame:
    """Costs per workload and cost labels of a date range (day and WORKLOAD_COST_COLUMNS, currency),
    optionally of one team or person; no rows for days billed before 0005 or with workloads off."""
    query = select(workload_costs).where(workload_costs.c.day.between(first, last))
    if team is not None:
        query = query.where(workload_costs.c.team == team)
    if owner is not None:
        query = query.where(workload_costs.c.owner == owner)
    columns = [c.name for c in workload_costs.columns]
    frame = _frame(engine, query, "workload costs", columns)
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    return frame


WORKLOAD_TOTAL_KEYS = ["day", "cluster", "namespace", "team", "owner", "workload"]


def read_workload_totals(engine: Engine, first: date, last: date) -> pd.DataFrame:
    """Cost per WORKLOAD_TOTAL_KEYS of a date range, over resources and cost labels: what the pages rank
    workloads by, summed in the database (a big day has a few times fewer workloads than workload rows)."""
    keys = [workload_costs.c[key] for key in WORKLOAD_TOTAL_KEYS]
    query = (select(*keys, func.sum(workload_costs.c.cost)).where(workload_costs.c.day.between(first, last))
             .group_by(*keys))
    frame = _frame(engine, query, "workload costs", [*WORKLOAD_TOTAL_KEYS, "cost"])
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    return frame


def waste_sums(engine: Engine, first: date, last: date, by: str, team: str | None = None,
               owner: str | None = None) -> pd.DataFrame:
    """Idle GPU-hours and unused CPU core-hours of a date range summed per `by` (namespace, owner or team)
    by the database, optionally of one team or person; NULL (NaN) where no day of the group measured it."""
    measures = [func.sum(waste.c[m]).label(m) for m in ("idle_gpu_hours", "unused_cpu_core_hours")]
    query = select(waste.c[by], *measures).where(waste.c.day.between(first, last))
    if team is not None:
        query = query.where(waste.c.team == team)
    if owner is not None:
        query = query.where(waste.c.owner == owner)
    rows = _fetch(engine, query.group_by(waste.c[by]).order_by(waste.c[by]), "waste")
    return pd.DataFrame(rows, columns=[by, "idle_gpu_hours", "unused_cpu_core_hours"]).astype(
        {"idle_gpu_hours": float, "unused_cpu_core_hours": float})


def latest_directory(engine: Engine) -> tuple[datetime, str] | None:
    """(taken_at in UTC, content) of the stored directory snapshot, if any run left one."""
    query = select(directory_snapshots).order_by(directory_snapshots.c.taken_at.desc()).limit(1)
    rows = _fetch(engine, query, "the stored directory")
    if not rows:
        return None
    taken_at = rows[0].taken_at  # SQLite hands it back naive (it stored UTC); PostgreSQL in the session's zone
    taken_at = taken_at.replace(tzinfo=timezone.utc) if taken_at.tzinfo is None else taken_at.astimezone(timezone.utc)
    return taken_at, rows[0].content


def directory_note(engine: Engine, day: date) -> str:
    """Why the day's run used the last known directory; '' if it read the live one (or never ran)."""
    query = select(completed_days.c.directory_note).where(completed_days.c.day == day)
    rows = _fetch(engine, query, f"the run of {day}")
    return rows[0].directory_note if rows else ""
