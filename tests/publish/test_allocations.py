"""Prepaid allocations (docs/spec.md "Allocations"): docs/billing.md's worked month, an allocation of NIH-R01
exhausted on the 20th, by hand (balances, thresholds, the statement and the journal); a night run twice drawing
once; a night re-run before later ones moving their draws; `overage: show`; and the invariant that a month's draws
add up to min(allocation, use) whatever the order nights are run in (Hypothesis)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.allocations import Allocation, draws
from billing.charge.allocations import allocation_use
from billing.charge.bill import DayBill
from billing.ledger.allocations import allocation_draws_between
from billing.ledger.write import replace_day
from billing.money import cents, total
from billing.notify.letters import admin_letter, team_letter
from billing.publish.allocations import statuses
from billing.publish.pages import write_pages
from billing.publish.statement import MonthRules, build_statement, close_month
from billing.publish.statement_formats import FORMATS, describe
from tests.helpers.day_reports import report  # noqa: F401 (a pytest fixture)
from tests.helpers.journals import (  # noqa: F401 (allocated: a fixture)
    NIH_80,
    NOVEMBER,
    TODAY_DONE,
    WORKED,
    allocated,
    allocated_close_scenario,
)
from tests.helpers.ledgers import new_ledger
from tests.helpers.report_ledger import frame
from tests.helpers.statements import NOV, write_month

SHOWN = Allocation("NIH-R01", NOV, date(2027, 10, 31), 80.0, "USD", overage="show")


def _status(engine, day: date, allocation: Allocation = NIH_80):
    return statuses(allocation_draws_between(engine, NOV, day), (allocation,), day)[0]


def test_the_worked_month_draws_by_hand_and_is_exhausted_on_the_20th(allocated):
    # 4.204 a night: after the 9th 37.836 (47.3 %), the 10th 42.04 crosses 50 %, the 16th 67.264 crosses 80 %,
    # the 19th 79.876, and the 20th draws the 0.124 left: 80.00, 100 %
    by_hand = {9: ("37.84", "42.16", "0.00"), 10: ("42.04", "37.96", "0.00"), 16: ("67.26", "12.74", "0.00"),
               19: ("79.88", "0.12", "0.00"), 20: ("80.00", "0.00", "4.08"), 30: ("80.00", "0.00", "46.12")}
    for day, (drawn, left, overage) in by_hand.items():
        status = _status(allocated, NOV.replace(day=day))
        assert (cents(status.drawn), cents(status.balance), cents(status.overage)) == tuple(map(Decimal, (
            drawn, left, overage))), day
    assert [_status(allocated, NOV.replace(day=day)).percent_drawn >= 50 for day in (9, 10)] == [False, True]
    assert [_status(allocated, NOV.replace(day=day)).percent_drawn >= 80 for day in (15, 16)] == [False, True]
    assert _status(allocated, date(2026, 11, 20)).teams == ("vision",)
    nights = allocation_draws_between(allocated, NOV, date(2026, 11, 30)).set_index("day")["drawn"]
    assert cents(nights[date(2026, 11, 20)]) == Decimal("0.12") and nights[date(2026, 11, 21)] == 0


def test_the_worked_month_s_statement_and_journal_take_off_what_the_allocation_paid(tmp_path):
    allocated_close_scenario(f"sqlite:///{tmp_path}/ledger.db", tmp_path)


def test_overage_shown_only_is_taken_off_too(tmp_path):
    engine = new_ledger(f"sqlite:///{tmp_path}/ledger.db")
    write_month(engine, NOV, NOVEMBER, WORKED.accounts(), (SHOWN,))
    statement = build_statement(engine, NOV, "USD", {}, rules=MonthRules(allocations=(SHOWN,)))
    taken = {describe(line): cents(line.amount) for line in statement.lines if line.kind in ("allocation", "overage")}
    # NIH-R01's 126.12 of the month: 80.00 prepaid, 46.12 beyond it shown and not charged
    assert taken == {"Allocation drawn, NIH-R01": Decimal("-80.00"), "Overage not charged, NIH-R01": Decimal("-46.12")}
    assert cents(statement.total) == Decimal("191.18")
    engine.dispose()


def _night(engine, day: date, rows: list[tuple], allocation: Allocation = NIH_80) -> None:
    charged = frame(rows)
    replace_day(engine, day, DayBill(charged), "USD", allocation_use=allocation_use(
        charged, day, WORKED.accounts(), (allocation,), ()), allocations=(allocation,))


def test_a_night_run_twice_draws_once_and_a_night_run_again_moves_the_later_draws(allocated):
    _night(allocated, date(2026, 11, 5), NOVEMBER[date(2026, 11, 5)])
    assert cents(_status(allocated, date(2026, 11, 30)).drawn) == Decimal("80.00")
    assert cents(_status(allocated, date(2026, 11, 19)).drawn) == Decimal("79.88")
    # the 5th run again with vision's GPUs doubled: NIH's part is 4.204 + 4.004; the allocation is exhausted a day
    # earlier (after the 18th 75.672 + 4.004 = 79.676, the 19th draws 0.324 of its 4.204)
    doubled = NOVEMBER[date(2026, 11, 5)] + [("jaguar", "scan-2", "vision", "alice", "gpu", "", 5.005, 2.00, 10.01)]
    _night(allocated, date(2026, 11, 5), doubled)
    nights = allocation_draws_between(allocated, NOV, date(2026, 11, 30)).groupby("day")["drawn"].sum()
    assert cents(nights[date(2026, 11, 5)]) == Decimal("8.21")
    assert cents(nights[date(2026, 11, 19)]) == Decimal("0.32") and nights[date(2026, 11, 20)] == 0
    assert cents(total(nights)) == Decimal("80.00")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(uses=st.lists(st.decimals(min_value=Decimal("-5"), max_value=Decimal(30), places=2).map(float),
                     min_size=1, max_size=12),
       amount=st.decimals(min_value=Decimal("0.01"), max_value=Decimal(200), places=2).map(float),
       order=st.randoms(use_true_random=False), overage=st.sampled_from(["charge", "show"]))
def test_a_month_s_draws_add_up_to_the_allocation_or_the_use_whatever_the_order_nights_run(
        tmp_path_factory, uses, amount, order, overage):
    """vision on the account NIH-R01 alone for 100 %: each night's cost its use. Run in a random order, then
    re-run, the draws add up to min(allocation, the uses above 0); the statement's allocation lines take off what
    was drawn, and with overage shown only, the rest of the use too."""
    allocation = Allocation("NIH-R01", NOV, date(2026, 11, 30), amount, "USD", overage=overage)
    engine = new_ledger(f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db")
    nights = {NOV + timedelta(days=n): [("jaguar", "scan", "robotics", None, "cpu", "", 1.0, use, use)]
              for n, use in enumerate(uses)}
    accounts = _robotics_on_nih()
    days = list(nights)
    order.shuffle(days)
    for day in days + days[:2]:
        charged = frame(nights[day])
        replace_day(engine, day, DayBill(charged), "USD", allocation_use=allocation_use(
            charged, day, accounts, (allocation,), ()), allocations=(allocation,))
    used = total(max(use, 0.0) for use in uses)
    drawn = allocation_draws_between(engine, NOV, date(2026, 11, 30))
    assert total(drawn["drawn"]) == pytest.approx(min(amount, used), abs=1e-9)
    assert list(drawn.sort_values("day")["drawn"]) == pytest.approx(draws(amount, [u for u in uses if u > 0]))
    statement = build_statement(engine, NOV, "USD", {}, rules=MonthRules(allocations=(allocation,)))
    taken = total(line.amount for line in statement.lines if line.kind in ("allocation", "overage"))
    assert taken == pytest.approx(-(used if overage == "show" else min(amount, used)), abs=1e-6)
    engine.dispose()


def _robotics_on_nih():
    from tests.helpers.journals import section

    return section({"team": "robotics", "account": "NIH-R01", "from": "2026-11-01"}).accounts()


def test_the_balance_on_the_team_s_page_and_in_its_leads_and_the_admins_summaries(allocated, report, tmp_path):
    """The worked month's allocation as of November 20 on vision's page and summary, and the admins', with the
    figures worked out by hand above; robotics, which neither drew on it nor holds NIH-R01, shows none."""
    told = replace(report, allocations=(_status(allocated, date(2026, 11, 20)),))
    line = ("NIH-R01 2026-11-01 to 2027-10-31: 80.00 USD of 80.00 USD drawn (100.0 %), balance 0.00 USD, overage "
            "4.08 USD (charged)")
    assert line in team_letter(told, "vision").text and line in admin_letter(told).text
    assert "ALLOCATIONS" not in team_letter(told, "robotics").text
    write_pages(told, tmp_path)
    page = (tmp_path / f"{report.day}" / "teams" / "vision.html").read_text()
    assert 'id="allocations"' in page and "4.08 USD (charged)" in page and "100.0&nbsp;%" in page
    assert 'id="allocations"' not in (tmp_path / f"{report.day}" / "teams" / "robotics.html").read_text()
    assert 'id="allocations"' in (tmp_path / f"{report.day}" / "index.html").read_text()


def test_the_statement_shows_the_allocation_s_balance_at_the_month_s_end_open_or_closed(allocated, tmp_path):
    rules = MonthRules(allocations=(NIH_80,))
    close_month(allocated, NOV, "finance", TODAY_DONE, "USD", {}, rules=rules)
    for team in (None, "vision"):
        statement = build_statement(allocated, NOV, "USD", {}, team, TODAY_DONE, rules)
        document = json.loads(FORMATS["json"](statement))
        assert [(a["account"], a["drawn_this_month"], a["balance"], a["overage"]) for a in document["allocations"]] == [
            ("NIH-R01", 80.0, 0.0, 46.12)]
        assert 'id="allocations"' in FORMATS["html"](statement) and "46.12 USD (charged)" in FORMATS["html"](statement)
    assert build_statement(allocated, NOV, "USD", {}, "nlp", TODAY_DONE, rules).allocations == ()
