"""Monthly statements per team, and closing a month so that its statement never changes.

A statement has, per team (with its cost centre) and cluster, one line per
resource and GPU model at list price, the discount of pod priority classes
as a line of its own, reserved pools, credits for others' use of a pool,
shares of unrequested capacity, and corrections: what re-runs of days of an earlier,
closed month changed, each naming the day it corrects. A team's lines add up
to its ledger cost of the month's days plus the corrections booked in it.

`billing close` stores a month's lines as they are (table statement_lines),
so the statement of a closed month is read back, never recomputed, and is the
same byte for byte however its days are re-run later. A re-run of a closed
month's day books its change in the first open month (billing/ledger/tables.py);
on a cluster the month recovered, as moves between its teams that add up to
zero (billing/ledger/recovery.py).
Reopening deletes the stored lines and the corrections of the month
(its statement shows the current ledger again); only the latest closed month
can be reopened, so no correction in a closed statement is ever taken back.
"""

from __future__ import annotations

import difflib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine

from billing.allocations import Allocation
from billing.charge.service_units import service_units
from billing.config import ClusterConfig, CostRecovery, CreditsConfig
from billing.days import days_between, days_in_month
from billing.directory.people import Directory
from billing.errors import UsageError
from billing.ledger.allocations import allocation_draws_between
from billing.ledger.database import transaction
from billing.ledger.months import (
    booked_corrections,
    closing_of,
    completed_between,
    delete_closing,
    invoiced,
    latest_closed_after,
    log_month,
    month_rows,
    store_closing,
    stored_lines,
)
from billing.ledger.recovery import shares
from billing.ledger.write import CORRECTION_NOISE, serialise_with_runs
from billing.money import cents, money_sums, one_currency, total
from billing.publish.allocations import AllocationStatus, allocation_lines, statuses
from billing.publish.credits import credits_of
from billing.resources import ALLOCATION_DRAWN, MONTHLY_CREDIT, OVERAGE_NOT_CHARGED, RECOVERY, SUBSIDY

log = logging.getLogger(__name__)

# the order of a cluster's lines, by the ledger resource's prefix
# (a Kueue quota is reserved capacity, and what was lent of it a credit: docs/spec.md "Kueue quotas")
KINDS = {"": "charge", "reserved": "reserved", "credit": "credit", "unrequested": "unrequested", "quota": "reserved",
         "lent": "credit"}
CORRECTION = "correction"  # what a re-run of a closed month's day changed, booked in a later month
CREDITED = "credited"  # a cluster's subsidies and monthly credits together, in its summary
KIND_ORDER = ["charge", "discount", "reserved", "credit", "unrequested", RECOVERY, ALLOCATION_DRAWN, OVERAGE_NOT_CHARGED,
              SUBSIDY, MONTHLY_CREDIT, CORRECTION]
PREPAID = (ALLOCATION_DRAWN, OVERAGE_NOT_CHARGED)  # lines of allocations: their model names the account
LINE_COLUMNS = ["team", "cost_center", "cluster", "kind", "resource", "gpu_model", "corrects", "quantity", "amount",
                "service_units"]


class StatementError(UsageError):
    """The statement or the closing cannot be done as asked; the message says why (a usage error)."""


@dataclass(frozen=True)
class StatementLine:
    team: str
    cost_center: str
    cluster: str
    kind: str  # KIND_ORDER
    resource: str  # the ledger's resource (cpu, gpu, credit-gpu, unrequested-cpu, ...)
    gpu_model: str
    corrects: date | None  # the day a correction corrects
    quantity: float | None  # resource-hours; None for discounts and corrections
    amount: float
    # SU of a charge line (docs/spec.md "Service units, credits and subsidies"); None: none
    service_units: float | None = None


@dataclass(frozen=True)
class MonthRules:
    """What the config adds to a month's lines from the ledger: SU (its clusters' price sets), credits, and what
    prepaid allocations paid."""

    clusters: Sequence[ClusterConfig] = ()
    credits: CreditsConfig | None = None
    allocations: Sequence[Allocation] = ()


@dataclass(frozen=True)
class Closing:
    closed_at: datetime  # UTC
    closed_by: str
    missing_days: tuple[date, ...]  # never run when it was closed


