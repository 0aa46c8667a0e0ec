"""A statement printed by headless Chromium: one page per team (CSS page breaks), as finance files them."""

import re
import subprocess

from billing.ledger.database import open_ledger
from billing.publish.statement import build_statement
from billing.publish.statement_formats import html
from tests.helpers.chromium import FLAGS, chromium  # noqa: F401 (pytest fixtures)
from tests.helpers.statements import OCT, OCT_5, OCT_6, write_month


def test_each_team_prints_on_a_page_of_its_own(chromium, tmp_path):  # noqa: F811
    engine = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, OCT, {OCT.replace(day=5): OCT_5, OCT.replace(day=6): OCT_6})
    page = tmp_path / "statement.html"
    page.write_text(html(build_statement(engine, OCT, "USD", {})))  # two teams: robotics, vision
    pdf = tmp_path / "statement.pdf"
    run = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--no-pdf-header-footer",
                          f"--print-to-pdf={pdf}", page.as_uri()], capture_output=True, text=True, timeout=60)
    assert pdf.exists(), run.stderr[-2000:]
    assert len(re.findall(rb"/Type\s*/Page\b", pdf.read_bytes())) == 2
