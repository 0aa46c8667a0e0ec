"""Budgets: the forecast, where budgets come from, and alerts once per threshold and month.

The job tests bill 21.00 USD a day to team robotics (10 GPU-h at 2.00 and
100 core-h at 0.01, from tests/jobs/test_run_reports.py), against a budget of 50.00
with alerts at 50 % and 100 %: November 1 42 %, November 2 84 % (crosses 50 %),
November 3 126 % (crosses 100 %).
"""

from __future__ import annotations

from datetime import date
from email import message_from_bytes, policy
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from billing.cli import main
from billing.config import BudgetsConfig, DirectoryConfig, load_config
from billing.directory.people import read_ldif
from billing.ledger.database import fetch, open_ledger
from billing.ledger.tables import budget_alerts
from billing.publish.budgets import budget_status, team_budgets
from tests.helpers.budgets import A_DAY, billed_month, budget_job, run  # noqa: F401 (pytest fixtures)
from tests.helpers.html_tables import read_page
from tests.helpers.jobs import LDIF
from tests.helpers.report_ledger import write_ledger


def test_forecast_is_month_to_date_plus_the_mean_of_the_last_7_billed_days_times_the_days_not_billed_yet():
    # November 20, billing since November 1. Billed: the 1st 100, the 13th 60, the 14th-20th 10, 20, never run
    # (16th), 30, 40, 0 (run, nothing used), 50. The last 7 billed days: 13, 14, 15, 17, 18, 19, 20: 210 / 7 = 30.
    # Month to date 100 + 60 + 150 = 310. Not billed yet: 30 days less the 8 billed = 22 (the 10 after the 20th
    # and the 12 nights that never ran, which a backfill bills later). 310 + 22 x 30 = 970.
    daily = {date(2026, 11, 1): 100.0, date(2026, 11, 13): 60.0, date(2026, 11, 14): 10.0, date(2026, 11, 15): 20.0,
             date(2026, 11, 17): 30.0, date(2026, 11, 18): 40.0, date(2026, 11, 20): 50.0}
    runs = set(daily) | {date(2026, 11, 19)}
    status = budget_status("robotics", 1000.0, date(2026, 11, 20), daily, runs, since=date(2026, 11, 1))
    assert (status.month_to_date, status.forecast, status.days_left) == (310.0, 970.0, 22)
    assert (status.used, status.forecast_share) == (0.31, 0.97)
    # a lab that began billing on the 13th: the 1st is its only earlier day (a backfill), the 2nd-12th are none
    # of its days; not billed yet: the 16th and the 10 after the 20th, 11; 310 + 11 x 30 = 640
    later = budget_status("robotics", 1000.0, date(2026, 11, 20), daily, runs, since=date(2026, 11, 13))
    assert (later.forecast, later.days_left) == (640.0, 11)
    # the same as of the 25th, nothing run since the 20th: the same days are not billed yet, the same forecast
    assert budget_status("robotics", 1000.0, date(2026, 11, 25), daily, runs, since=date(2026, 11, 1)) == \
        type(status)("robotics", date(2026, 11, 25), 1000.0, 310.0, 970.0, 22)
    assert budget_status("t", 10.0, date(2026, 2, 27), {}, set()).forecast == 0.0  # nothing billed: no rate
    february = {date(2026, 2, day): 3.0 for day in range(1, 29)}
    assert budget_status("t", 10.0, date(2026, 2, 28), february, set(february)).forecast == 84.0  # nothing left


def test_config_budgets_override_the_directory_attribute(tmp_path):
    ldif = tmp_path / "directory.ldif"
    ldif.write_text(LDIF + "departmentNumber: 1200.50\n\ndn: cn=vision,ou=teams,dc=example,dc=org\n"
                    "objectClass: groupOfNames\ncn: vision\ndepartmentNumber: lots\n"
                    "member: uid=alice,ou=people,dc=example,dc=org\n")
    config = DirectoryConfig(ldif=str(ldif), teams={"budget_attribute": "departmentNumber",
                                                    "cost_center_attribute": "departmentNumber"})
    directory = read_ldif(ldif, config)
    assert (directory.teams["robotics"].budget, directory.teams["vision"].budget) == (1200.5, None)  # 'lots': none
    assert directory.teams["vision"].cost_center == "lots"
    assert team_budgets(BudgetsConfig(), directory) == {"robotics": 1200.5}
    assert team_budgets(BudgetsConfig(monthly={"robotics": 50, "ml": 7}), directory) == {"robotics": 50.0, "ml": 7.0}


