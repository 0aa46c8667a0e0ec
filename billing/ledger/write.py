"""Writing a billing day: one transaction replaces the day's rows in every ledger table.

A day is written in one transaction that deletes the day's previous rows,
inserts the new ones and records the day as completed, so a failed run
leaves the previous rows intact and never half a day. A re-run of a day of a
closed month leaves its rows and books the difference as corrections.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pandas as pd
from sqlalchemy import (
    Connection,
    Engine,
    Table,
    delete,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import SQLAlchemyError

from billing import frames
from billing.allocations import Allocation
from billing.charge.bill import DayBill
from billing.collect.invoices import Invoice, InvoiceError
from billing.config import HIGHEST_BUDGET
from billing.frames import LONGEST_NAME
from billing.ledger.allocations import replace_allocation_use
from billing.ledger.database import LedgerError, database_name, failure, transaction, writing
from billing.ledger.recovery import resplit
from billing.ledger.tables import (
    LEDGER_COLUMNS,
    NAME_COLUMNS,
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
    waste,
    workload_costs,
    workload_waste,
)
from billing.resources import RECOVERY

log = logging.getLogger(__name__)


INSERT_BATCH = 10_000  # rows per INSERT of a frame (ledger._insert)


# a re-run's change of a closed day below this is floating-point noise of summing in another order, not money
CORRECTION_NOISE = 1e-9


def _serialise_runs_of(conn: Connection, day: date) -> None:
    """Make a second run of the same day wait for the first, then replace its rows.

    SQLite allows one writer at a time anyway; PostgreSQL would otherwise let
    the second run's delete miss the first's new rows and fail on the key.
    """
    _advisory_lock(conn, day.toordinal())


def _serialise_corrections_of(conn: Connection, month: date) -> None:
    """Make corrections of one closed month wait for each other: each splits a recovered cluster's cost again over
    what the one before booked. Its key is no day's (negative), so that closing, which waits for the runs of the
    month's days, never waits in a circle with a correction."""
    _advisory_lock(conn, -month.toordinal())


