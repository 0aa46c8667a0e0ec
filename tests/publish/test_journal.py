"""The finance office's journal at `billing close` (billing/publish/journal.py): docs/billing.md's worked month by
hand, balancing to zero, written once per close, reversed when the month is closed again, and the accounts' parts
adding up to the statement's total to the cent for any month (Hypothesis)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.charge.bill import DayBill
from billing.config import CostRecovery
from billing.ledger.database import transaction
from billing.ledger.months import month_rows
from billing.ledger.write import replace_day
from billing.money import cents, exact
from billing.publish.account_invoices import account_invoices
from billing.publish.account_split import line_parts
from billing.publish.journal import account_parts, charged_to_default
from billing.publish.statement import StatementError, build_statement
from tests.helpers.journals import (
    WORKED,
    WORKED_JOURNAL,
    balance,
    close,
    november,  # noqa: F401 (a pytest fixture)
    reclose_scenario,
    section,
)
from tests.helpers.ledgers import new_ledger
from tests.helpers.report_ledger import frame
from tests.helpers.statements import NOV


def test_the_worked_month_is_the_journal_worked_out_by_hand(november, tmp_path):
    closed = close(november, tmp_path)
    assert cents(closed.total) == Decimal("317.30")
    written = (tmp_path / "journals" / "journal-2026-11-1.csv").read_text()
    assert written == WORKED_JOURNAL
    assert balance(written) == 0
    assert [path.name for path in (tmp_path / "journals").iterdir()] == ["journal-2026-11-1.csv"]


def test_closed_once_refused_again_then_reopened_and_closed_with_a_reversal(tmp_path):
    reclose_scenario(f"sqlite:///{tmp_path}/ledger.db", tmp_path)


def test_cost_recovery_follows_the_split_of_the_teams_charges(november, tmp_path):
    # jaguar cost 634.60, twice its charges of 317.30: each team's recovery line equals its charges (vision 315.30,
    # nlp 2.00), split as they were, under the default object code
    close(november, tmp_path, recover={"jaguar": CostRecovery(monthly_cost=634.60)})
    lines = (tmp_path / "journals" / "journal-2026-11-1.csv").read_text().splitlines()
    assert [line.rsplit(",", 3)[0] for line in lines[1:]] == [
        "DEPT-PHYS,6400,94.59", "DEPT-PHYS,6410,90.09", "DEPT-PHYS,6420,4.50",
        "NIH-R01,6400,126.12", "NIH-R01,6410,120.12", "NIH-R01,6420,6.00",
        "NSF-2231,6400,94.59", "NSF-2231,6410,90.09", "NSF-2231,6420,4.50",
        "RC-UNFUNDED,6400,2.00", "RC-UNFUNDED,6420,2.00", "RC-REVENUE,4500,"]
    assert lines[-1] == "RC-REVENUE,4500,,634.60,2026-11,billing close 2026-11-1"


def test_a_journal_that_cannot_be_written_leaves_the_month_open(november, tmp_path):
    blocked = tmp_path / "out"
    blocked.write_text("a file where output_dir should be")
    with pytest.raises(StatementError, match=r"cannot write the journal of 2026-11 to .*journal-2026-11-1.csv"):
        close(november, blocked)
    assert build_statement(november, NOV, "USD", {}).closing is None


# a month of random rows and assignments: namespaces, people and teams at random percentages over random periods
_DAYS = st.integers(min_value=0, max_value=29)
_COST = st.decimals(min_value=Decimal("-50"), max_value=Decimal(500), places=3).map(float)
_ROWS = st.lists(st.tuples(_DAYS, st.sampled_from(["vision", "nlp"]), st.sampled_from(["scan", "corpus"]),
                           st.sampled_from(["alice", "bob", None]), st.sampled_from(["gpu", "cpu", "memory"]), _COST),
                 min_size=1, max_size=12)
_SUBJECTS = st.sampled_from([("team", "vision"), ("team", "nlp"), ("namespace", "scan"), ("person", "alice")])


@st.composite
def _assignments(draw) -> list[dict]:
    """Per subject drawn, one period split between two or three accounts at percentages adding to 100."""
    found = []
    for kind, name in draw(st.lists(_SUBJECTS, unique=True, max_size=3)):
        first = NOV + timedelta(days=draw(_DAYS))
        last = first + timedelta(days=draw(st.integers(min_value=0, max_value=40)))
        accounts = draw(st.lists(st.sampled_from(["NSF-2231", "NIH-R01", "DEPT-PHYS"]), min_size=1, max_size=3,
                                 unique=True))
        cuts = sorted(draw(st.lists(st.integers(min_value=1, max_value=9999), min_size=len(accounts) - 1,
                                    max_size=len(accounts) - 1, unique=True)))
        bounds = [0, *cuts, 10000]
        found += [{kind: name, "account": account, "percent": str(Decimal(bounds[i + 1] - bounds[i]) / 100),
                   "from": first.isoformat(), "to": last.isoformat()} for i, account in enumerate(accounts)]
    return found


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_ROWS, assignments=_assignments())
def test_the_accounts_and_their_invoices_of_any_month_add_up_to_its_statement_to_the_cent(tmp_path_factory, rows, assignments):
    engine = new_ledger(f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db")
    days: dict[date, list[tuple]] = {}
    for day, team, namespace, owner, resource, cost in rows:
        days.setdefault(NOV + timedelta(days=day), []).append(
            ("jaguar", namespace, team, owner, resource, "", 1.0, cost, cost))
    for day, held in days.items():  # one row per key of the day, as the ledger holds them; the other days never run
        rows_of_day = list({(row[:3], row[4:6]): row for row in held}.values())
        replace_day(engine, day, DayBill(frame(rows_of_day)), "USD")
    statement = build_statement(engine, NOV, "USD", {})
    with transaction(engine, "reading") as conn:
        month = month_rows(conn, NOV, date(2026, 11, 30))
    accounts = section(*assignments)
    parts = account_parts(statement, month, accounts)
    assert sum(parts.values(), Decimal(0)) == cents(statement.total)
    # every line's parts add up to the line, and each account's invoice to what the journal books it
    split = line_parts(statement, month, accounts.accounts())
    for line in statement.lines:
        assert abs(sum((part.amount for part in split if part.line is line), Decimal(0)) - exact(line.amount)) < 1e-12
    invoices = account_invoices(statement, month, accounts, (), 1, date(2026, 12, 1))
    for invoice in invoices:
        assert invoice.total == sum((amount for (account, _), amount in parts.items() if account == invoice.account.id),
                                    Decimal(0))
        assert sum((line.amount for line in invoice.lines), invoice.rounding) == invoice.total
    assert sum((invoice.total for invoice in invoices), Decimal(0)) == cents(statement.total)
    engine.dispose()


def test_the_charges_no_account_takes_are_named_per_team(november):
    # November 3 of the worked month: nlp's 2.00 has no account; vision's 10.51 is NSF's and NIH's
    with transaction(november, "reading") as conn:
        rows = month_rows(conn, date(2026, 11, 3), date(2026, 11, 3))
    assert charged_to_default(rows, date(2026, 11, 3), WORKED.accounts()) == (
        {"team": "nlp", "namespaces": "corpus", "cost": 2.0},)
    with transaction(november, "reading") as conn:
        rows = month_rows(conn, date(2026, 11, 20), date(2026, 11, 20))
    assert charged_to_default(rows, date(2026, 11, 20), WORKED.accounts()) == ()  # vision's: NIH's and DEPT's
