"""The invoices per account as PDF, read back as a person reads them: rendered to images by poppler's pdftoppm and
their text read by pdftotext, every figure against docs/billing.md's worked months by hand
(tests/helpers/account_invoices.py); and the same invoice's HTML page opened in headless Chromium at a phone's and a
desktop's width."""

from __future__ import annotations

import math
import re
import subprocess

import pytest
from PIL import Image

from fixtures.servers import require_program
from tests.helpers.account_invoices import (
    ISSUER,
    RECHARGE_ACCOUNTS,
    RECHARGE_INVOICES,
    WORKED_INVOICES,
    close_with_invoices,
)
from tests.helpers.chromium import assert_not_blank, chromium, layout, screenshot  # noqa: F401 (pytest fixtures)
from tests.helpers.journals import NOVEMBER, WORKED
from tests.helpers.ledgers import new_ledger
from tests.helpers.recharge import RULES, recharge_month
from tests.helpers.statements import NOV, write_month

A4_MM = (210, 297)
DPI = 60


@pytest.fixture(scope="module")
def invoices(tmp_path_factory):
    """Both worked months closed with their invoices: {account: (PDF, HTML, expected lines, expected total)}."""
    found = {}
    for name, expected in (("accounts", WORKED_INVOICES), ("recharge", RECHARGE_INVOICES)):
        out = tmp_path_factory.mktemp(name)
        if name == "accounts":
            engine = new_ledger(f"sqlite:///{out}/ledger.db")
            write_month(engine, NOV, NOVEMBER)
            close_with_invoices(engine, out, WORKED)
        else:
            engine = recharge_month(f"sqlite:///{out}/ledger.db")
            close_with_invoices(engine, out, RECHARGE_ACCOUNTS, RULES)
        engine.dispose()
        folder = out / "invoices" / "2026-11-1"
        for account, (lines, total) in expected.items():
            found[f"{name}/{account}"] = (folder / f"{account}.pdf", folder / f"{account}.html", lines, total)
    return found


def pdf_text(pdf, *options: str) -> list[str]:
    """The PDF's text line by line, spaces shrunk to one: in reading order, or with `-layout` as laid out on its
    pages (a table's row on one line)."""
    run = subprocess.run([require_program("pdftotext"), *options, str(pdf), "-"], capture_output=True, text=True,
                         timeout=60, check=True)
    return [re.sub(r"\s+", " ", line).strip() for line in run.stdout.splitlines() if line.strip()]


def test_every_figure_of_each_pdf_is_read_back_as_worked_out_by_hand(invoices):
    for name, (pdf, _, lines, total) in invoices.items():
        account = name.split("/")[1]
        read = " ".join(pdf_text(pdf))  # in reading order: the letterhead, then the facts beside it
        for said in (ISSUER.issuer, "4 Campus Drive Ann Arbor, MI 48109 rc-billing@example.edu",
                     f"Charged to account {account}: ", ISSUER.note):
            assert said in read, (name, said, read)
        text = pdf_text(pdf, "-layout")
        for fact in (f"Invoice 2026-11-1/{account}", "Period November 2026", "Days 2026-11-01 to 2026-11-30",
                     "Currency USD"):
            assert any(fact in line for line in text), (name, fact, text)
        for cluster, description, quantity, units, amount in lines:
            # one line of text per invoice line: its cluster, what it is, then its figures in their columns
            figures = [figure for figure in (quantity, units, amount) if figure]
            pattern = rf"^{cluster} {re.escape(description.split()[0])}\b.* " + " ".join(map(re.escape, figures)) + "$"
            assert [line for line in text if re.search(pattern, line)], (name, pattern, text)
        assert text[-1] == f"Invoice 2026-11-1/{account}, page 1 of 1", name  # each page's foot
        due = [line for line in text if line.startswith("Total due")]
        assert len(due) == 1 and due[0].endswith(total), (name, due)
        posted_total = [line for line in text if line.startswith("Total ") and not line.startswith("Total due")]
        assert posted_total == [f"Total {total}"], name  # the journal's lines of the account add up to the same


def test_each_pdf_renders_as_one_a4_page_with_ink_on_it(invoices, tmp_path):
    pdftoppm = require_program("pdftoppm")
    for name, (pdf, _, _, _) in invoices.items():
        prefix = tmp_path / name.replace("/", "-")
        subprocess.run([pdftoppm, "-r", str(DPI), "-png", str(pdf), str(prefix)], check=True, timeout=60)
        pages = sorted(tmp_path.glob(f"{prefix.name}-*.png"))
        assert len(pages) == 1, name
        with Image.open(pages[0]) as image:
            assert image.size == tuple(math.ceil(mm / 25.4 * DPI) for mm in A4_MM), name  # pdftoppm rounds up
        assert_not_blank(pages[0])


def test_the_html_invoice_fits_a_phone_and_a_desktop(invoices, chromium, tmp_path):  # noqa: F811 (the fixture)
    page = invoices["recharge/NIH-R01"][1]  # the widest: service units, credits, three resources
    copy = tmp_path / page.name
    copy.write_text(page.read_text())
    measured = layout(chromium, copy, (390, 1280), tmp_path / "profile")
    for width in (390, 1280):
        assert {key: measured[width][key] for key in ("overflow", "overlaps", "split")} == {
            "overflow": [], "overlaps": [], "split": []}, width
    assert measured[1280]["scrolls"] == []
    for width, height in ((1280, 1200), (390, 1600)):
        png = tmp_path / f"invoice-{width}.png"
        assert screenshot(chromium, copy, png, width, height, tmp_path / "profile") == [], width
        assert_not_blank(png)
