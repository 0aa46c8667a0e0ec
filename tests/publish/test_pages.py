import re
import threading
from datetime import date
from html.parser import HTMLParser

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.notify.letters import admin_letter, team_letter
from billing.publish.dayview import TrendDay, read_report, slug
from billing.publish.formatting import HELD_BEFORE_RUNNING_RULE, HELD_CHARGED
from billing.publish.pages import (
    RenderError,
    _write,
    axis_label,
    day_ranges,
    person,
    text_table,
    trend_lines,
    write_pages,
)
from tests.helpers.day_reports import ledger, report, with_workload_costs  # noqa: F401 (pytest fixtures)
from tests.helpers.html_tables import read_page
from tests.helpers.report_ledger import (
    DAY,
    DAY_CHANGE,
    DAY_TOTAL,
    H100,
    MONTH_TOTAL,
    ROWS,
    TEAM_CHANGE,
    TEAM_COST,
    TEAM_MONTH,
    frame,
    write_held_ledger,
    write_ledger,
)


def usd(text: str) -> str:
    return f"{text} USD"


def test_index_page_shows_every_table_the_admins_need(report, tmp_path):
    write_pages(report, tmp_path)
    page = read_page((tmp_path / "2026-11-20" / "index.html").read_text())
    assert page.texts["day-total"] == usd(DAY_TOTAL)
    assert page.texts["month-total"] == usd(MONTH_TOTAL)
    teams = page.tables["teams"]
    assert [row[:5] for row in teams[1:5]] == [  # no directory snapshot in this ledger: no leads
        [team, "–", usd(TEAM_COST[team]), usd(TEAM_CHANGE[team]), usd(TEAM_MONTH[team])]
        for team in ["robotics", "vision", "unallocated", "platform"]
    ]
    assert teams[-1][:5] == ["Total", "", usd(DAY_TOTAL), usd(DAY_CHANGE), usd(MONTH_TOTAL)]
    assert page.tables["usage"][1:-1] == [
        ["jaguar", "GPU", "10.00 GPU-h", "24.00 USD"],
        ["ibis", "GPU", "4.00 GPU-h", "11.80 USD"],
        ["ibis", "CPU", "50.00 core-h", "1.70 USD"],
        ["jaguar", "Memory", "1,000.00 GiB-h", "1.50 USD"],
        ["jaguar", "CPU", "110.00 core-h", "1.32 USD"],
    ]
    assert page.tables["usage"][-1] == ["Total", "", "", usd(DAY_TOTAL)]
    assert page.tables["gpu-models"][1:] == [[H100, "10.00 GPU-h", "24.00 USD"], ["(no model label)", "4.00 GPU-h", "11.80 USD"]]
    assert page.tables["namespaces"][1:3] == [
        ["alice", "jaguar", "robotics", "25.20 USD"],
        ["bob", "ibis", "robotics, vision", "11.80 USD"],
    ]
    assert page.tables["unallocated"][1:] == [["stray", "ibis", "1.70 USD", ""], ["Total", "", "1.70 USD", ""]]


def test_team_page_breaks_the_team_down_per_person_namespace_and_resource(report, tmp_path):
    write_pages(report, tmp_path)
    page = read_page((tmp_path / "2026-11-20" / "teams" / "robotics.html").read_text())
    assert page.texts["day-total"] == "32.60 USD"
    assert page.texts["month-total"] == "56.60 USD"
    assert [row[:3] for row in page.tables["owners"][1:]] == [
        ["alice", "alice", "25.20 USD"],
        ["bob", "bob", "5.90 USD"],
        ["(team namespaces)", "team-robotics", "1.50 USD"],
        ["Total", "", "32.60 USD"],
    ]
    assert page.tables["team-usage"][1] == ["jaguar", f"GPU {H100}", "10.00 GPU-h", "24.00 USD"]
    html = (tmp_path / "2026-11-20" / "teams" / "robotics.html").read_text()
    assert html.count('<rect class="bar"') == 5  # the days run in the 30-day window
    assert html.count('<rect class="missing"') == 25


