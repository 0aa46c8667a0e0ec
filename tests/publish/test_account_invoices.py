"""The invoice per account at `billing close` (billing/publish/account_invoices.py): docs/billing.md's worked months
read back from the HTML written, every figure against the hand-worked ones of tests/helpers/account_invoices.py, each
total the journal's debit of the account and all of them the statement's total, to the cent. The PDF of the same
page is read back in tests/integration/test_account_invoice_pdf.py."""

from __future__ import annotations

import csv
from decimal import Decimal

import pytest

from billing.money import cents
from billing.publish.statement import StatementError, build_statement, reopen_month
from tests.helpers.account_invoices import (
    ISSUER,
    RECHARGE_ACCOUNTS,
    RECHARGE_INVOICES,
    WORKED_INVOICES,
    close_with_invoices,
)
from tests.helpers.html_tables import read_page
from tests.helpers.journals import WORKED, november  # noqa: F401 (a pytest fixture)
from tests.helpers.recharge import RULES, recharge_month
from tests.helpers.statements import NOV


def invoice_page(out, account: str, posting: int = 1):
    return read_page((out / "invoices" / f"2026-11-{posting}" / f"{account}.html").read_text())


def lines_and_total(page) -> tuple[list[tuple[str, ...]], str]:
    """The invoice's lines (cluster, line, quantity, SU where shown, amount), without the teams' heading rows, and
    its total due."""
    rows = page.tables["lines"][1:]
    lines = [tuple(row) for row in rows[:-1] if not row[0].startswith("Team ")]
    return [(*line[:3], "", line[3]) if len(line) == 4 else line for line in lines], page.texts["total"]


def journal_debits(out, posting: int = 1) -> dict[str, Decimal]:
    """Each account's debits less credits in the journal of the posting."""
    with open(out / "journals" / f"journal-2026-11-{posting}.csv") as file:
        found: dict[str, Decimal] = {}
        for row in csv.DictReader(file):
            found[row["account"]] = (found.get(row["account"], Decimal(0)) + Decimal(row["debit"] or 0)
                                     - Decimal(row["credit"] or 0))
    return found


def amount(text: str) -> Decimal:
    return Decimal(text.removesuffix(" USD").replace(",", ""))


def test_the_accounts_worked_month_invoices_each_account_its_part_by_hand(november, tmp_path):
    statement = close_with_invoices(november, tmp_path, WORKED)
    debits = journal_debits(tmp_path)
    for account, (lines, total) in WORKED_INVOICES.items():
        page = invoice_page(tmp_path, account)
        assert lines_and_total(page) == (lines, total), account
        assert page.texts["number"] == f"2026-11-1/{account}"
        assert (page.texts["period"], page.texts["days"]) == ("November 2026", "2026-11-01 to 2026-11-30")
        assert amount(total) == debits[account]  # the journal's figure, to the cent
        assert [row[0] for row in page.tables["posted"][1:-1]] == (["6420"] if account == "RC-UNFUNDED"
                                                                   else ["6410", "6420"])
    assert page.texts["account"] == "RC-UNFUNDED: Research computing, unfunded use"
    assert sum(amount(total) for _, total in WORKED_INVOICES.values()) == cents(statement.total) == Decimal("317.30")
    written = sorted(path.name for path in (tmp_path / "invoices" / "2026-11-1").iterdir())
    assert written == sorted(f"{account}{suffix}" for account in WORKED_INVOICES for suffix in (".html", ".pdf"))


def test_service_units_subsidies_and_monthly_credits_on_the_accounts_invoices(tmp_path):
    engine = recharge_month(f"sqlite:///{tmp_path}/ledger.db")
    statement = close_with_invoices(engine, tmp_path, RECHARGE_ACCOUNTS, RULES)
    for account, (lines, total) in RECHARGE_INVOICES.items():
        assert lines_and_total(invoice_page(tmp_path, account)) == (lines, total), account
    nsf = invoice_page(tmp_path, "NSF-2231")
    assert nsf.texts["total"] == "0.00 USD"
    assert nsf.tables["lines"][-1][-2:] == ["1,920.00", "0.00 USD"]  # SU: 60 % of vision's 3,200
    debits = journal_debits(tmp_path)
    assert {account: debits[account] for account in ("DEPT-PHYS", "NIH-R01", "NSF-2231")} == {
        "DEPT-PHYS": Decimal("1011.11"), "NIH-R01": Decimal("0.00"), "NSF-2231": Decimal("0.00")}
    assert cents(statement.total) == Decimal("1011.11")
    engine.dispose()


def test_a_month_closed_again_gets_new_invoices_that_say_which_they_replace(november, tmp_path):
    close_with_invoices(november, tmp_path, WORKED)
    reopen_month(november, NOV, "finance")
    close_with_invoices(november, tmp_path, WORKED)
    # postings 2 (the reversal of 1) and 3 (the new journal): the invoices are numbered as the journal
    assert sorted(path.name for path in (tmp_path / "invoices").iterdir()) == ["2026-11-1", "2026-11-3"]
    page = invoice_page(tmp_path, "NIH-R01", posting=3)
    assert page.texts["number"] == "2026-11-3/NIH-R01"
    assert lines_and_total(page) == WORKED_INVOICES["NIH-R01"]
    text = (tmp_path / "invoices" / "2026-11-3" / "NIH-R01.html").read_text()
    assert "replaces invoice 2026-11-1/NIH-R01" in text
    assert "replaces" not in (tmp_path / "invoices" / "2026-11-1" / "NIH-R01.html").read_text()


def test_an_invoice_that_cannot_be_written_leaves_the_month_open(november, tmp_path):
    (tmp_path / "invoices").write_text("a file where the invoices' folder should be")
    with pytest.raises(StatementError, match=r"cannot write the invoice of account DEPT-PHYS for 2026-11 to "):
        close_with_invoices(november, tmp_path, WORKED)
    assert build_statement(november, NOV, "USD", {}).closing is None


def test_every_name_on_an_invoice_is_escaped(november, tmp_path):
    from tests.helpers.journals import NAMES, WORKED_ASSIGNMENTS, section

    names = {**NAMES, "NIH-R01": "<script>alert(1)</script> & co"}
    accounts = section(*WORKED_ASSIGNMENTS).model_copy(update={"names": names})
    close_with_invoices(november, tmp_path, accounts)
    text = (tmp_path / "invoices" / "2026-11-1" / "NIH-R01.html").read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in text
    assert ISSUER.issuer in text