@dataclass(frozen=True)
class Statement:
    month: date  # first day
    currency: str
    lines: list[StatementLine]
    closing: Closing | None  # None: the month is open, its lines come from the ledger now
    missing_days: list[date]
    # every team's lines of the month, where `lines` are one team's: a line is part of its cluster's month, and its
    # cents are found among all of the cluster's lines, so that a team's lines read the same with and without --team
    # (statement_formats.shown_amounts); empty: `lines` are the whole statement
    whole: tuple[StatementLine, ...] = ()
    # the prepaid allocations of its teams as of the month's last day (or the last complete day), read from the
    # ledger's draws when the statement is asked for, closed or not: drawn, balance and overage
    allocations: tuple[AllocationStatus, ...] = ()

    @property
    def total(self) -> float:
        return total(line.amount for line in self.lines)

    def clusters(self, sum_of: Callable[[list[StatementLine]], Any] | None = None) -> list[dict]:
        """Per cluster: what its teams were charged in the month, its cost recovery, its subsidies and monthly
        credits, the corrections of earlier months booked, and the total: with cost recovery, charged and recovered
        add up to the cluster's cost. Each is `sum_of` its lines, by default their exact sum."""
        sum_of = sum_of or (lambda lines: total(line.amount for line in lines))
        sums = []
        for cluster in sorted({line.cluster for line in self.lines}):
            lines = [line for line in self.lines if line.cluster == cluster]
            parts = {part: sum_of([line for line in lines if _part(line) == part])
                     for part in ("charged", RECOVERY, CREDITED, CORRECTION)}
            sums.append({"cluster": cluster, "charged": parts["charged"], "recovered": parts[RECOVERY],
                         "credited": parts[CREDITED], "corrected": parts[CORRECTION], "total": sum_of(lines)})
        return sums

    def allocations_of(self, team: str) -> tuple[AllocationStatus, ...]:
        """The allocations the team's charges drew on, for its page of the statement."""
        return tuple(status for status in self.allocations if team in status.teams)

    def teams(self) -> list[tuple[str, str, list[StatementLine]]]:
        """(team, cost centre, lines) in the order of the lines."""
        grouped: dict[str, list[StatementLine]] = {}
        for line in self.lines:
            grouped.setdefault(line.team, []).append(line)
        return [(team, lines[0].cost_center, lines) for team, lines in grouped.items()]


def _part(line: StatementLine) -> str:
    """A line as a cluster's summary counts it: recovery, credits and corrections apart from what was charged."""
    if line.kind in (SUBSIDY, MONTHLY_CREDIT, *PREPAID):
        return CREDITED
    return line.kind if line.kind in (RECOVERY, CORRECTION) else "charged"


def cost_centers(directory: Directory | None) -> dict[str, str]:
    """Each team's cost centre (teams.cost_center_attribute) from the directory, where it has one."""
    return {name: team.cost_center for name, team in (directory.teams if directory else {}).items() if team.cost_center}


def month_range(month: date) -> tuple[date, date]:
    return month, month.replace(day=days_in_month(month))


def _kind(resource: str) -> str:
    prefix, _, rest = resource.partition("-")
    return KINDS.get(prefix, "charge") if rest else "charge"