def alerts_in(outbox: Path) -> list[tuple[str, str]]:
    """(To, Subject) of the budget alerts in the outbox, which is emptied."""
    found = []
    for path in sorted(outbox.glob("*.eml")):
        message = message_from_bytes(path.read_bytes(), policy=policy.default)
        if message["Subject"].startswith("Budget alert"):
            found.append((message["To"], message["Subject"]))
        path.unlink()
    return sorted(found)


def recorded(tmp_path: Path) -> list[tuple]:
    rows = fetch(open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}"), budget_alerts.select())
    return sorted((r["team"], r["threshold"], r["day"], round(r["spent"], 2)) for r in rows)


def test_a_threshold_alerts_once_across_reruns_and_a_backfill(budget_job, tmp_path):
    # November 1 as the job bills it, 21.00 of 50.00 (42 %); the nights after it through the commands
    # (tests/integration/test_budget_alerts_smtp.py runs the whole backfill twice against a real SMTP server)
    config, outbox = budget_job(), tmp_path / "outbox"
    write_ledger(tmp_path / "ledger.db", {date(2026, 11, 1): A_DAY})
    run(config, "run", "--date", "2026-11-02")  # 42.00: 84 %, only 50 % is crossed
    half = "Budget alert: robotics has spent 84.0% of its November 2026 budget"
    assert alerts_in(outbox) == [("alice@example.org", half), ("infra@example.org", half)]
    run(config, "run", "--date", "2026-11-02")
    assert alerts_in(outbox) == []
    run(config, "backfill", "--from", "2026-11-02", "--to", "2026-11-03")  # 63.00: 126 %, only 100 % is new
    whole = "Budget alert: robotics has spent 126.0% of its November 2026 budget"
    assert alerts_in(outbox) == [("alice@example.org", whole), ("infra@example.org", whole)]
    assert recorded(tmp_path) == [("robotics", 0.5, date(2026, 11, 2), 42.0), ("robotics", 1.0, date(2026, 11, 3), 63.0)]


def test_an_alert_compares_the_month_to_date_of_its_day_as_the_pages_show_it(budget_job, tmp_path):
    """Issue 52: alerts summed the whole month themselves, so a re-run of November 2 with November 3 billed already
    alerted at 126 % where the day's pages read 42.00 of 50.00 (84.0 %); and the subject said 84% where the body said
    83.6%. By hand: November 1 and 3 billed (21.00 each), the run of November 2 bills 21.00: 42.00 to November 2,
    84.0 % in the subject and the body alike, and only 50 % is crossed."""
    config, outbox = budget_job(), tmp_path / "outbox"
    write_ledger(tmp_path / "ledger.db", {date(2026, 11, 1): A_DAY, date(2026, 11, 3): A_DAY})
    run(config, "run", "--date", "2026-11-02")
    messages = [message_from_bytes(path.read_bytes(), policy=policy.default) for path in sorted(outbox.glob("*budget*"))]
    assert {message["Subject"] for message in messages} == {
        "Budget alert: robotics has spent 84.0% of its November 2026 budget"}
    body = messages[0].get_body(("plain",)).get_content()
    assert "has spent 42.00 USD of its November 2026 budget of 50.00 USD (84.0%), crossing 50%" in body
    assert recorded(tmp_path) == [("robotics", 0.5, date(2026, 11, 2), 42.0)]


