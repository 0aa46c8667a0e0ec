"""The finance office's journal of a closed month (docs/spec.md "Accounts"): the month's statement split over the
accounts its charges go to, one debit line per account and object code and the revenue account's credit, to the
cent and balancing to zero.

`billing close` posts it in the close's transaction (`post_journal`): recorded in the ledger (table
journal_lines) and written to `<output_dir>/journals/` before the close commits, so a month closed once has one
journal, and a month reopened and closed again a reversal of the latest journal, then its new one.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Connection

from billing.accounts import HUNDRED, Accounts, Share
from billing.config import AccountsConfig
from billing.days import days_in_month
from billing.ledger.journals import PostedLine, Posting, postings, record_posting
from billing.ledger.months import month_rows
from billing.money import cents, exact, rest_to_largest, total
from billing.private import write_whole
from billing.publish.statement import CORRECTION, PREPAID, Statement, StatementError

JOURNAL_COLUMNS = ["account", "object_code", "debit", "credit", "period", "reference"]
JOURNALS = "journals"  # under output_dir
_CENTS = 100

Part = tuple[str, str]  # (account id, object code)


@dataclass(frozen=True)
class _Split:
    """Exact parts of a month per account and object code, and each team's parts per account (which its lines
    not drawn from the ledger's days follow)."""

    parts: dict[Part, Decimal]
    teams: dict[str, dict[str, Decimal]]


def account_parts(statement: Statement, rows: pd.DataFrame, section: AccountsConfig) -> dict[Part, Decimal]:
    """The statement's total split over accounts and object codes, each to the cent, adding up to the statement's
    total rounded once (the rest to the largest part). `rows` are the ledger's rows of the month's days."""
    accounts = section.accounts()
    split = _split_days(rows, accounts, section)
    _split_month_lines(statement, rows, accounts, section, split)
    held = sorted(split.parts)
    rounded = rest_to_largest([split.parts[part] for part in held], cents(statement.total))
    return {part: amount for part, amount in zip(held, rounded, strict=True) if amount}


def _split_days(rows: pd.DataFrame, accounts: Accounts, section: AccountsConfig) -> _Split:
    """Each row's cost to the accounts of its day, namespace, person and team."""
    split = _Split(defaultdict(Decimal), defaultdict(lambda: defaultdict(Decimal)))
    row: Any  # a row of the frame's named columns
    for row in rows.itertuples(index=False):
        cost = exact(row.cost)
        for share in accounts.shares(row.day, row.team, row.namespace, row.owner):
            part = cost * share.percent / 100
            split.parts[(share.account.id, section.object_code(row.resource))] += part
            split.teams[row.team][share.account.id] += part
    return split


def _split_month_lines(statement: Statement, rows: pd.DataFrame, accounts: Accounts, section: AccountsConfig,
                       split: _Split) -> None:
    """The statement's lines the days' rows do not hold: a correction to its team's accounts of the day it corrects;
    the rest (cost recovery, and any line of a team beyond its rows' cost) as the team's own charges of the month
    were split, or by its accounts on the month's last day where they add up to nothing."""
    from_rows: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for team, resource, cost in zip(rows["team"], rows["resource"], rows["cost"], strict=True):
        from_rows[(team, resource)] += exact(cost)
    rest: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for line in statement.lines:
        code = section.object_code(line.resource)
        if line.kind == CORRECTION and line.corrects is not None:
            for share in accounts.shares(line.corrects, line.team, "", None):
                split.parts[(share.account.id, code)] += exact(line.amount) * share.percent / 100
        elif line.kind in PREPAID:  # what an allocation paid is its account's alone, named in the line's model
            split.parts[(line.gpu_model, code)] += exact(line.amount)
        else:
            rest[(line.team, line.resource)] += exact(line.amount)
    last = statement.month.replace(day=days_in_month(statement.month))
    for (team, resource), amount in sorted(rest.items()):
        beyond = amount - from_rows[(team, resource)]
        if not beyond:
            continue
        weights = split.teams.get(team, {})
        whole = sum(weights.values(), Decimal(0))
        if not whole:
            weights = {share.account.id: share.percent for share in accounts.shares(last, team, "", None)}
            whole = sum(weights.values(), Decimal(0))
        for account, weight in weights.items():
            split.parts[(account, section.object_code(resource))] += beyond * weight / whole