def test_pages_have_no_script_and_no_external_asset(report, tmp_path):
    for path in write_pages(report, tmp_path):
        html = path.read_text()
        assert not re.search(r"<script|<link|<img|\ssrc=|href=\"(https?:)?//|url\(|@import", html)
        assert "default-src 'none'" in html  # and the browser is told to load nothing else


def test_report_of_a_rerun_day_is_the_same_page(ledger, tmp_path):
    first = write_pages(read_report(ledger, DAY, "USD", "unallocated"), tmp_path / "a")
    replace_day(ledger, DAY, DayBill(frame(ROWS[DAY])), "USD")  # the nightly job run again
    second = write_pages(read_report(ledger, DAY, "USD", "unallocated"), tmp_path / "b")
    assert [p.read_text() for p in first] == [p.read_text() for p in second]


def test_hostile_names_are_escaped_and_stay_inside_output_dir(tmp_path):
    script = '<script>alert("x")</script>'
    rows = [
        ("jaguar", f'ns"{script}', f"{script}&co", "o'\"&<b>", "cpu", "", 1.0, 1.0, 1.0),
        ("jaguar", "one", "../x", None, "cpu", "", 1.0, 2.0, 2.0),
        ("jaguar", "two", "a/b", None, "cpu", "", 1.0, 3.0, 3.0),
        ("jaguar", "three", "stray", None, "cpu", "", 1.0, 4.0, 4.0),
    ]
    ledger = open_ledger(write_ledger(tmp_path / "ledger.db", {DAY: rows}))
    out = tmp_path / "out"
    pages = write_pages(read_report(ledger, DAY, "USD", "stray"), out)
    assert all(p.resolve().is_relative_to(out.resolve()) for p in pages)
    assert {p.name for p in (out / "2026-11-20" / "teams").iterdir()} == {
        f"{slug(t)}.html" for t in (f"{script}&co", "../x", "a/b", "stray")
    }
    assert not (tmp_path / "x.html").exists() and not (out / "2026-11-20" / "x.html").exists()
    for page in pages:
        html = page.read_text()
        assert "<script>" not in html and "<b>" not in html
    index = (out / "2026-11-20" / "index.html").read_text()
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;co" in index
    team_page = next(p for p in pages if p.name.startswith("script-alert")).read_text()
    assert "o&#39;&#34;&amp;&lt;b&gt;" in team_page
    assert read_page(team_page).tables["owners"][1][0] == "o'\"&<b>"  # a person reads the name as it is


def test_missing_days_read_as_ranges():
    assert day_ranges([date(2026, 11, d) for d in (2, 3, 4, 9, 11, 12)]) == "2\u20134, 9, 11\u201312"


def test_letters_name_day_team_and_total_and_contain_no_svg(report):
    admins = admin_letter(report)
    assert admins.subject == "Cluster billing 2026-11-20: all teams 40.32 USD"
    assert "Total" in admins.text and usd(DAY_TOTAL) in admins.text and usd(MONTH_TOTAL) in admins.text
    team = team_letter(report, "robotics")
    assert team.subject == "Cluster billing 2026-11-20: team robotics 32.60 USD"
    assert "alice" in team.text and "25.20 USD" in team.text
    for letter in (admins, team):
        assert "<svg" not in letter.html
        # the CSS was inlined: only the phone-size rule is left in a style element
        assert [s.split("{")[0].strip() for s in re.findall(r"<style>(.*?)</style>", letter.html, re.S)] == ["@media (max-width: 480px)"]
        assert '<td class="num" style="' in letter.html


