"""`billing mcp`'s tools as billing/web/tools.py answers them, asked directly for a viewer (through the MCP SDK's
client: tests/web/test_mcp.py).

The ledger is tests/helpers/report_ledger.py (figures worked out by hand there) with, for robotics, a share of the
GPUs nobody requested on 2026-11-19 and 20 (`unrequested-gpu` rows, 1 and 2 GPU-hours at 2.40) and the GPU
resource alice's pods held (nvidia_com_gpu, kept beside the rows as a night keeps it); carol leads robotics, root
is the admin (tests/helpers/serve.py).
"""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill
from billing.config import load_config
from billing.directory.people import Directory, Person, directory_to_json
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.publish.answers import allocation_statuses
from billing.web.access import viewer
from billing.web.tools import Tools
from tests.helpers.journals import WORKED, allocated  # noqa: F401 (a fixture)
from tests.helpers.report_ledger import DAY, H100, MISSING_IN_MONTH, ROWS, frame
from tests.helpers.serve import PEOPLE, TEAMS, serve_config

BEFORE = date(2026, 11, 19)
UNREQUESTED = {BEFORE: 1.0, DAY: 2.0}  # robotics' share of jaguar's unrequested GPU-hours, at 2.40
HELD = {BEFORE: 5.0, DAY: 10.0}  # alice's GPU-hours on jaguar, held as nvidia_com_gpu


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Tools:
    config = load_config(serve_config(tmp_path_factory.mktemp("tools"), changes={"budgets": {"monthly": {"robotics": 100}}}))
    ledger = open_ledger(config.database)
    directory = directory_to_json(Directory({uid: Person(uid, uid.title(), f"{uid}@example.org") for uid in PEOPLE}, TEAMS))
    for day in (BEFORE, DAY):
        hours = UNREQUESTED[day]
        rows = [*ROWS[day], ("jaguar", "alice", "robotics", "alice", "unrequested-gpu", H100, hours, 2.40, hours * 2.40)]
        held = pd.DataFrame([("jaguar", "alice", "robotics", "alice", "nvidia_com_gpu", H100, HELD[day], HELD[day],
                              HELD[day] * 2.40)], columns=frames.HOLDINGS.columns)
        replace_day(ledger, day, DayBill(frame(rows), held=held), "USD", snapshot=directory)
    return Tools(ledger, config)


def ask(tools: Tools, uid: str, name: str, **arguments) -> dict:
    return tools.answer(viewer(tools.ledger, uid, ["root"]), name, arguments)


def test_changes_give_hours_for_every_resource_in_the_ledgers_names(tools):
    found = ask(tools, "carol", "changes", team="robotics", before_first_day="2026-11-19", before_last_day="2026-11-19",
                after_first_day="2026-11-20", after_last_day="2026-11-20")
    by_resource = {row["resource"]: (row["hours_before"], row["hours_after"], round(row["cost_before"], 2),
                                     round(row["cost_after"], 2)) for row in found["by_resource"]}
    # by hand: gpu alice 5 h (12.00), then alice 10 h and bob's half 2 h (24.00 + 5.90); unrequested-gpu 1 h and
    # 2 h at 2.40; memory 1000 GiB-h (1.50) and cpu 100 core-h (1.20) on the 20th only
    assert by_resource == {"gpu": (5.0, 12.0, 12.00, 29.90), "unrequested-gpu": (1.0, 2.0, 2.40, 4.80),
                           "memory": (0.0, 1000.0, 0.00, 1.50), "cpu": (0.0, 100.0, 0.00, 1.20)}
    assert [row["resource"] for row in found["by_resource"]] == ["gpu", "unrequested-gpu", "memory", "cpu"]
    unrequested = found["by_resource"][1]
    assert round(unrequested["cost_per_hour_before"], 4) == round(unrequested["cost_per_hour_after"], 4) == 2.4


def test_budget_names_the_days_of_the_month_never_billed(tools):
    found = ask(tools, "carol", "budget", team="robotics", as_of="2026-11-20")
    # the 1st, 10th, 19th and 20th were run: the 2nd to 9th and 11th to 18th never were
    assert found["missing_days"] == [day.isoformat() for day in MISSING_IN_MONTH]
    later = ask(tools, "carol", "budget", team="robotics", as_of="2026-11-27")
    assert later["missing_days"] == [day.isoformat() for day in MISSING_IN_MONTH] + [
        f"2026-11-{day}" for day in range(21, 28)]