def _advisory_lock(conn: Connection, key: int) -> None:
    """PostgreSQL: hold `key` until the transaction ends (SQLite has one writer at a time anyway)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def serialise_with_runs(conn: Connection, days: list[date]) -> None:
    """Wait for the runs of these days, and make new ones wait for this transaction (closing a month)."""
    for day in days:
        _serialise_runs_of(conn, day)


def replace_day(
    engine: Engine,
    day: date,
    bill: DayBill,
    currency: str,
    snapshot: str | None = None,
    directory_note: str = "",
    workloads_since: date | None = None,
    allocation_use: pd.DataFrame | None = None,
    allocations: Sequence[Allocation] = (),
) -> int:
    """Replace the day's rows in every ledger table with `bill`'s, in one transaction; return how many
    chargeback rows were written.

    `snapshot`, the directory the run read, replaces the stored one in the same
    transaction, so only a run that succeeded leaves one behind;
    `directory_note` records why a run used the last known directory instead;
    `workloads_since` (workloads.keep_days): workload rows of earlier days are
    deleted, and none are written for a day before it; `allocation_use`, the night's use of `allocations`
    (billing/charge/allocations.py), replaces the night's and draws them down again (billing/ledger/allocations.py).
    """
    rows, capacity, wasted, held = bill.rows, bill.capacity, bill.wasted, bill.held
    workloads, workload_wasted, coverage = bill.workloads, bill.workload_wasted, bill.coverage
    _refuse_long_names(engine, day, rows)
    computed_at = datetime.now(timezone.utc)
    records = rows.assign(day=day, currency=currency, computed_at=computed_at)[LEDGER_COLUMNS]
    values: list[dict[str, Any]] = records.astype(object).to_dict("records")  # type: ignore[assignment]  # pandas-stubs: keys are the column names
    for value in values:  # pandas writes a missing owner as NaN; the table wants NULL
        value["owner"] = value["owner"] if isinstance(value["owner"], str) else None
    try:
        with writing(engine) as conn:
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
                conn.execute(insert(cluster_days), [{"day": day, "cluster": c, "coverage": v,
                                                     "capacity_unknown": bill.capacity_unknown.get(c, "")}
                                                    for c, v in coverage.items()])
            conn.execute(delete(cluster_capacity).where(cluster_capacity.c.day == day))
            if len(capacity):
                _insert(conn, cluster_capacity, capacity[frames.CAPACITY.columns].assign(day=day))
            conn.execute(delete(cluster_storage).where(cluster_storage.c.day == day))
            if len(bill.storage):
                _insert(conn, cluster_storage, bill.storage[frames.STORAGE_CAPACITY.columns].assign(day=day))
            conn.execute(delete(energy).where(energy.c.day == day))
            if len(bill.energy):
                _insert(conn, energy, bill.energy[frames.CHARGED_ENERGY.columns].assign(day=day))
            conn.execute(delete(waste).where(waste.c.day == day))
            if len(wasted):
                _insert(conn, waste, wasted[frames.CHARGED_WASTE.columns].assign(day=day))
            conn.execute(delete(gpu_holdings).where(gpu_holdings.c.day == day))
            if len(held):
                _insert(conn, gpu_holdings, held[frames.HOLDINGS.columns].assign(day=day, currency=currency))
            conn.execute(delete(bound_pending).where(bound_pending.c.day == day))
            if len(bill.bound_pending):
                pending = bill.bound_pending[frames.BOUND_PENDING_COSTS.columns]
                _insert(conn, bound_pending, pending.assign(day=day, currency=currency, charged=pending["charged"].astype(int)))
            conn.execute(delete(kueue_unlent).where(kueue_unlent.c.day == day))
            if len(bill.unlent):
                _insert(conn, kueue_unlent, bill.unlent[frames.UNLENT.columns].assign(day=day, currency=currency))
            conn.execute(delete(workload_costs).where(workload_costs.c.day == day))
            kept = workloads_since is None or day >= workloads_since
            if workloads_since is not None:
                conn.execute(delete(workload_costs).where(workload_costs.c.day < workloads_since))
                conn.execute(delete(workload_waste).where(workload_waste.c.day < workloads_since))
            if kept and workloads is not None and len(workloads):
                _insert(conn, workload_costs, workloads[frames.WORKLOAD_COSTS.columns].assign(day=day, currency=currency))
            conn.execute(delete(workload_waste).where(workload_waste.c.day == day))
            if kept and workload_wasted is not None and len(workload_wasted):
                _insert(conn, workload_waste, workload_wasted[frames.CHARGED_WORKLOAD_WASTE.columns].assign(day=day))
            replace_allocation_use(conn, day, frames.ALLOCATION_USE.empty() if allocation_use is None
                                   else allocation_use, allocations, currency)
            if snapshot is not None:
                conn.execute(delete(directory_snapshots))
                conn.execute(insert(directory_snapshots).values(taken_at=computed_at, content=snapshot))
    except SQLAlchemyError as exc:
        raise LedgerError(f"{database_name(engine)}: writing {day} failed, previous rows kept: {failure(engine, exc)}") from None
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
    """A re-run of a closed month's day: book what it changes per (team, cluster, resource) as corrections, and on
    a cluster the month recovered, per team the cost recovery correction that splits the month's cost again over
    the corrected charges, so that the cluster's corrections add up to zero (billing.ledger.recovery).

    Called in the day's transaction before its old rows go, so the rows and the
    corrections are written together or not at all.
    """
    month = day.replace(day=1)
    if conn.execute(select(closed_months.c.month).where(closed_months.c.month == month)).first() is None:
        return
    _serialise_corrections_of(conn, month)
    key = [chargeback.c.team, chargeback.c.cluster, chargeback.c.resource]
    old = {tuple(row[:3]): row[3] for row in conn.execute(
        select(*key, func.sum(chargeback.c.cost)).where(chargeback.c.day == day).group_by(*key))}
    new: dict[tuple, float] = {}
    for row in new_rows:
        k = (row["team"], row["cluster"], row["resource"])
        new[k] = new.get(k, 0.0) + row["cost"]
    changes = {k: new.get(k, 0.0) - old.get(k, 0.0) for k in sorted(old.keys() | new.keys())}
    changes = {k: amount for k, amount in changes.items() if abs(amount) > CORRECTION_NOISE}
    new_costs: dict[tuple[str, str], float] = {}
    for (team, cluster, _), cost in new.items():
        new_costs[team, cluster] = new_costs.get((team, cluster), 0.0) + cost
    resplits = {(team, cluster, RECOVERY): amount for (team, cluster), amount in
                resplit(conn, day, new_costs, changes).items()}
    booked_in = first_open_month(conn, month)
    booked = [
        {"month": booked_in, "corrects": day, "team": team, "cluster": cluster, "resource": resource,
         "booked_at": booked_at, "amount": amount, "currency": currency}
        for (team, cluster, resource), amount in (changes | resplits).items()
    ]
    if booked:
        conn.execute(insert(corrections), booked)
    (log.warning if booked else log.info)("%s is in %s, a closed month: its statement stays; %d correction(s) totalling %.2f %s booked in %s",
                day, f"{month:%Y-%m}", len(booked), sum(c["amount"] for c in booked), currency,
                f"{booked_in:%Y-%m}")


def _insert(conn: Connection, table: Table, frame: pd.DataFrame) -> None:
    """A frame's rows into `table`, INSERT_BATCH at a time (a big day's workload rows as records all at once took
    120 MB more than the rest of the run at its peak), each batch handed to the database driver's executemany as
    the statement SQLAlchemy compiled for it: SQLAlchemy's own executemany processes every parameter of every row
    again, 0.30 s against the driver's 0.09 s for 26,524 bound Pending rows on SQLite (docs/performance.md).
    Column by column, the values get the conversions SQLAlchemy would give them (a day as SQLite stores it) and
    SQL NULL where pandas has NaN or None."""
    statement = insert(table).compile(dialect=conn.dialect, column_keys=list(frame.columns))
    names = list(statement.positiontup or []) if statement.positional else list(frame.columns)
    converts = [table.c[name].type.dialect_impl(conn.dialect).bind_processor(conn.dialect) for name in names]
    for start in range(0, len(frame), INSERT_BATCH):
        batch = frame.iloc[start:start + INSERT_BATCH]
        rows = zip(*(_bound(convert, batch[name]) for convert, name in zip(converts, names)))
        conn.exec_driver_sql(str(statement), list(rows) if statement.positional else [dict(zip(names, row)) for row in rows])


def _bound(convert: Callable[[Any], Any] | None, column: pd.Series) -> list:
    """A column's values as the driver takes them: None for NaN or None, the rest through `convert` where the
    column's type has one."""
    values = column.astype(object).tolist()
    if column.hasnans:
        values = [None if pd.isna(value) else value for value in values]
    return values if convert is None else [None if value is None else convert(value) for value in values]