def test_the_admins_letter_says_what_each_team_held_before_running_where_anything_was(report, tmp_path):
    assert "Held before running" not in admin_letter(report).text + admin_letter(report).html
    held = admin_letter(read_report(open_ledger(write_held_ledger(tmp_path / "ledger.db")), DAY, "USD", "unallocated"))
    # by hand from HELD, per team, cluster, resource and GPU model, most costly first: carol's 8/6 + 8 x 35/6 = 48 H100
    # hours (3.20 + 112.00 USD, mostly ImagePullBackOff); alice's image pull; robotics' 4 + 2/3 core-h (0.048 + 0.008)
    text = [" ".join(line.split()) for line in held.text.splitlines()]
    start = text.index("HELD BEFORE RUNNING")
    # none of it charged, said once; the reasons in words; the total 115.20 + 1.20 + 0.056 + 0.008 = 116.464, the
    # rounded rows 116.47: a Rounding row of -0.01
    assert text[start + 1] == f"Held before running: {HELD_BEFORE_RUNNING_RULE}. {HELD_CHARGED[False]}"
    assert text[start + 2:start + 9] == [
        "Team Cluster Resource Held Cost Mostly",
        f"nlp jaguar GPU {H100} 48.00 GPU-h 115.20 USD image pull failing, retrying",
        f"robotics jaguar GPU {H100} 0.50 GPU-h 1.20 USD creating containers",
        "robotics jaguar CPU 4.67 core-h 0.06 USD creating containers",
        "vision jaguar CPU 0.67 core-h 0.01 USD init containers running",
        "Rounding -0.01 USD",
        "Total 116.46 USD",
    ]
    html = re.sub(r' (style|class)="[^"]*"', "", held.html)  # the letter's CSS is inlined
    assert "<h2>Held before running</h2>" in html
    assert (f"<tr><td>nlp</td><td>jaguar</td><td>GPU <span>{H100}</span></td><td>48.00 <span>GPU-h</span></td><td>115.20 USD</td>"
            "<td>image pull failing, retrying</td></tr>") in html
    assert ("<tr><td>Total</td><td></td><td></td><td></td><td>116.46 USD</td><td></td></tr>") in html


def test_subject_stays_one_line_whatever_the_team_name(tmp_path):
    rows = [("jaguar", "ns", "evil\r\nBcc: x@example.org", None, "cpu", "", 1.0, 1.0, 1.0)]
    ledger = open_ledger(write_ledger(tmp_path / "ledger.db", {DAY: rows}))
    letter = team_letter(read_report(ledger, DAY, "USD", "unallocated"), "evil\r\nBcc: x@example.org")
    assert letter.subject == "Cluster billing 2026-11-20: team evil Bcc: x@example.org 1.00 USD"


def test_unwritable_output_dir_is_one_clear_error(report, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RenderError, match="output_dir"):
        write_pages(report, blocker / "reports")


