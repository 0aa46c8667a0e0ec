"""The HTML reports and an email body, opened in headless Chromium as a reader would.

The pages carry a Content-Security-Policy that allows no script and nothing
loaded from elsewhere, so any such attempt shows up as a console message,
and this test fails on any console message at all.
"""

import re
import subprocess
from datetime import date
from email import message_from_bytes, policy
from urllib.parse import urljoin

import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.ledger.database import open_ledger
from billing.notify.letters import admin_letter, team_letter
from billing.publish.dayview import read_report
from billing.publish.pages import write_pages
from tests.helpers.chromium import FLAGS, assert_not_blank, chromium, layout, screenshot  # noqa: F401 (pytest fixtures)
from tests.helpers.day_reports import with_workload_costs
from tests.helpers.demo import demo_run  # noqa: F401 (pytest fixtures)
from tests.helpers.report_ledger import DAY, write_ledger


@pytest.mark.parametrize("width, height", [(1200, 1600), (390, 2400)])  # a desktop and a phone
def test_reports_load_without_console_messages_and_are_not_blank(chromium, tmp_path, width, height):
    report = read_report(open_ledger(write_ledger(tmp_path / "ledger.db")), DAY, "USD", "unallocated")
    pages = write_pages(report, tmp_path / "out")
    mail = tmp_path / "admin-email.html"
    mail.write_text(admin_letter(report).html)
    for page in [pages[0], pages[1], mail]:
        png = tmp_path / f"{page.stem}-{width}.png"
        assert screenshot(chromium, page, png, width, height, tmp_path / "profile") == [], page
        assert_not_blank(png)


@pytest.mark.parametrize("width, height", [(1280, 5200), (390, 7000)])
def test_the_demo_s_pages_and_emails_at_desktop_and_phone_width(chromium, demo_run, tmp_path, width, height):  # noqa: F811
    """The demo's pages carry everything this issue added (names and leads, the unrequested share and its
    explanation, wide capacity tables, totals rows); screenshots a person can look at, e.g. for clipped axis
    labels at 390 px and GPU model names that wrap at 1280 px."""
    reports = demo_run / "demo-out" / "reports" / "2026-11-18"
    outbox = demo_run / "demo-out" / "outbox"
    pages = [reports / "index.html", reports / "teams" / "robotics.html"]
    for name in ("admins", "team-robotics"):
        eml = next(outbox.glob(f"2026-11-18-{name}*.eml"))
        html = message_from_bytes(eml.read_bytes(), policy=policy.default).get_body(("html",)).get_content()
        pages.append(tmp_path / f"email-{name}.html")
        pages[-1].write_text(html)
    for page in pages:
        png = tmp_path / f"demo-{page.stem}-{width}.png"
        assert screenshot(chromium, page, png, width, height, tmp_path / "profile") == [], page
        assert_not_blank(png)
def test_nothing_runs_off_a_phone_or_a_desktop(chromium, demo_run, tmp_path, monkeypatch):  # noqa: F811
    """At 390 px the team email's paragraphs were cut (its tables pushed the card wider than the screen); at
    1280 px the capacity table's last column needed scrolling; at 390 px the statement's amounts ran off the
    screen, and the emails broke names and figures mid-word ("InitContai nersRunni ng", "12,579. 16"). Measured in
    Chromium: no element ends right of the viewport outside a box that scrolls, no cell over another or its text
    out of it, no word split by a line break, and at 1280 px no table of a page needs to scroll. The admins' day page
    holds every table, the storage per class of the demo's clusters too."""
    reports = demo_run / "demo-out" / "reports"
    pages = [reports / "index.html", reports / "2026-11-18" / "index.html",
             *(reports / "2026-11-18" / "teams" / f"{team}.html" for team in ("robotics", "speech"))]
    admin = dom(chromium, pages[1].as_uri(), tmp_path / "profile")
    assert "<h2>Storage: claimed and unclaimed</h2>" in admin and '<table id="storage">' in admin
    for name in ("admins", "team-robotics-alice", "team-speech"):
        eml = next((demo_run / "demo-out" / "outbox").glob(f"2026-11-18-{name}*.eml"))
        pages.append(tmp_path / f"email-{name}.html")
        pages[-1].write_text(message_from_bytes(eml.read_bytes(), policy=policy.default).get_body(("html",)).get_content())
    monkeypatch.chdir(demo_run)
    for team in ([], ["--team", "robotics"]):
        pages.append(tmp_path / f"statement{len(team)}.html")
        result = CliRunner().invoke(main, ["statement", "--config", "fixtures/demo/billing.yaml", "--month", "2026-11",
                                           *team, "--format", "html", "--output", str(pages[-1])])
        assert result.exit_code == 0, result.output
    for page in pages:
        measured = layout(chromium, page, (390, 1280), tmp_path / "profile")
        for width in (390, 1280):
            assert {key: measured[width][key] for key in ("overflow", "overlaps", "split")} == {
                "overflow": [], "overlaps": [], "split": []}, (page, width)
        assert measured[1280]["scrolls"] == [], page


def dom(chromium: str, url: str, profile) -> str:
    """The page as Chromium parsed it."""
    run = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=60)
    assert "<html" in run.stdout, run.stderr[-2000:]
    return run.stdout


@pytest.fixture(scope="module")
def two_days(tmp_path_factory):
    """Pages of November 19 and 20 of the hand-worked ledger, with workload costs: every new section shows."""
    out = tmp_path_factory.mktemp("days")
    ledger = with_workload_costs(open_ledger(write_ledger(out / "ledger.db")))
    reports = {day: read_report(ledger, day, "USD", "unallocated") for day in (date(2026, 11, 19), DAY)}
    for report in reports.values():
        write_pages(report, out / "out")
    return out / "out", reports[DAY]


@pytest.mark.parametrize("width, height", [(1280, 2400), (390, 3200)])
def test_what_changed_workloads_and_archive_render_cleanly(chromium, two_days, tmp_path, width, height):
    out, report = two_days
    mail = tmp_path / "team-email.html"
    mail.write_text(team_letter(report, "robotics", "https://billing.example.org/").html)
    for page in [out / "2026-11-20" / "index.html", out / "2026-11-20" / "teams" / "robotics.html",
                 out / "index.html", mail]:
        png = tmp_path / f"{page.parent.name}-{page.stem}-{width}.png"
        assert screenshot(chromium, page, png, width, height, tmp_path / "profile") == [], page
        assert_not_blank(png)


def test_day_links_lead_from_day_to_day_in_chromium(chromium, two_days, tmp_path):
    out, _ = two_days
    url = (out / "2026-11-20" / "teams" / "robotics.html").as_uri()
    page = dom(chromium, url, tmp_path / "profile")
    assert "<title>Cluster billing 2026-11-20: team robotics</title>" in page
    [previous] = re.findall(r'<a rel="prev" href="([^"]+)"', page)
    assert 'rel="next"' not in page  # no later day ran
    before = dom(chromium, urljoin(url, previous), tmp_path / "profile")
    assert "<title>Cluster billing 2026-11-19: team robotics</title>" in before
    [following] = re.findall(r'<a rel="next" href="([^"]+)"', before)
    assert urljoin(urljoin(url, previous), following) == url
    [archive] = re.findall(r'<a href="([^"]+)">all days</a>', before)
    assert "<title>Cluster billing reports</title>" in dom(chromium, urljoin(url, archive), tmp_path / "profile")
