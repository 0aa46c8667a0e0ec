"""docs/billing.md's worked month of accounts (vision 60/40 between two grants, one ending on November 15; nlp with
no account), and closing it, reopening it and closing it again, on SQLite (tests/publish/test_journal.py) and
PostgreSQL (tests/integration/test_statement_postgres.py)."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine

from billing.allocations import Allocation
from billing.charge.allocations import allocation_use
from billing.charge.bill import DayBill
from billing.config import AccountsConfig
from billing.ledger.database import transaction
from billing.ledger.journals import postings
from billing.ledger.write import replace_day
from billing.money import cents
from billing.publish.journal import post_journal
from billing.publish.statement import MonthRules, Statement, StatementError, build_statement, close_month, reopen_month
from billing.publish.statement_formats import describe
from tests.helpers.ledgers import new_ledger
from tests.helpers.report_ledger import frame
from tests.helpers.statements import NOV, write_month

TODAY_DONE = date(2026, 12, 20)
NAMES = {"NSF-2231": "NSF CNS-2231", "NIH-R01": "NIH R01 GM-1", "DEPT-PHYS": "Physics department",
         "RC-UNFUNDED": "Research computing, unfunded use", "RC-REVENUE": "Research computing recharge revenue"}
WORKED_ASSIGNMENTS = [
    {"team": "vision", "account": "NSF-2231", "percent": 60, "from": "2026-09-01", "to": "2026-11-15"},
    {"team": "vision", "account": "NIH-R01", "percent": 40, "from": "2026-09-01"},
    {"team": "vision", "account": "DEPT-PHYS", "percent": 60, "from": "2026-11-16"},
]


def section(*assignments: dict) -> AccountsConfig:
    return AccountsConfig.model_validate({
        "names": NAMES, "assignments": list(assignments), "default_account": "RC-UNFUNDED",
        "revenue_account": "RC-REVENUE", "revenue_object_code": "4500", "object_codes": {"gpu": "6410", "cpu": "6420"},
        "default_object_code": "6400"})


WORKED = section(*WORKED_ASSIGNMENTS)

# docs/billing.md "Accounts: a worked month": vision 10.01 of GPUs and 0.50 of CPUs a day on jaguar, nlp 2.00 of
# CPUs on November 3
#          cluster   namespace  team      owner    resource gpu_model quantity unit_price cost
VISION = [("jaguar", "scan", "vision", "alice", "gpu", "", 5.005, 2.00, 10.01),
          ("jaguar", "scan", "vision", "alice", "cpu", "", 50.0, 0.01, 0.50)]
NLP = [("jaguar", "corpus", "nlp", "bob", "cpu", "", 200.0, 0.01, 2.00)]
NOVEMBER = {NOV + timedelta(days=n): VISION + (NLP if n == 2 else []) for n in range(30)}

# docs/billing.md "An allocation exhausted on the 20th": NIH-R01 bought 80.00 of use from November 1; it pays 40 % of
# vision's 10.51 a day, 4.204 a night
NIH_80 = Allocation("NIH-R01", NOV, date(2027, 10, 31), 80.0, "USD")


@pytest.fixture
def allocated(tmp_path):
    """The worked month written night by night, drawing NIH_80 down."""
    engine = new_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, NOV, NOVEMBER, WORKED.accounts(), (NIH_80,))
    yield engine
    engine.dispose()


WORKED_JOURNAL = """account,object_code,debit,credit,period,reference
DEPT-PHYS,6410,90.09,,2026-11,billing close 2026-11-1
DEPT-PHYS,6420,4.50,,2026-11,billing close 2026-11-1
NIH-R01,6410,120.12,,2026-11,billing close 2026-11-1
NIH-R01,6420,6.00,,2026-11,billing close 2026-11-1
NSF-2231,6410,90.09,,2026-11,billing close 2026-11-1
NSF-2231,6420,4.50,,2026-11,billing close 2026-11-1
RC-UNFUNDED,6420,2.00,,2026-11,billing close 2026-11-1
RC-REVENUE,4500,,317.30,2026-11,billing close 2026-11-1
"""


@pytest.fixture
def november(tmp_path):
    """A new SQLite ledger holding the worked month (NOVEMBER)."""
    engine = new_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, NOV, NOVEMBER)
    yield engine
    engine.dispose()


def close(engine: Engine, out: Path, accounts: AccountsConfig = WORKED, **options) -> Statement:
    return close_month(engine, NOV, "finance", TODAY_DONE, "USD", {},
                       journal=lambda conn, statement: post_journal(conn, statement, accounts, out), **options)


def balance(text: str) -> Decimal:
    rows = list(csv.DictReader(io.StringIO(text)))
    return sum((Decimal(row["debit"] or 0) - Decimal(row["credit"] or 0) for row in rows), Decimal(0))


def reclose_scenario(url: str, out: Path) -> None:
    """November written (NOVEMBER) to the ledger at `url` and closed, closed again without reopening (refused,
    nothing new), then reopened and closed with nlp given the department's account: the reversal of the first
    journal, then the new one."""
    engine = new_ledger(url)
    write_month(engine, NOV, NOVEMBER)
    close(engine, out)
    assert (out / "journals" / "journal-2026-11-1.csv").read_text() == WORKED_JOURNAL
    with pytest.raises(StatementError, match="reopen it first"):
        close(engine, out)
    assert [path.name for path in (out / "journals").iterdir()] == ["journal-2026-11-1.csv"]
    with transaction(engine, "reading") as conn:
        assert [posting.number for posting in postings(conn, NOV)] == [1]
    reopen_month(engine, NOV, "finance")
    # nlp gets the physics department's account before the month is closed again
    close(engine, out, section(*WORKED_ASSIGNMENTS, {"team": "nlp", "account": "DEPT-PHYS", "from": "2026-11-01"}))
    journals = out / "journals"
    assert sorted(path.name for path in journals.iterdir()) == [
        "journal-2026-11-1.csv", "journal-2026-11-2.csv", "journal-2026-11-3.csv"]
    assert (journals / "journal-2026-11-2.csv").read_text() == """account,object_code,debit,credit,period,reference