def _refuse_long_names(engine: Engine, day: date, rows: pd.DataFrame) -> None:
    """The same clear error on SQLite and PostgreSQL for a name no Kubernetes object can have."""
    for column in NAME_COLUMNS:
        names = rows[column].dropna().astype(str)
        long = names[names.str.len() > LONGEST_NAME]
        if len(long):
            name = long.iloc[0]
            raise LedgerError(
                f"{database_name(engine)}: not writing {day}, previous rows kept: the {column} {name[:40]!r}… has "
                f"{len(name)} characters, more than the {LONGEST_NAME} of any Kubernetes name"
            )


def record_invoice(engine: Engine, month: date, cluster: str, invoice: Invoice, by: str, replace: bool = False,
                   add: bool = False) -> float | None:
    """Keep what the cluster cost in the month (table invoices, a row per file) and return it (the sum of the month's
    files): a month imported before only with
    `replace` (its files give way to this one) or `add` (a bill in several files: this one is added, unless a file
    of its name or content already was), and none for a closed month, whose statement already recovered the cost
    it had. None, nothing changed: this very file (name and content) is recorded already as the import asks (the
    month's one file, or one of its files with `add`), as a retry of an import that had committed finds it.

    Waits for a close of the month in progress, which holds its first day's lock (serialise_with_runs), and checks
    that the month is open only then, in the transaction that writes: an import cannot slip in after the close read
    the invoices. On SQLite the write lock is taken as the transaction begins, for the same reason.
    """
    row = {"month": month, "cluster": cluster, "billed_cost": float(invoice.billed_cost), "currency": invoice.currency,
           "file_name": invoice.file_name, "sha256": invoice.sha256, "rows_read": invoice.rows_read,
           "rows_matched": invoice.rows_matched, "imported_at": datetime.now(timezone.utc), "imported_by": by}
    with transaction(engine, f"recording the invoice of cluster {cluster} for {month:%Y-%m}", writes=True) as conn:
        serialise_with_runs(conn, [month])
        if conn.execute(select(closed_months.c.month).where(closed_months.c.month == month)).first():
            raise InvoiceError(f"{month:%Y-%m} is closed; reopen it (billing close --reopen) to import its invoice")
        key = (invoices.c.month == month, invoices.c.cluster == cluster)
        earlier = conn.execute(select(invoices).where(*key).order_by(invoices.c.imported_at)).all()
        imported = "; ".join(f"{file.file_name} (sha256 {file.sha256[:12]}…, {file.billed_cost:,.2f} {file.currency}) "
                             f"by {file.imported_by}" for file in earlier)
        this = [file for file in earlier if (file.file_name, file.sha256) == (invoice.file_name, invoice.sha256)]
        if this and (add or len(earlier) == 1):
            return None
        same = [file for file in earlier if invoice.sha256 == file.sha256 or invoice.file_name == file.file_name]
        if add and same:
            raise InvoiceError(f"the invoice of cluster {cluster} for {month:%Y-%m} already has {same[0].file_name} "
                               f"(sha256 {same[0].sha256[:12]}…); a file is added once (--replace replaces the "
                               "month's files by this one)")
        if earlier and not (replace or add):
            raise InvoiceError(f"the invoice of cluster {cluster} for {month:%Y-%m} was imported from {imported}; "
                               "--replace replaces it, --add adds this file to it")
        if replace:
            conn.execute(delete(invoices).where(*key))
        conn.execute(insert(invoices).values(**row))
        month_cost = math.fsum(conn.execute(select(invoices.c.billed_cost).where(*key)).scalars())
        if month_cost >= HIGHEST_BUDGET:
            raise InvoiceError(f"the invoice of cluster {cluster} for {month:%Y-%m} would be {month_cost:,.2f} "
                               f"{invoice.currency} with {invoice.file_name}, beyond the {HIGHEST_BUDGET:,.0f} a month "
                               "of a cluster can cost")
        return month_cost