def test_costs_without_by_are_summed_per_namespace_or_per_team_for_everyone(tools):
    team = ask(tools, "carol", "costs", team="robotics", first_day="2026-11-01", last_day="2026-11-20")
    own = ask(tools, "alice", "costs", first_day="2026-11-01", last_day="2026-11-20")
    everyone = ask(tools, "root", "costs", first_day="2026-11-01", last_day="2026-11-20")
    # robotics: alice 12.00 + 24.00 + 1.20 + 2.40 + 4.80, team-robotics 12.00 + 1.50, bob 5.90
    assert {row["namespace"]: round(row["cost"], 2) for row in team["rows"]} == {
        "alice": 44.40, "team-robotics": 13.50, "bob": 5.90}
    assert {row["namespace"]: round(row["cost"], 2) for row in own["rows"]} == {"alice": 44.40}
    # an assistant that sends null for an argument it leaves out
    assert ask(tools, "alice", "costs", first_day="2026-11-01", last_day="2026-11-20", by=None, team=None) == own
    # every team: robotics 63.80; vision 2.95 + 5.90; unallocated 1.70; platform 0.12
    assert {row["team"]: round(row["cost"], 2) for row in everyone["rows"]} == {
        "robotics": 63.80, "vision": 8.85, "unallocated": 1.70, "platform": 0.12}
    rows = ask(tools, "alice", "costs", first_day="2026-11-20", last_day="2026-11-20", by="rows")
    assert [(row["resource"], row["quantity"]) for row in rows["rows"]] == [
        ("cpu", 100.0), ("gpu", 10.0), ("unrequested-gpu", 2.0)]


def test_the_statement_tool_shows_an_open_months_service_units_subsidies_and_credits(tmp_path):
    """docs/billing.md's recharge month, open: the MCP statement has the lines of `billing statement` with the
    config's credits (robotics 1,011.1104, vision 0), and each charge line's SU."""
    from tests.helpers.recharge import CREDITS, IBIS, LAKES, recharge_month

    config = load_config(serve_config(tmp_path)).model_copy(update={"clusters": [LAKES, IBIS], "credits": CREDITS})
    found = Tools(recharge_month(config.database), config).answer(viewer(open_ledger(config.database), "root",
                                                                         ["root"]), "statement", {"month": "2026-11"})
    assert {team["team"]: round(team["total"], 6) for team in found["teams"]} == {"robotics": 1011.1104, "vision": 0.0}
    robotics = found["teams"][0]["lines"]
    assert [(line["kind"], round(line["amount"], 4), line["service_units"] and round(line["service_units"], 6))
            for line in robotics] == [("charge", 148.1472, 1234.56), ("charge", 1200.0, 10000.0),
                                      ("subsidy", -337.0368, None)]


def test_budget_gives_the_team_s_allocations_as_its_page_does(allocated, tmp_path):
    """docs/billing.md's worked month: NIH-R01's 80.00 exhausted on the 20th, 4.08 used beyond it by then."""
    url = str(allocated.url)
    config = load_config(serve_config(tmp_path, database=url, changes={
        "accounts": WORKED.model_dump(by_alias=True, mode="json", exclude_defaults=True),
        "allocations": [{"account": "NIH-R01", "from": "2026-11-01", "to": "2027-10-31", "amount": 80.0}]}))
    found = ask(Tools(open_ledger(url), config), "root", "budget", team="vision", as_of="2026-11-20")
    assert found["allocations"] == [{
        "account": "NIH-R01", "from": "2026-11-01", "to": "2027-10-31", "unit": "USD", "amount": 80.0, "drawn": 80.0,
        "drawn_this_month": 80.0, "balance": 0.0, "overage": 4.08, "overage_policy": "charge", "percent_drawn": 100.0,
        "teams": ["vision"], "as_of": "2026-11-20"}]
    assert ask(Tools(open_ledger(url), config), "root", "budget", team="nlp", as_of="2026-11-20")["allocations"] == []
    # October 2027 is its last month; from November on it is gone from the pages, the summaries and the tool
    october = allocation_statuses(open_ledger(url), config, date(2027, 10, 31), "vision")
    assert [(status.drawn, status.drawn_in_month, status.balance) for status in october] == [(80.0, 0.0, 0.0)]
    assert allocation_statuses(open_ledger(url), config, date(2027, 11, 1), "vision") == []