def statement_lines_of(rows: pd.DataFrame, booked: pd.DataFrame, cost_centers: dict[str, str],
                       clusters: Sequence[ClusterConfig] = ()) -> list[StatementLine]:
    """The lines of a month from its ledger rows (LEDGER_COLUMNS) and the corrections booked in it.

    Every (team, cluster, resource, GPU model) gives a line at list cost, with its SU where `clusters`' price sets
    weigh them, and, where priority classes made it cheaper, a discount line (cost less list cost).
    """
    lines = []
    key = ["team", "cluster", "resource", "gpu_model"]
    sums = money_sums(rows, key, ["quantity", "list_cost", "cost"])
    units = rows.assign(su=service_units(rows, clusters)).groupby(key)["su"].sum(min_count=1)
    row: Any  # a row of the frame's named columns (pandas-stubs types its fields as any scalar)
    for row in sums.itertuples(index=False):
        center = cost_centers.get(row.team, "")
        su = units.get((row.team, row.cluster, row.resource, row.gpu_model), math.nan)
        lines.append(StatementLine(row.team, center, row.cluster, _kind(row.resource), row.resource, row.gpu_model,
                                   None, float(row.quantity), float(row.list_cost), None if math.isnan(su) else float(su)))
        if abs(row.cost - row.list_cost) > CORRECTION_NOISE:
            lines.append(StatementLine(row.team, center, row.cluster, "discount", row.resource, row.gpu_model, None,
                                       None, float(row.cost - row.list_cost)))
    corrections = money_sums(booked, ["team", "cluster", "resource", "corrects"], ["amount"])
    for row in corrections.itertuples(index=False):
        lines.append(StatementLine(row.team, cost_centers.get(row.team, ""), row.cluster, CORRECTION, row.resource,
                                   "", row.corrects, None, float(row.amount)))
    return sorted(lines, key=_line_order)


def _line_order(line: StatementLine) -> tuple:
    """A statement's order: by team, cluster and kind (KIND_ORDER), then resource, model and corrected day."""
    return line.team, line.cluster, KIND_ORDER.index(line.kind), line.resource, line.gpu_model, line.corrects or date.min


def _closing(conn: Connection, month: date) -> Closing | None:
    found = closing_of(conn, month)
    return None if found is None else Closing(*found)


def _open_statement(conn: Connection, month: date, currency: str, cost_centers: dict[str, str],
                    last_complete_day: date, rules: MonthRules) -> Statement:
    first, last = month_range(month)
    rows = month_rows(conn, first, last)
    booked = booked_corrections(conn, month)
    _refuse_non_finite_rows(month, rows, booked)
    currency = one_currency([*rows["currency"], *booked["currency"]], currency, lambda held: StatementError(
        f"the ledger holds costs in {held} in {month:%Y-%m}; a statement does not add up different currencies"))
    done = completed_between(conn, first, last)
    missing = [day for day in days_between(first, min(last, last_complete_day)) if day not in done]
    lines = statement_lines_of(rows, booked.assign(corrects=pd.to_datetime(booked["corrects"]).dt.date), cost_centers,
                               rules.clusters)
    if rules.allocations:  # before the credits: a subsidy or credit is of what the allocation left to pay
        lines = sorted(lines + [StatementLine(line.team, cost_centers.get(line.team, ""), line.cluster, line.kind,
                                              line.kind, line.account, None, None, line.amount)
                                for line in allocation_lines(allocation_draws_between(conn, first, last),
                                                             rules.allocations)], key=_line_order)
    return Statement(month, currency, with_credits(lines, month, rules.credits), None, missing)


def with_credits(lines: list[StatementLine], month: date, credits: CreditsConfig | None) -> list[StatementLine]:
    """The lines with the month's subsidies and monthly credits (billing/publish/credits.py) among them."""
    found = credits_of(lines, month, credits) if credits else []
    return sorted(lines + [StatementLine(credit.team, credit.cost_center, credit.cluster, credit.kind, credit.kind, "",
                                         None, None, credit.amount) for credit in found], key=_line_order)


def _closed_statement(conn: Connection, month: date, closing: Closing, currency: str) -> Statement:
    rows = stored_lines(conn, month)
    lines = [StatementLine(*(getattr(row, c) for c in LINE_COLUMNS)) for row in rows]
    return Statement(month, rows[0].currency if rows else currency, lines, closing, list(closing.missing_days))


def _statement(conn: Connection, month: date, currency: str, cost_centers: dict[str, str],
               last_complete_day: date, rules: MonthRules) -> Statement:
    closing = _closing(conn, month)
    if closing is not None:
        return _closed_statement(conn, month, closing, currency)
    return _open_statement(conn, month, currency, cost_centers, last_complete_day, rules)