def test_the_team_page_and_email_show_budget_and_forecast(budget_job, tmp_path):
    config = budget_job()
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-02", "--email")
    # as of November 2: 42.00 of 50.00 (84.0 %); billed days among the last 7: November 1 and 2, 21.00 a day;
    # 28 days left: 42.00 + 28 x 21.00 = 630.00 (1260.0 % of the budget)
    page = read_page((tmp_path / "reports" / "2026-11-02" / "teams" / "robotics.html").read_text())
    assert (page.texts["budget-amount"], page.texts["budget-spent"], page.texts["budget-forecast"]) == (
        "50.00 USD", "42.00 USD", "630.00 USD")
    text = next(p for p in (tmp_path / "outbox").glob("2026-11-02-team-robotics-*.eml"))
    body = message_from_bytes(text.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
    assert "Budget November 2026: 50.00 USD, 84.0 % spent" in body
    assert "Forecast for November 30: 630.00 USD (1260.0 % of the budget)" in body
    assert "month to date + the mean daily cost of the last 7 billed days" in body  # the method, stated
    admin = (tmp_path / "reports" / "2026-11-02" / "index.html").read_text()
    assert "Budgets for November 2026" in admin and "1260.0&nbsp;%" in admin


def test_teams_without_a_budget_show_no_budget(budget_job, tmp_path):
    config = budget_job()
    settings = yaml.safe_load(Path(config).read_text())
    settings["budgets"] = {"monthly": {"vision": 10}}
    Path(config).write_text(yaml.safe_dump(settings))
    with (tmp_path / "directory.ldif").open("a") as directory:  # a budget names a team of the directory
        directory.write("\ndn: cn=vision,ou=teams,dc=example,dc=org\nobjectClass: groupOfNames\ncn: vision\n")
    run(config, "run", "--date", "2026-11-02")
    assert "budget" not in (tmp_path / "reports" / "2026-11-02" / "teams" / "robotics.html").read_text().lower()
    assert "Budgets for" not in (tmp_path / "reports" / "2026-11-02" / "index.html").read_text()


def test_an_alert_no_one_received_is_sent_by_the_next_run(budget_job, tmp_path):
    write_ledger(tmp_path / "ledger.db", {date(2026, 11, 1): A_DAY})  # as the job bills it: 42 %
    unreachable = budget_job(outbox_dir="", smtp_host="127.0.0.1", smtp_port=9, starttls=False)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-02", "--config", unreachable])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert [r[:2] for r in recorded(tmp_path)] == [("robotics", 0.5)]  # recorded, owed to both recipients
    run(budget_job(outbox_dir=str(tmp_path / "outbox")), "run", "--date", "2026-11-02")
    assert len(alerts_in(tmp_path / "outbox")) == 2
    run(budget_job(outbox_dir=str(tmp_path / "outbox")), "run", "--date", "2026-11-02")
    assert alerts_in(tmp_path / "outbox") == []


def test_a_closed_month_sends_no_alert(budget_job, tmp_path):
    config = budget_job()
    billed_month(tmp_path / "ledger.db", date(2026, 10, 1))  # 31 x 21.00 = 651.00 of 50.00, no alert sent yet
    run(config, "close", "--month", "2026-10", "--by", "test")
    run(config, "run", "--date", "2026-10-31")
    assert alerts_in(tmp_path / "outbox") == []


@pytest.mark.parametrize(("budgets", "sentence"), [
    ({"monthly": {"robotics": -5}}, "budgets.monthly.robotics: Input should be greater than 0"),
    ({"monthly": {"robotics": True}}, "budgets.monthly.robotics: expected a number, got true"),
    ({"monthly": {"robotics": 1e308}}, "budgets.monthly.robotics: Input should be less than 1000000000000"),
    ({"alert_at": [0.8, "soon"]}, "budgets.alert_at[1]: Input should be a valid number"),
    ({"montly": {}}, "budgets.montly: unknown key"),
])
def test_bad_budget_keys_are_named(write_config, budgets, sentence):
    result = CliRunner().invoke(main, ["report", "--all-teams", "--config", str(write_config(budgets=budgets))])
    assert result.exit_code == 2 and sentence in result.output, result.output


def test_alert_at_is_sorted_without_repeats(write_config):
    assert load_config(write_config(budgets={"alert_at": [1.0, 0.5, 1.0]})).budgets.alert_at == [0.5, 1.0]