def test_admin_page_shows_capacity_and_whether_unrequested_was_charged(ledger, tmp_path):
    capacity = pd.DataFrame([
        # cluster, resource, gpu_model, pool, allocatable, requested, unrequested, unit_price, unrequested_cost
        ("jaguar", "gpu", H100, "", 192.0, 10.0, 182.0, 2.40, 436.80),
        ("jaguar", "cpu", "", "", 1536.0, 110.0, 1426.0, 0.012, 17.112),
        ("jaguar", "gpu", H100, "robotics-h100", 96.0, 24.0, 72.0, 2.40, 172.80),
        ("ibis", "gpu", "", "", 96.0, 4.0, 92.0, 2.95, 271.40),
    ], columns=frames.CAPACITY.columns)
    # ibis shares what was unrequested: its 92 unrequested GPU-h were charged to bob's namespace; robotics reserved a pool on jaguar
    rows = frame(ROWS[DAY] + [("ibis", "bob", "vision", "bob", "unrequested-gpu", "", 92.0, 2.95, 271.40),
                              ("jaguar", "pool:robotics-h100", "robotics", None, "reserved-gpu", H100, 96.0, 2.40, 230.40)])
    replace_day(ledger, DAY, DayBill(rows, capacity=capacity), "USD")
    report = read_report(ledger, DAY, "USD", "unallocated")
    write_pages(report, tmp_path / "out")
    page = read_page((tmp_path / "out" / DAY.isoformat() / "index.html").read_text())
    assert page.tables["capacity"] == [
        ["Cluster", "Resource", "Allocatable", "Requested", "Share requested", "Unrequested", "Unrequested at list price",
         "Charged"],
        ["ibis", "GPU (no model label)", "96.00 GPU-h", "4.00 GPU-h", "4.2 %", "92.00 GPU-h", "271.40 USD", "to teams"],
        ["jaguar", "CPU", "1,536.00 core-h", "110.00 core-h", "7.2 %", "1,426.00 core-h", "17.11 USD", "no"],
        ["jaguar", f"GPU {H100}", "192.00 GPU-h", "10.00 GPU-h", "5.2 %", "182.00 GPU-h", "436.80 USD", "no"],
        ["jaguar pool robotics-h100", f"GPU {H100}", "96.00 GPU-h", "24.00 GPU-h", "25.0 %", "72.00 GPU-h",
         "172.80 USD", "to robotics (reserved)"],
    ]
    vision = read_page((tmp_path / "out" / DAY.isoformat() / "teams" / "vision.html").read_text())
    assert ["ibis", "Unrequested capacity (shared), GPU", "92.00 GPU-h", "271.40 USD"] in vision.tables["team-usage"]
    assert vision.texts["explain-unrequested"].startswith("Unrequested capacity (shared): capacity that no pod requested")
    assert "explain-unrequested" not in read_page((tmp_path / "out" / DAY.isoformat() / "teams" / "robotics.html")
                                                  .read_text()).texts  # explained where it is billed


