"""The invoice per account at `billing close` (billing/publish/account_invoices.py): docs/billing.md's worked months
read back from the HTML written, every figure against the hand-worked ones of tests/helpers/account_invoices.py, each
total the journal's debit of the account and all of them the statement's total, to the cent. The PDF of the same
page is read back in tests/integration/test_account_invoice_pdf.py."""

from __future__ import annotations

import sys
from datetime import date
from decimal import Decimal

import pytest

from billing.charge.bill import DayBill
from billing.config import CostRecovery
from billing.directory.people import directory_to_json
from billing.ledger.database import transaction
from billing.ledger.months import month_rows
from billing.ledger.write import replace_day
from billing.money import cents
from billing.publish.account_invoices import account_invoices
from billing.publish.statement import MonthRules, StatementError, build_statement, reopen_month
from tests.helpers.account_invoices import (
    ISSUER,
    RECHARGE_ACCOUNTS,
    RECHARGE_INVOICES,
    WORKED_INVOICES,
    close_with_invoices,
    invoice_page,
    journal_debits,
    lines_and_total,
    worked_invoices_scenario,
)
from tests.helpers.journals import NAMES, NIH_80, NOVEMBER, VISION, WORKED, november  # noqa: F401 (a pytest fixture)
from tests.helpers.ledgers import new_ledger
from tests.helpers.recharge import RULES, recharge_month
from tests.helpers.report_ledger import frame
from tests.helpers.statements import DEC, DIRECTORY, NOV, write_month


def test_the_accounts_worked_month_invoices_each_account_its_part_by_hand(tmp_path):
    worked_invoices_scenario(f"sqlite:///{tmp_path}/ledger.db", tmp_path)


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
    # nlp given a new grant of its own before the month is closed again: the default account has no invoice then
    given = WORKED.model_copy(update={"names": {**NAMES, "NLP-1": "NLP start-up"}, "assignments": [
        *WORKED.assignments, WORKED.assignments[1].model_copy(update={"account": "NLP-1", "team": "nlp",
                                                                      "percent": Decimal(100)})]})
    close_with_invoices(november, tmp_path, given)
    # postings 2 (the reversal of 1) and 3 (the new journal): the invoices are numbered as the journal
    assert sorted(path.name for path in (tmp_path / "invoices").iterdir()) == ["2026-11-1", "2026-11-3"]
    assert sorted(path.stem for path in (tmp_path / "invoices" / "2026-11-3").glob("*.html")) == [
        "DEPT-PHYS", "NIH-R01", "NLP-1", "NSF-2231"]
    page = invoice_page(tmp_path, "NIH-R01", posting=3)
    assert page.texts["number"] == "2026-11-3/NIH-R01"
    assert lines_and_total(page) == WORKED_INVOICES["NIH-R01"]
    assert lines_and_total(invoice_page(tmp_path, "NLP-1", posting=3)) == WORKED_INVOICES["RC-UNFUNDED"]
    text = (tmp_path / "invoices" / "2026-11-3" / "NIH-R01.html").read_text()
    assert "This invoice replaces invoice 2026-11-1/NIH-R01" in text
    assert "replaces" not in (tmp_path / "invoices" / "2026-11-1" / "NIH-R01.html").read_text()
    assert "replaces" not in (tmp_path / "invoices" / "2026-11-3" / "NLP-1.html").read_text()  # a new account's first


def test_an_invoice_that_cannot_be_written_leaves_the_month_open(november, tmp_path):
    (tmp_path / "invoices").write_text("a file where the invoices' folder should be")
    with pytest.raises(StatementError, match=r"cannot write the invoice of account DEPT-PHYS for 2026-11 to "):
        close_with_invoices(november, tmp_path, WORKED)
    assert build_statement(november, NOV, "USD", {}).closing is None


def test_every_name_on_an_invoice_is_escaped(november, tmp_path):
    from tests.helpers.journals import WORKED_ASSIGNMENTS, section

    names = {**NAMES, "NIH-R01": "<script>alert(1)</script> & co"}
    accounts = section(*WORKED_ASSIGNMENTS).model_copy(update={"names": names})
    close_with_invoices(november, tmp_path, accounts)
    text = (tmp_path / "invoices" / "2026-11-1" / "NIH-R01.html").read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in text
    assert ISSUER.issuer in text


def test_cost_recovery_is_a_line_of_each_account_as_the_teams_month_was_split(november, tmp_path):
    # jaguar cost 634.60, twice its charges: vision's recovery of 315.30 split as its month was (30/40/30: NSF
    # 94.59, NIH 126.12, DEPT 94.59), nlp's 2.00 the default account's
    close_with_invoices(november, tmp_path, WORKED, recover={"jaguar": CostRecovery(monthly_cost=634.60)})
    assert lines_and_total(invoice_page(tmp_path, "NIH-R01")) == (
        [*WORKED_INVOICES["NIH-R01"][0], ("jaguar", "Cost recovery", "", "", "126.12 USD")], "252.24 USD")
    assert lines_and_total(invoice_page(tmp_path, "RC-UNFUNDED")) == (
        [*WORKED_INVOICES["RC-UNFUNDED"][0], ("jaguar", "Cost recovery", "", "", "2.00 USD")], "4.00 USD")