def charged_to_default(rows: pd.DataFrame, day: date, accounts: Accounts) -> tuple[dict, ...]:
    """Per team, the day's charges (`rows`, the ledger's of `day`) that no account of their namespace, person or
    team takes, so the default account will: team, namespaces, cost; most first. What the admins' summary names, so
    that someone gives them an account before the month is closed."""
    found: dict[str, tuple[set[str], list[float]]] = {}
    default = (Share(accounts.default, HUNDRED),)
    for team, namespace, owner, cost in zip(rows["team"], rows["namespace"], rows["owner"], rows["cost"], strict=True):
        if cost and accounts.shares(day, team, namespace, owner) == default:
            namespaces, costs = found.setdefault(team, (set(), []))
            namespaces.add(namespace)
            costs.append(cost)
    charged = [{"team": team, "namespaces": ", ".join(sorted(namespaces)), "cost": total(costs)}
               for team, (namespaces, costs) in found.items()]
    return tuple(sorted(charged, key=lambda row: (-row["cost"], row["team"])))


def journal_lines(statement: Statement, rows: pd.DataFrame, section: AccountsConfig, reference: str
                  ) -> tuple[PostedLine, ...]:
    """One line per account and object code (a debit, or a credit where its part is one), in their order, and the
    revenue account's line last: debits less credits are zero."""
    parts = account_parts(statement, rows, section)
    lines = [_posted(account, code, amount, reference) for (account, code), amount in sorted(parts.items())]
    revenue = -sum(parts.values(), Decimal(0))
    return (*lines, _posted(section.revenue_account, section.revenue_object_code, revenue, reference))


def _posted(account: str, code: str, amount: Decimal, reference: str) -> PostedLine:
    whole_cents = int(amount * _CENTS)
    return PostedLine(account, code, max(whole_cents, 0), max(-whole_cents, 0), reference)


def post_journal(conn: Connection, statement: Statement, section: AccountsConfig, output_dir: Path) -> list[Path]:
    """In the close's transaction: record the month's journal (after a reversal of the latest one, where the month
    was closed before) and write each posting's file; returns the files written."""
    month = statement.month
    earlier = postings(conn, month)
    number = earlier[-1].number + 1 if earlier else 1
    new = []
    if earlier:
        latest = earlier[-1]
        new.append(Posting(month, number, "reversal", tuple(
            PostedLine(line.account, line.object_code, line.credit_cents, line.debit_cents,
                       f"reversal of {month:%Y-%m}-{latest.number}") for line in latest.lines)))
        number += 1
    rows = month_rows(conn, month, month.replace(day=days_in_month(month)))
    new.append(Posting(month, number, "journal", journal_lines(statement, rows, section,
                                                               f"billing close {month:%Y-%m}-{number}")))
    now = datetime.now(timezone.utc)
    written = []
    for posting in new:
        record_posting(conn, posting, now)
        path = journal_path(output_dir, month, posting.number)
        try:
            write_whole(path, csv_text(posting).encode("utf-8"))
        except OSError as exc:  # the close's transaction is rolled back: the month stays open, nothing is recorded
            raise StatementError(f"cannot write the journal of {month:%Y-%m} to {path} ({exc.strerror or exc}); "
                                 f"make output_dir writable and close the month again") from None
        written.append(path)
    return written


def journal_path(output_dir: Path, month: date, number: int) -> Path:
    return output_dir / JOURNALS / f"journal-{month:%Y-%m}-{number}.csv"


def csv_text(posting: Posting) -> str:
    """The posting in the documented layout: account, object_code, debit, credit, period, reference; amounts to
    the cent, an empty cell where a line has none."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(JOURNAL_COLUMNS)
    for line in posting.lines:
        writer.writerow([line.account, line.object_code, _amount(line.debit_cents), _amount(line.credit_cents),
                         f"{posting.month:%Y-%m}", line.reference])
    return out.getvalue()


def _amount(whole_cents: int) -> str:
    return f"{Decimal(whole_cents) / _CENTS:.2f}" if whole_cents else ""
