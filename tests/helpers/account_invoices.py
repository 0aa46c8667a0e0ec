"""The invoices per account of docs/billing.md's worked months, closed as `billing close` closes them (journal, then
invoices), with every figure of each invoice worked out by hand: the accounts' month (vision 60/40 between two
grants, one ending on November 15; nlp on the default account) and the recharge centre's month (service units, a
subsidy and a monthly credit) with its teams given accounts."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from sqlalchemy import Engine

from billing.config import AccountInvoicesConfig, AccountsConfig
from billing.money import cents
from billing.publish.account_invoices import post_invoices
from billing.publish.journal import post_journal
from billing.publish.statement import MonthRules, Statement, close_month
from tests.helpers.html_tables import read_page
from tests.helpers.journals import NOVEMBER, TODAY_DONE, WORKED, section
from tests.helpers.ledgers import new_ledger
from tests.helpers.statements import NOV, write_month

ISSUER = AccountInvoicesConfig.model_validate({
    "issuer": "Research Computing, University of Example", "address": ["4 Campus Drive", "Ann Arbor, MI 48109"],
    "contact": "rc-billing@example.edu", "note": "Charged by journal entry to the account: no payment is due."})

# the recharge centre's month: robotics on the physics department, vision 60/40 on two grants all month
RECHARGE_ACCOUNTS = section({"team": "robotics", "account": "DEPT-PHYS", "from": "2026-09-01"},
                            {"team": "vision", "account": "NSF-2231", "percent": 60, "from": "2026-09-01"},
                            {"team": "vision", "account": "NIH-R01", "percent": 40, "from": "2026-09-01"})

# Each invoice's lines as read: (cluster, line, quantity, SU, amount), then the total due, by hand.
# The accounts' month (tests/helpers/journals.py NOVEMBER): vision's 10.01 of GPUs (5.005 GPU-h) and 0.50 of CPUs
# (50 core-h) a day; NSF-2231 pays 60 % of the 1st to the 15th, DEPT-PHYS 60 % of the 16th to the 30th, NIH-R01 40 %
# of all 30 days; nlp's 200 core-h for 2.00 go to RC-UNFUNDED.
WORKED_INVOICES = {
    "DEPT-PHYS": ([("jaguar", "CPU", "450.00 core-h", "", "4.50 USD"),       # 50 x 15 x 0.6; 0.50 x 15 x 0.6
                   ("jaguar", "GPU", "45.05 GPU-h", "", "90.09 USD")],       # 5.005 x 15 x 0.6 = 45.045; 10.01 x 9
                  "94.59 USD"),
    "NIH-R01": ([("jaguar", "CPU", "600.00 core-h", "", "6.00 USD"),          # 50 x 30 x 0.4
                 ("jaguar", "GPU", "60.06 GPU-h", "", "120.12 USD")],         # 5.005 x 30 x 0.4; 10.01 x 12
                "126.12 USD"),
    "NSF-2231": ([("jaguar", "CPU", "450.00 core-h", "", "4.50 USD"),
                  ("jaguar", "GPU", "45.05 GPU-h", "", "90.09 USD")],
                 "94.59 USD"),
    "RC-UNFUNDED": ([("jaguar", "CPU", "200.00 core-h", "", "2.00 USD")], "2.00 USD"),
}
# The recharge centre's month (tests/helpers/recharge.py NOV_10): robotics' whole month to DEPT-PHYS, its
# subsidy 25 % of 1,348.1472 = 337.0368; vision's lines 40 % to NIH-R01 (60 % to NSF-2231), its subsidy and monthly
# credit split as its charges were, 60/40: ibis' credit 57.00 -> 22.80, lakes' subsidy 96.00 -> 38.40 and credit
# 288.00 -> 115.20; SU at 10 per H100-hour and 0.1 per core-hour.
RECHARGE_INVOICES = {
    "DEPT-PHYS": ([("lakes", "CPU", "12,345.60 core-h", "1,234.56", "148.15 USD"),
                   ("lakes", "GPU NVIDIA-H100-80GB-HBM3", "1,000.00 GPU-h", "10,000.00", "1,200.00 USD"),
                   ("lakes", "Subsidy", "", "", "-337.04 USD")],
                  "1,011.11 USD"),  # 1,200 + 148.1472 - 337.0368 = 1,011.1104
    "NIH-R01": ([("ibis", "CPU", "40.00 core-h", "", "1.20 USD"),                 # 100 x 0.4; 3.00 x 0.4
                 ("ibis", "GPU", "8.00 GPU-h", "", "21.60 USD"),                  # 20 x 0.4; 54.00 x 0.4
                 ("ibis", "Monthly credit", "", "", "-22.80 USD"),
                 ("lakes", "CPU", "800.00 core-h", "80.00", "9.60 USD"),          # 2,000 x 0.4 x 0.1 SU; 24 x 0.4
                 ("lakes", "GPU NVIDIA-H100-80GB-HBM3", "120.00 GPU-h", "1,200.00", "144.00 USD"),
                 ("lakes", "Memory", "1,600.00 GiB-h", "0.00", "0.00 USD"),
                 ("lakes", "Subsidy", "", "", "-38.40 USD"),
                 ("lakes", "Monthly credit", "", "", "-115.20 USD")],
                "0.00 USD"),  # vision's month is 0.00 after its credit, and so is each account's part
}


def close_with_invoices(engine: Engine, out: Path, accounts: AccountsConfig, rules: MonthRules | None = None,
                        **options) -> Statement:
    """Close November as `billing close` does with accounts and account_invoices: the journal, then the invoices."""
    clusters = rules.clusters if rules else ()

    def post(conn, statement):
        post_journal(conn, statement, accounts, out)
        post_invoices(conn, statement, accounts, ISSUER, clusters, out)

    return close_month(engine, NOV, "finance", TODAY_DONE, "USD", {}, rules=rules, journal=post, **options)


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


def worked_invoices_scenario(url: str, out: Path) -> None:
    """The accounts' worked month written to the ledger at `url` and closed with its invoices under `out`: each
    invoice's every figure by hand (WORKED_INVOICES), its total the journal's debit of the account, all of them the
    statement's total."""
    engine = new_ledger(url)
    write_month(engine, NOV, NOVEMBER)
    statement = close_with_invoices(engine, out, WORKED)
    debits = journal_debits(out)
    for account, (lines, total) in WORKED_INVOICES.items():
        page = invoice_page(out, account)
        assert lines_and_total(page) == (lines, total), account
        assert page.texts["number"] == f"2026-11-1/{account}"
        assert (page.texts["period"], page.texts["days"]) == ("November 2026", "2026-11-01 to 2026-11-30")
        assert amount(total) == debits[account]  # the journal's figure, to the cent
        assert [row[0] for row in page.tables["posted"][1:-1]] == (["6420"] if account == "RC-UNFUNDED"
                                                                   else ["6410", "6420"])
    assert page.texts["account"] == "RC-UNFUNDED: Research computing, unfunded use"
    assert sum(amount(total) for _, total in WORKED_INVOICES.values()) == cents(statement.total) == Decimal("317.30")
    written = sorted(path.name for path in (out / "invoices" / "2026-11-1").iterdir())
    assert written == sorted(f"{account}{suffix}" for account in WORKED_INVOICES for suffix in (".html", ".pdf"))
    engine.dispose()