def test_a_correction_goes_to_the_accounts_of_the_day_it_corrects(november, tmp_path):
    close_with_invoices(november, tmp_path, WORKED)
    # November 20 run again after the close, vision's GPUs now 20.02: +10.01 booked in December, on the 20th's
    # accounts: NIH-R01 40 % (4.004) and DEPT-PHYS 60 % (6.006), none of it NSF-2231's, which ended on the 15th
    twentieth = [(*VISION[0][:-1], 20.02), VISION[1]]
    replace_day(november, date(2026, 11, 20), DayBill(frame(twentieth)), "USD", snapshot=directory_to_json(DIRECTORY))
    december = build_statement(november, DEC, "USD", {})
    with transaction(november, "reading") as conn:
        rows = month_rows(conn, DEC, date(2026, 12, 31))
    invoices = {invoice.account.id: invoice
                for invoice in account_invoices(december, rows, WORKED, (), 1, date(2027, 1, 2))}
    assert {account: ([(line.description, line.amount) for line in invoice.lines], invoice.total)
            for account, invoice in invoices.items()} == {
        "DEPT-PHYS": ([("Correction of 2026-11-20, GPU", Decimal("6.01"))], Decimal("6.01")),
        "NIH-R01": ([("Correction of 2026-11-20, GPU", Decimal("4.00"))], Decimal("4.00"))}


def test_account_ids_are_file_names_and_two_that_would_share_one_are_refused(november, tmp_path):
    names = {**NAMES, "NIH/R01": "NIH R01 by its slash", "NIH_R01": "NIH R01 by its underscore"}
    slash = WORKED.assignments[0].model_copy(update={"account": "NIH/R01"})  # vision's 60 % to the 15th
    slashed = WORKED.model_copy(update={"names": names, "assignments": [slash, *WORKED.assignments[1:]]})
    underscore = slash.model_copy(update={"account": "NIH_R01", "team": "nlp", "percent": Decimal(100)})
    both = slashed.model_copy(update={"assignments": [*slashed.assignments, underscore]})
    with pytest.raises(StatementError, match=r"accounts 'NIH/R01' and 'NIH_R01' would both have their invoice of "
                                             r"2026-11 in NIH_R01.pdf; rename one of them in accounts.names"):
        close_with_invoices(november, tmp_path, both)
    assert build_statement(november, NOV, "USD", {}).closing is None
    close_with_invoices(november, tmp_path, slashed)
    assert invoice_page(tmp_path, "NIH_R01").texts["number"] == "2026-11-1/NIH/R01"


def test_a_pdf_that_cannot_be_laid_out_leaves_the_month_open(november, tmp_path, monkeypatch):
    # WeasyPrint that does not load (without Pango its import raises OSError naming the library; here ImportError)
    monkeypatch.setitem(sys.modules, "weasyprint", None)
    with pytest.raises(StatementError, match=r"cannot lay out the invoices as PDF: WeasyPrint does not load \(.*\); "
                                             r"install it with billing's dependencies and Debian's libpango-1.0-0"):
        close_with_invoices(november, tmp_path, WORKED)
    assert build_statement(november, NOV, "USD", {}).closing is None


def test_an_allocation_s_line_is_on_its_account_s_invoice_whole_and_the_total_is_the_journal_s(tmp_path):
    """docs/billing.md's worked month with NIH-R01's 80.00 allocation: the line "Allocation drawn, NIH-R01" (-80.00)
    is NIH-R01's alone, so its invoice's total due is its journal lines', 120.12 + 6.00 - 80.00 = 46.12, and no
    other account's invoice has a part of that line."""
    engine = new_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, NOV, NOVEMBER, WORKED.accounts(), (NIH_80,))
    statement = build_statement(engine, NOV, "USD", {}, rules=MonthRules(allocations=(NIH_80,)))
    with engine.connect() as conn:
        rows = month_rows(conn, NOV, date(2026, 11, 30))
    invoices = {invoice.account.id: invoice for invoice in account_invoices(statement, rows, WORKED, (), 1,
                                                                              date(2026, 12, 2))}
    allocation_lines = {account: [cents(line.amount) for line in invoice.lines if line.line.kind == "allocation"]
                        for account, invoice in invoices.items()}
    assert allocation_lines == {account: ([Decimal("-80.00")] if account == "NIH-R01" else [])
                                for account in invoices}
    assert invoices["NIH-R01"].total == Decimal("46.12")
    assert sum(invoice.total for invoice in invoices.values()) == cents(statement.total) == Decimal("237.30")
    engine.dispose()