def build_statement(engine: Engine, month: date, currency: str, cost_centers: dict[str, str],
                    team: str | None = None, last_complete_day: date = date.max,
                    rules: MonthRules | None = None) -> Statement:
    """The month's statement: as closed, or from the ledger now (with `rules`' SU and credits); optionally of one
    team.

    Days of an open month after `last_complete_day` (today and later) are not listed as missing.
    """
    rules = rules or MonthRules()
    with transaction(engine, f"reading the statement of {month:%Y-%m}") as conn:
        statement = _statement(conn, month, currency, cost_centers, last_complete_day, rules)
        if rules.allocations:
            as_of = min(month_range(month)[1], last_complete_day)
            found = statuses(allocation_draws_between(conn, min(a.first for a in rules.allocations), as_of),
                             rules.allocations, as_of)
            statement = replace(statement, allocations=tuple(
                status for status in found if status.teams and status.allocation.last >= month))
    if team is None:
        return statement
    lines = [line for line in statement.lines if line.team == team]
    if not lines:
        names = sorted({line.team for line in statement.lines})
        closest = difflib.get_close_matches(team, names, n=3, cutoff=0.5)
        hint = f"; closest: {', '.join(closest)}" if closest else ""
        raise StatementError(f"no team named {team!r} on the statement of {month:%Y-%m}{hint}")
    return Statement(statement.month, statement.currency, lines, statement.closing, statement.missing_days,
                     tuple(statement.lines), statement.allocations_of(team))


def _log(conn: Connection, month: date, action: str, by: str, at: datetime) -> None:
    log_month(conn, month, action, by, at)
    log.warning("%s %s by %s", action, f"{month:%Y-%m}", by)


def recovery_lines(lines: list[StatementLine], month: date, costs: dict[str, float]) -> list[StatementLine]:
    """Per recovered cluster (`costs`: cluster -> what it cost in the month) and team charged there, a line of
    the cost less the month's charges on the cluster, in proportion to the team's share of those charges; a
    cluster's lines add up to that difference exactly (the last takes what the others leave)."""
    recovered = []
    for cluster, cost in sorted(costs.items()):
        charged: dict[tuple[str, str], float] = {}
        for line in lines:  # corrections correct other months' charges: not this month's
            # what an allocation prepaid was paid, and its overage not charged forgiven, by the account: not the cost
            # recovered from the cluster's teams
            if line.cluster == cluster and line.kind not in (CORRECTION, *PREPAID):
                key = (line.team, line.cost_center)
                charged[key] = charged.get(key, 0.0) + line.amount
        charges = total(charged.values())
        if cents(charges) == 0:
            raise StatementError(f"cluster {cluster} has no charges in {month:%Y-%m} to spread its cost of "
                                 f"{cost:,.2f} over; run its days, or close the month without recovering it")
        recovered += [StatementLine(team, center, cluster, RECOVERY, "", "", None, None, share)
                      for (team, center), share in shares(cost - charges, charged).items()]
    return recovered


def close_month(engine: Engine, month: date, by: str, last_complete_day: date, currency: str,
                cost_centers: dict[str, str], allow_missing: bool = False,
                recover: dict[str, CostRecovery] | None = None, rules: MonthRules | None = None,
                journal: Callable[[Connection, Statement], object] | None = None) -> Statement:
    """Store the month's statement as it is now and mark the month closed; returns the statement. A cluster in
    `recover` gets cost recovery lines (docs/spec.md "Prices over time and cost recovery"), then `rules`' credits
    their lines, taken off the month as recovered; `journal` posts the finance office's journal of the statement in
    the same transaction (billing/publish/journal.py).

    Runs of the month's days and invoice imports of the month are waited for (and wait), so none slips in
    between the lines read and the month marked closed. A figure that is no finite amount (a cost, a line: a ledger
    written before such figures were refused) is refused before anything is written.
    """
    first, last = month_range(month)
    if last > last_complete_day:
        raise StatementError(f"{month:%Y-%m} has not ended yet (its last day is {last}); it cannot be closed")
    now = datetime.now(timezone.utc)
    with transaction(engine, f"closing {month:%Y-%m}", writes=True) as conn:
        serialise_with_runs(conn, days_between(first, last))
        closing = _closing(conn, month)
        if closing is not None:
            raise StatementError(f"{month:%Y-%m} was closed on {closing.closed_at:%Y-%m-%d %H:%M} UTC by "
                                 f"{closing.closed_by}; reopen it first (billing close --reopen)")
        rules = rules or MonthRules()
        statement = _open_statement(conn, month, currency, cost_centers, last,
                                    MonthRules(rules.clusters, allocations=rules.allocations))
        if statement.missing_days and not allow_missing:
            raise StatementError(f"{month:%Y-%m} has {len(statement.missing_days)} day(s) never run, first "
                                 f"{statement.missing_days[0]}; run them, or close with --allow-missing")
        costs = {cluster: _month_cost(conn, month, cluster, how) for cluster, how in (recover or {}).items()}
        _refuse_non_finite_costs(month, costs)
        lines = with_credits(statement.lines + recovery_lines(statement.lines, month, costs), month, rules.credits)
        statement = Statement(month, statement.currency, lines, None, statement.missing_days)
        store_closing(conn, month, now, by, statement.missing_days,
                      [{"currency": statement.currency, **{c: getattr(line, c) for c in LINE_COLUMNS}}
                       for line in statement.lines])
        if journal is not None:
            journal(conn, statement)
        _log(conn, month, "close", by, now)
        closing = _closing(conn, month)
    return Statement(month, statement.currency, statement.lines, closing, statement.missing_days)