def test_discounts_of_priority_classes_are_shown(tmp_path):
    # alice: 10 H100-hours, list 24.00, half of them backfill at multiplier 0 -> 12.00; bob pays list price
    rows = {DAY: [("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.40, 12.00, 24.00),
                  ("ibis", "bob", "vision", "bob", "cpu", "", 100.0, 0.034, 3.40)]}
    report = read_report(open_ledger(write_ledger(tmp_path / "ledger.db", rows)), DAY, "USD", "unallocated")
    assert report.discount == pytest.approx(12.0) and report.team("vision").discount == 0.0
    write_pages(report, tmp_path / "out")
    folder = tmp_path / "out" / DAY.isoformat()
    robotics = read_page((folder / "teams" / "robotics.html").read_text())
    assert robotics.texts["discount"] == (
        f"Priority classes: 12.00 USD off the list price of 24.00 USD on {DAY} (pods of a priority class that pays less than the list price).")
    assert robotics.tables["team-usage"] == [["Cluster", "Resource", "Quantity", "Cost", "Discount"],
                                             ["jaguar", f"GPU {H100}", "10.00 GPU-h", "12.00 USD", "12.00 USD"],
                                             ["Total", "", "", "12.00 USD", "12.00 USD"]]
    vision = read_page((folder / "teams" / "vision.html").read_text())
    assert "discount" not in vision.texts and vision.tables["team-usage"][0] == ["Cluster", "Resource", "Quantity", "Cost"]
    admin = read_page((folder / "index.html").read_text())
    assert ["jaguar", "GPU", "10.00 GPU-h", "12.00 USD", "12.00 USD"] in admin.tables["usage"]
    assert "Priority classes: 12.00 USD off the list price of 24.00 USD" in team_letter(report, "robotics").text


def test_waste_per_person_on_the_team_page_and_in_the_leads_email(ledger, tmp_path):
    wasted = pd.DataFrame([
        ("jaguar", "alice", "robotics", "alice", 6.0, 20.0, 12.0),
        ("jaguar", "team-robotics", "robotics", None, 0.0, 5.0, None),  # no claim of it mounted
        ("ibis", "bob", "robotics", "bob", None, 3.5, 0.0),  # ibis has no DCGM exporter
        ("ibis", "bob", "vision", "bob", None, 3.5, 0.0),
    ], columns=frames.CHARGED_WASTE.columns)
    replace_day(ledger, DAY, DayBill(frame(ROWS[DAY]), wasted=wasted), "USD")
    report = read_report(ledger, DAY, "USD", "unallocated")
    write_pages(report, tmp_path / "out")
    team = read_page((tmp_path / "out" / DAY.isoformat() / "teams" / "robotics.html").read_text())
    assert team.tables["team-waste"] == [["Person", "GPU-h held unused", "CPU requested unused", "Storage claimed unused"],
                                         ["alice", "6.00 GPU-h", "20.00 core-h", "12.00 GiB-h"],
                                         ["(team namespaces)", "0.00 GPU-h", "5.00 core-h", "–"],
                                         ["bob", "–", "3.50 core-h", "0.00 GiB-h"]]
    admin = read_page((tmp_path / "out" / DAY.isoformat() / "index.html").read_text())
    assert admin.tables["waste"][1:] == [["robotics", "6.00 GPU-h", "28.50 core-h", "12.00 GiB-h"],
                                         ["vision", "–", "3.50 core-h", "0.00 GiB-h"]]
    text = team_letter(report, "robotics").text
    assert "HELD BUT UNUSED" in text and "alice" in text.split("HELD BUT UNUSED")[1].splitlines()[3]
    assert "Held but unused: GPUs that pods requested but left nearly unused" in text
    assert "6.00 GPU-h" in text and "20.00 core-h" in text and "12.00 GiB-h" in text
    # a team without waste rows has no such section
    assert "team-waste" not in read_page((tmp_path / "out" / DAY.isoformat() / "teams" / "platform.html").read_text()).tables


def test_text_tables_keep_their_columns_whatever_the_widths():
    rows = [["heron", "Reserved pool, GPU", "384.00 GPU-h", "230.40 CHF"], ["ibis", "GPU", "956.20 GPU-h", "3,280.31 CHF"]]
    assert text_table(rows, (2, 3)).splitlines() == [
        "heron  Reserved pool, GPU  384.00 GPU-h    230.40 CHF",
        "ibis   GPU                 956.20 GPU-h  3,280.31 CHF",
    ]


def test_text_trend_summarises_runs_of_days_never_run():
    days = [date(2026, 10, 20 + n) for n in range(12)]
    trend = [TrendDay(d, None) for d in days[:9]] + [TrendDay(days[9], 100.0), TrendDay(days[10], None),
                                                      TrendDay(days[11], 50.0)]
    assert trend_lines(trend, "CHF") == [
        "never run: 9 days, 2026-10-20 … 2026-10-28",
        "2026-10-29        100.00 CHF  " + "#" * 30,
        "never run: 1 day, 2026-10-30",
        "2026-10-31         50.00 CHF  " + "#" * 15,
    ]


def test_axis_labels_are_short_enough_for_a_phone():
    assert [axis_label(v, 20000) for v in (0, 10000, 20000, 12500)] == ["0", "10k", "20k", "12.5k"]
    assert [axis_label(v, 2500) for v in (0, 1250, 2500)] == ["0", "1,250", "2,500"]
    assert axis_label(0.5, 1) == "0.50"


def test_people_are_named_beside_their_uid():
    people = {"alice": "Alice Example", "bob": "bob"}
    assert person("alice", people) == "Alice Example (alice)"
    assert person("bob", people) == "bob" and person("carol", people) == "carol"
def test_what_changed_and_top_workloads_on_pages_and_in_emails(ledger, tmp_path):
    report = read_report(with_workload_costs(ledger), DAY, "USD", "unallocated")
    write_pages(report, tmp_path)
    admin = read_page((tmp_path / "2026-11-20" / "index.html").read_text())
    assert admin.tables["movers"][:3] == [
        ["Namespace", "Change", "2026-11-19", "2026-11-20"],
        ["alice on jaguar", "+13.20 USD", "12.00 USD", "25.20 USD"],
        ["bob on ibis", "+8.85 USD", "2.95 USD", "11.80 USD"],
    ]
    assert admin.tables["workload-movers"][1:3] == [
        ["Job/train-b in alice on jaguar", "+24.00 USD", "0.00 USD", "24.00 USD"],
        ["Job/train-a in alice on jaguar", "-12.00 USD", "12.00 USD", "0.00 USD"],
    ]
    team = read_page((tmp_path / "2026-11-20" / "teams" / "robotics.html").read_text())
    assert team.tables["movers"][2] == ["bob on ibis", "+5.90 USD", "0.00 USD", "5.90 USD"]
    assert team.tables["team-workloads"][1:3] == [["Job/train-b in alice on jaguar", "alice", "24.00 USD"],
                                                  ["Deployment/notebook in bob on ibis", "bob", "5.90 USD"]]
    text = team_letter(report, "robotics").text
    changed = text.split("WHAT CHANGED SINCE 2026-11-19")[1]
    assert changed.splitlines()[2].split() == ["jaguar/alice", "12.00", "USD", "25.20", "USD", "+13.20", "USD"]
    assert "Job/train-a in jaguar/alice" in changed and "-12.00 USD" in changed
    people = text.split("PEOPLE")[1].splitlines()
    assert [line.split()[:2] for line in people[1:4]] == [["alice", "25.20"], ["Job/train-b", "24.00"],
                                                         ["Deployment/jupyter", "1.20"]]
    assert "Job/train-a" in admin_letter(report).html and "Job/train-b" in team_letter(report, "robotics").html


def test_pages_say_when_the_day_before_never_ran(tmp_path):
    report = read_report(open_ledger(write_ledger(tmp_path / "l.db")), date(2026, 11, 19), "USD", "unallocated")
    write_pages(report, tmp_path)
    page = (tmp_path / "2026-11-19" / "index.html").read_text()
    assert "2026-11-18 was never run, so there is nothing to compare with." in page
    assert "movers" not in read_page(page).tables
    team = read_page((tmp_path / "2026-11-19" / "teams" / "robotics.html").read_text())
    assert "team-workloads" not in team.tables  # the day has no workload costs
    assert "2026-11-18 was never run" in admin_letter(report).text


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (rel, href)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.links.append((attrs.get("rel", ""), attrs["href"]))


def day_links(path) -> dict[str, str]:
    """rel (prev, next) -> href of a page's links to other days."""
    parser = _Anchors()
    parser.feed(path.read_text())
    return {rel: href for rel, href in parser.links if rel}


def test_pages_link_the_run_days_before_and_after_even_when_run_out_of_order(ledger, tmp_path):
    for day in (date(2026, 11, 1), DAY, date(2026, 11, 19)):  # November 19 billed after the 20th
        write_pages(read_report(ledger, day, "USD", "unallocated"), tmp_path)
    assert day_links(tmp_path / "2026-11-01" / "index.html") == {"next": "../2026-11-19/index.html"}
    assert day_links(tmp_path / "2026-11-19" / "index.html") == {"prev": "../2026-11-01/index.html",
                                                                 "next": "../2026-11-20/index.html"}
    assert day_links(tmp_path / "2026-11-20" / "index.html") == {"prev": "../2026-11-19/index.html"}
    # a team's page links to the team's page of those days, or to the day's page where the team had none
    assert day_links(tmp_path / "2026-11-19" / "teams" / "robotics.html") == {
        "prev": "../../2026-11-01/teams/robotics.html", "next": "../../2026-11-20/teams/robotics.html"}
    assert day_links(tmp_path / "2026-11-20" / "teams" / "platform.html") == {"prev": "../../2026-11-19/index.html"}
    for page in tmp_path.glob("2026-*/**/*.html"):  # every link leads to a page that is there
        assert all((page.parent / href).resolve().is_file() for href in day_links(page).values()), page


def test_archive_index_has_each_days_total_change_and_notes_by_month(ledger, tmp_path):
    note = "the directory could not be read (ldap.example.org: timed out); used the one of 2026-11-19"
    replace_day(ledger, DAY, DayBill(frame(ROWS[DAY]), coverage={"ibis": 0.9, "jaguar": 1.0}), "USD", directory_note=note)
    for day in (date(2026, 10, 25), DAY):  # the other days ran, but their pages are not in this folder
        write_pages(read_report(ledger, day, "USD", "unallocated"), tmp_path)
    page = read_page((tmp_path / "index.html").read_text())
    assert page.tables["month-2026-11"] == [
        ["Day", "Cost", "Change", "Notes"],
        ["2026-11-20 Fri", usd(DAY_TOTAL), usd(DAY_CHANGE), f"incomplete data on ibis; last known directory ({note})"],
        ["2026-11-19 Thu", "14.95 USD", "day before not run", "–"],  # November 18 never ran
        ["2026-11-10 Tue", "0.00 USD", "day before not run", "–"],  # run, nothing used
        ["2026-11-01 Sun", "12.00 USD", "day before not run", "–"],
        ["November", usd(MONTH_TOTAL), "", ""],
    ]
    assert page.tables["month-2026-10"][1:] == [["2026-10-25 Sun", "240.00 USD", "day before not run", "–"],
                                                ["October", "240.00 USD", "", ""]]
    assert list(page.tables) == ["month-2026-11", "month-2026-10"]  # newest first
    assert "on the 4 of 30 days that ran" in (tmp_path / "index.html").read_text()
    parser = _Anchors()
    parser.feed((tmp_path / "index.html").read_text())
    assert [href for _, href in parser.links] == ["2026-11-20/index.html", "2026-10-25/index.html"]


def test_two_writers_of_one_page_at_once_each_replace_it_whole(tmp_path):
    """Two runs of a day at once write the same pages. Each writer's partial file is its own: with one shared
    `.partial` name, the second `os.replace` found it already moved ("No such file or directory") and the run
    failed after the ledger was written."""
    page = tmp_path / "2026-11-16" / "index.html"
    start = threading.Barrier(2)
    failures: list[OSError] = []

    def write(text: str) -> None:
        start.wait()
        for _ in range(300):
            try:
                _write(page, text)
            except OSError as exc:
                failures.append(exc)
                return

    writers = [threading.Thread(target=write, args=(text,)) for text in ("first " * 2000, "second " * 2000)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert failures == []
    assert page.read_text() in ("first " * 2000, "second " * 2000)
    assert [path.name for path in page.parent.iterdir()] == ["index.html"]


def test_a_team_page_shows_service_units_beside_the_money(tmp_path):
    """docs/billing.md's recharge month, November 10: vision's lakes rows weigh 3,000 (300 H100-hours x 10), 200
    (2,000 core-hours x 0.1) and 0 SU (memory unweighed); ibis weighs none, so its rows' SU are empty. robotics'
    page: 10,000 + 1,234.56."""
    from billing.publish.answers import day_report
    from tests.helpers.recharge import IBIS, LAKES, recharge_month
    from tests.helpers.serve import web_config

    url = f"sqlite:///{tmp_path}/ledger.db"
    config = web_config(url).model_copy(update={"clusters": [LAKES, IBIS]})
    write_pages(day_report(recharge_month(url), config, date(2026, 11, 10)), tmp_path / "out")
    pages = tmp_path / "out" / "2026-11-10" / "teams"
    vision = read_page((pages / "vision.html").read_text()).tables["team-usage"]
    assert vision[0][-1] == "SU"
    assert {(row[0], row[1].split()[0], row[-1]) for row in vision[1:-1]} == {
        ("lakes", "GPU", "3,000.00"), ("lakes", "CPU", "200.00"), ("lakes", "Memory", "0.00"), ("ibis", "GPU", ""),
        ("ibis", "CPU", "")}
    assert vision[-1][0] == "Total" and vision[-1][-1] == "3,200.00"
    robotics = read_page((pages / "robotics.html").read_text()).tables["team-usage"]
    assert robotics[-1][-1] == "11,234.56"
