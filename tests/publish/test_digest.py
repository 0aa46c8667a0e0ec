"""The personal digest: which days a run reports to each person, and their figures from the ledger.

Figures by hand from tests/helpers/report_ledger.py.
"""

from __future__ import annotations

import re
from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.notify.letters import person_letter
from billing.publish.answers import personal_digests
from billing.publish.digest import digest_period
from billing.publish.formatting import HELD_BEFORE_RUNNING_RULE, HELD_CHARGED
from tests.helpers.report_ledger import DAY, H100, ROWS, frame, write_held_ledger, write_ledger
from tests.helpers.workload_ledger import FIRST, LAST, fill

URL = "https://billing.example.org/me"


@pytest.mark.parametrize("day, personal, period", [
    (date(2026, 11, 20), "daily", (date(2026, 11, 20), date(2026, 11, 20))),
    (date(2026, 11, 22), "weekly", (date(2026, 11, 16), date(2026, 11, 22))),  # a Sunday: Monday to Sunday
    (date(2026, 11, 20), "weekly", None),  # a Friday
    (date(2026, 11, 22), "off", None),
])
def test_the_period_of_a_runs_digest(day, personal, period):
    assert digest_period(day, personal) == period


@pytest.fixture
def ledger(tmp_path):
    engine = open_ledger(write_ledger(tmp_path / "ledger.db"))
    wasted = pd.DataFrame([("jaguar", "alice", "robotics", "alice", 3.5, None, None)], columns=frames.CHARGED_WASTE.columns)
    replace_day(engine, DAY, DayBill(frame(ROWS[DAY]), wasted=wasted), "USD")
    return engine


def test_each_person_with_costs_gets_their_share(ledger):
    digests = {d.uid: d for d in personal_digests(ledger, date(2026, 11, 19), DAY, "USD", URL)}
    assert sorted(digests) == ["alice", "bob"]  # team namespaces have no owner
    alice, bob = digests["alice"], digests["bob"]
    assert alice.cost == pytest.approx(37.20)  # 12.00 (Nov 19) + 24.00 + 1.20 (Nov 20)
    assert alice.month_to_date == pytest.approx(37.20)
    assert [(r["cluster"], r["namespace"], round(r["cost"], 2)) for r in alice.by_namespace] == [("jaguar", "alice", 37.20)]
    assert (alice.idle_gpu_hours, alice.unused_cpu_core_hours, alice.unused_storage_gib_hours) == (3.5, None, None)
    assert bob.cost == pytest.approx(14.75)  # 2.95 + both halves of 11.80 (his two teams)
    assert (bob.idle_gpu_hours, bob.missing_days) == (None, [])


def test_a_period_without_costs_has_no_digests_and_never_billed_days_are_named(ledger):
    assert personal_digests(ledger, date(2026, 11, 10), date(2026, 11, 10), "USD", URL) == []
    (alice,) = [d for d in personal_digests(ledger, date(2026, 11, 16), DAY, "USD", URL) if d.uid == "alice"]
    assert alice.missing_days == [date(2026, 11, d) for d in (16, 17, 18)]


def test_the_letter_says_what_was_spent_and_idle_and_links_to_billing_serve(ledger):
    (alice,) = [d for d in personal_digests(ledger, date(2026, 11, 19), DAY, "USD", URL) if d.uid == "alice"]
    letter = person_letter(alice)
    assert letter.subject == "Your cluster costs 2026-11-19 to 2026-11-20: 37.20 USD"
    for body in (letter.text, letter.html):
        assert "37.20 USD" in body and "3.50 GPU-h" in body and URL in body
    assert f'href="{URL}"' in letter.html


def test_the_most_expensive_workloads_are_each_persons_share(tmp_path):
    engine = open_ledger(f"sqlite:///{tmp_path / 'workloads.db'}")
    fill(engine)
    digests = {d.uid: d for d in personal_digests(engine, FIRST, LAST, "USD", URL)}
    alice, bob = digests["alice"], digests["bob"]
    # by hand from tests/helpers/workload_ledger.py; Nov 2 (12.00) was not broken down, so it is in no workload
    assert [(r["workload"], round(r["cost"], 2)) for r in alice.top_workloads] == [
        ("Job/train-a", 15.12), ("Deployment/notebook", 10.08), ("CronJob/nightly", 2.40)]
    assert [(r["cluster"], r["namespace"], r["workload"], round(r["cost"], 2)) for r in bob.top_workloads] == [
        ("ibis", "bob", "StatefulSet/db", 11.80)]  # both halves: his robotics and vision shares
    letter = person_letter(alice)
    assert "YOUR MOST EXPENSIVE WORKLOADS" in letter.text and "Job/train-a" in letter.text
    html = re.sub(r' style="[^"]*"', "", letter.html)  # the letter's CSS is inlined
    assert '<td>Job/train-a</td><td>alice</td><td class="num">15.12 USD</td>' in html


def test_a_person_without_workload_rows_gets_no_workload_table(ledger):
    (alice,) = [d for d in personal_digests(ledger, date(2026, 11, 19), DAY, "USD", URL) if d.uid == "alice"]
    assert alice.top_workloads == []
    letter = person_letter(alice)
    assert "WORKLOADS" not in letter.text and "workloads" not in letter.html


def test_the_letter_says_what_the_person_held_before_running_where_they_did(ledger, tmp_path):
    (before,) = [d for d in personal_digests(ledger, DAY, DAY, "USD", URL) if d.uid == "alice"]
    assert "Held before running" not in person_letter(before).text + person_letter(before).html
    digests = {d.uid: d for d in personal_digests(open_ledger(write_held_ledger(tmp_path / "held.db")), DAY, DAY, "USD", URL)}
    # by hand from HELD: alice's image pull; bob's init container, both his teams' halves (carol has no costs: no digest)
    assert [(r["cluster"], r["resource"], r["gpu_model"], r["quantity"], r["cost"], r["reason"], r["charged"])
            for r in digests["alice"].held_before_running] == [
        ("jaguar", "gpu", H100, 0.5, pytest.approx(1.20), "ContainerCreating", False),
        ("jaguar", "cpu", "", 4.0, pytest.approx(0.048), "ContainerCreating", False)]
    assert [(r["resource"], r["quantity"], r["cost"], r["reason"]) for r in digests["bob"].held_before_running] == [
        ("cpu", pytest.approx(4 / 3), pytest.approx(0.016), "InitContainersRunning")]
    letter = person_letter(digests["bob"])
    text = [" ".join(line.split()) for line in letter.text.splitlines()]
    start = text.index("HELD BEFORE RUNNING")
    assert text[start + 1:start + 5] == [f"Held before running: {HELD_BEFORE_RUNNING_RULE}. {HELD_CHARGED[False]}",
                                         "Cluster Resource Held Cost Mostly",
                                         "jaguar CPU 1.33 core-h 0.02 USD init containers running",
                                         "Total 0.02 USD"]
    html = re.sub(r' (style|class)="[^"]*"', "", letter.html)  # the letter's CSS is inlined
    assert ("<tr><td>jaguar</td><td>CPU</td><td>1.33 <span>core-h</span></td><td>0.02 USD</td><td>init containers running</td>"
            "</tr>") in html
    assert "<tr><td></td><td>Total</td><td></td><td>0.02 USD</td><td></td></tr>" in html