def _month_cost(conn: Connection, month: date, cluster: str, recovery: CostRecovery) -> float:
    """What the cluster cost in the month: its configured monthly cost, or the invoice imported for it (the sum of
    its files)."""
    if recovery.monthly_cost is not None:
        return recovery.monthly_cost
    files = invoiced(conn, month, cluster)
    if not files:
        raise StatementError(f"cluster {cluster} recovers its invoice, and none was imported for {month:%Y-%m}: "
                             f"billing invoice import --cluster {cluster} --month {month:%Y-%m} FILE")
    return math.fsum(files)


def _refuse_non_finite_costs(month: date, costs: dict[str, float]) -> None:
    """A NaN or infinite cost (an invoice stored before such figures were refused) would be closed into recovery
    lines that can neither be shown nor closed again."""
    for cluster, cost in costs.items():
        if not math.isfinite(cost):
            raise StatementError(f"the invoice of cluster {cluster} for {month:%Y-%m} in the ledger (table invoices) is "
                                 f"{cost}, no amount; import it again: billing invoice import --replace --cluster "
                                 f"{cluster} --month {month:%Y-%m} FILE")


def _refuse_non_finite_rows(month: date, rows: pd.DataFrame, booked: pd.DataFrame) -> None:
    """The same for the ledger's rows and corrections of the month (written before a run refused such figures)."""
    for frame, table, columns in ((rows, "chargeback", ["quantity", "cost", "list_cost"]), (booked, "corrections", ["amount"])):
        bad = frame[~np.isfinite(frame[columns].to_numpy(dtype=float)).all(axis=1)]
        if len(bad):
            row = bad.iloc[0]
            day = row["day"] if table == "chargeback" else row["corrects"]
            raise StatementError(f"the ledger's table {table} holds {', '.join(f'{c} {row[c]}' for c in columns)} for "
                                 f"team {row['team']} on cluster {row['cluster']} ({day}) in {month:%Y-%m}, no amount; "
                                 f"run {day} again")


def reopen_month(engine: Engine, month: date, by: str) -> None:
    """Open a closed month again: its statement comes from the ledger, and corrections of it are no longer booked.

    Waits, as closing does, for a close of the month and for runs of its days (a run of a closed day books a
    correction) in progress, and checks that the month is closed only then: a second reopen at once finds it open,
    and no correction is booked after the reopen deleted the month's corrections.
    """
    first, last = month_range(month)
    with transaction(engine, f"reopening {month:%Y-%m}", writes=True) as conn:
        serialise_with_runs(conn, days_between(first, last))
        if _closing(conn, month) is None:
            raise StatementError(f"{month:%Y-%m} is not closed")
        later = latest_closed_after(conn, month)
        if later is not None:
            raise StatementError(f"{later:%Y-%m} is closed too; reopen the latest closed month first")
        delete_closing(conn, month, first, last)
        _log(conn, month, "reopen", by, datetime.now(timezone.utc))