DEPT-PHYS,6410,,90.09,2026-11,reversal of 2026-11-1
DEPT-PHYS,6420,,4.50,2026-11,reversal of 2026-11-1
NIH-R01,6410,,120.12,2026-11,reversal of 2026-11-1
NIH-R01,6420,,6.00,2026-11,reversal of 2026-11-1
NSF-2231,6410,,90.09,2026-11,reversal of 2026-11-1
NSF-2231,6420,,4.50,2026-11,reversal of 2026-11-1
RC-UNFUNDED,6420,,2.00,2026-11,reversal of 2026-11-1
RC-REVENUE,4500,317.30,,2026-11,reversal of 2026-11-1
"""
    # the department now pays nlp's 2.00 of CPUs too: 4.50 + 2.00
    assert (journals / "journal-2026-11-3.csv").read_text() == """account,object_code,debit,credit,period,reference
DEPT-PHYS,6410,90.09,,2026-11,billing close 2026-11-3
DEPT-PHYS,6420,6.50,,2026-11,billing close 2026-11-3
NIH-R01,6410,120.12,,2026-11,billing close 2026-11-3
NIH-R01,6420,6.00,,2026-11,billing close 2026-11-3
NSF-2231,6410,90.09,,2026-11,billing close 2026-11-3
NSF-2231,6420,4.50,,2026-11,billing close 2026-11-3
RC-REVENUE,4500,,317.30,2026-11,billing close 2026-11-3
"""
    with transaction(engine, "reading") as conn:
        assert [(p.number, p.kind) for p in postings(conn, NOV)] == [(1, "journal"), (2, "reversal"), (3, "journal")]
    engine.dispose()


def allocated_close_scenario(url: str, out: Path) -> None:
    """docs/billing.md's worked month with NIH_80, written night by night to the ledger at `url`, the 5th run twice
    on the way: its statement takes off the 80.00 the allocation paid, and its journal credits NIH-R01 with it."""
    engine = new_ledger(url)
    write_month(engine, NOV, NOVEMBER, WORKED.accounts(), (NIH_80,))
    fifth = NOV.replace(day=5)
    rows = frame(NOVEMBER[fifth])
    replace_day(engine, fifth, DayBill(rows), "USD", allocation_use=allocation_use(
        rows, fifth, WORKED.accounts(), (NIH_80,), ()), allocations=(NIH_80,))
    rules = MonthRules(allocations=(NIH_80,))
    statement = build_statement(engine, NOV, "USD", {}, rules=rules)
    assert [(line.team, line.cluster, cents(line.amount), describe(line)) for line in statement.lines
            if line.kind == "allocation"] == [("vision", "jaguar", Decimal("-80.00"), "Allocation drawn, NIH-R01")]
    assert cents(statement.total) == Decimal("237.30")  # 317.30 less the 80.00 prepaid
    close_month(engine, NOV, "finance", TODAY_DONE, "USD", {}, rules=rules,
                journal=lambda conn, closed: post_journal(conn, closed, WORKED, out))
    written = (out / "journals" / "journal-2026-11-1.csv").read_text()
    assert written == ALLOCATED_JOURNAL
    assert balance(written) == 0
    engine.dispose()


ALLOCATED_JOURNAL = """account,object_code,debit,credit,period,reference
DEPT-PHYS,6410,90.09,,2026-11,billing close 2026-11-1
DEPT-PHYS,6420,4.50,,2026-11,billing close 2026-11-1
NIH-R01,6400,,80.00,2026-11,billing close 2026-11-1
NIH-R01,6410,120.12,,2026-11,billing close 2026-11-1
NIH-R01,6420,6.00,,2026-11,billing close 2026-11-1
NSF-2231,6410,90.09,,2026-11,billing close 2026-11-1
NSF-2231,6420,4.50,,2026-11,billing close 2026-11-1
RC-UNFUNDED,6420,2.00,,2026-11,billing close 2026-11-1
RC-REVENUE,4500,,237.30,2026-11,billing close 2026-11-1
"""
