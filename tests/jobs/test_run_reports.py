"""`billing run` and `billing render`: reports and emails come after the ledger, from the ledger."""

from email import message_from_bytes, policy

import pytest
from click.testing import CliRunner

from billing.cli import main
from fixtures.servers import free_port
from tests.helpers.html_tables import read_page
from tests.helpers.jobs import config  # noqa: F401 (pytest fixtures)


def test_run_writes_ledger_then_reports_then_outbox(config, tmp_path):
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config()])
    assert result.exit_code == 0, result.output
    page = read_page((tmp_path / "reports" / "2026-11-20" / "index.html").read_text())
    assert page.texts["day-total"] == "21.00 USD"
    assert (tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").exists()
    assert "2026-11-20/index.html" in (tmp_path / "reports" / "index.html").read_text()
    mails = {p.name: message_from_bytes(p.read_bytes(), policy=policy.default) for p in (tmp_path / "outbox").iterdir()}
    assert sorted((m["To"], m["Subject"]) for m in mails.values()) == [
        ("alice@example.org", "Cluster billing 2026-11-20: team robotics 21.00 USD"),
        ("infra@example.org", "Cluster billing 2026-11-20: all teams 21.00 USD"),
    ]


def test_failed_email_gives_exit_1_after_the_ledger_and_reports_are_written(config, tmp_path):
    port = free_port()  # nobody listens there when the test sends
    path = config(outbox_dir="", smtp_host="127.0.0.1", smtp_port=port, starttls=False)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", path])
    assert result.exit_code == 1
    assert "2 summary email(s) not delivered" in result.output and "Traceback" not in result.output
    assert (tmp_path / "reports" / "2026-11-20" / "index.html").exists()
    result = CliRunner().invoke(main, ["render", "--date", "2026-11-20", "--config", path])  # the ledger has the day
    assert result.exit_code == 0, result.output


def test_render_of_a_day_never_run_is_one_sentence_and_exit_1(config):
    result = CliRunner().invoke(main, ["render", "--date", "2026-11-19", "--config", config()])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "billing: the ledger records no run of 2026-11-19; run `billing run --date 2026-11-19` first"
    )


@pytest.mark.parametrize("personal, day, expected", [
    ("daily", "2026-11-20", "Your cluster costs 2026-11-20: 21.00 USD"),
    ("weekly", "2026-11-22", "Your cluster costs 2026-11-16 to 2026-11-22: 21.00 USD"),  # a Sunday: the week
    ("weekly", "2026-11-20", None),  # a Friday: nothing
    ("off", "2026-11-20", None),
])
def test_personal_summaries_follow_email_personal(config, tmp_path, personal, day, expected):
    path = config(personal=personal)
    result = CliRunner().invoke(main, ["run", "--date", day, "--config", path])
    assert result.exit_code == 0, result.output
    mails = [message_from_bytes(p.read_bytes(), policy=policy.default) for p in (tmp_path / "outbox").iterdir()]
    personal_mails = [(m["To"], m["Subject"]) for m in mails if m["Subject"].startswith("Your cluster costs")]
    assert personal_mails == ([("alice@example.org", expected)] if expected else [])


@pytest.mark.parametrize("command, said", [
    (["run", "--date", "2026-11-20", "--no-email"], "email: no daily summaries for 2026-11-20 (--no-email)"),
    (["backfill", "--from", "2026-11-20", "--to", "2026-11-20"],
     "email: no daily summaries for 2026-11-20 (a backfill of a day before yesterday; --email sends them)"),
])
def test_the_log_says_why_no_summaries_went_out_as_the_command_ran(config, tmp_path, caplog, command, said):
    """The reason fits the command: `run --no-email` asked for none; a backfill holds back old days' summaries."""
    caplog.set_level("INFO")
    result = CliRunner().invoke(main, [*command, "--config", config()])
    assert result.exit_code == 0, result.output
    assert said in caplog.messages
    assert not (tmp_path / "outbox").exists() or not any((tmp_path / "outbox").iterdir())


def test_a_run_draws_the_allocation_once_shows_its_balance_and_alerts_each_threshold_once(config, tmp_path):
    """robotics' 21.00 of the day all on account G-1, whose allocation of 15.00 it exhausts: 15.00 drawn, 6.00
    overage; the 50 % and 100 % alerts to alice (its lead) and the admins, once however often the night runs."""
    import yaml

    path = config()
    settings = yaml.safe_load((tmp_path / "billing.yaml").read_text())
    settings["accounts"] = {"names": {"G-1": "NSF CNS-2231", "RC": "Research computing"},
                            "assignments": [{"team": "robotics", "account": "G-1", "from": "2026-11-01"}],
                            "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
                            "default_object_code": "6400"}
    settings["allocations"] = [{"account": "G-1", "from": "2026-11-01", "to": "2026-11-30", "amount": 15.0,
                                "thresholds": [50, 100]}]
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    for _ in range(2):
        result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", path])
        assert result.exit_code == 0, result.output
    mails = [message_from_bytes(p.read_bytes(), policy=policy.default) for p in (tmp_path / "outbox").iterdir()]
    alerts = sorted((m["To"], m["Subject"].strip()) for m in mails if "Allocation alert" in m["Subject"])
    assert alerts == sorted((to, "Allocation alert: G-1 has drawn 100.0% of its allocation of 15.00 USD")
                            for to in ("alice@example.org", "infra@example.org") for _ in range(2))
    page = (tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text()
    assert 'id="allocations"' in page and "6.00 USD (charged)" in page
    statement = CliRunner().invoke(main, ["statement", "--month", "2026-11", "--format", "csv", "--config", path])
    assert statement.exit_code == 0, statement.output
    assert ",allocation,allocation,G-1," in statement.output and ",-15," in statement.output


def test_a_run_draws_the_allocation_of_an_account_the_directory_names(config, tmp_path):
    """robotics' account G-1 given by its directory entry (teams.accounts_attribute), not the config's assignments:
    the night draws the allocation as it would for a configured one (15.00 of the day's 21.00)."""
    import yaml

    from tests.helpers.jobs import LDIF

    path = config()
    (tmp_path / "directory.ldif").write_text(LDIF + "departmentNumber: G-1\n")  # robotics' entry comes last
    settings = yaml.safe_load((tmp_path / "billing.yaml").read_text())
    settings["directory"]["teams"] = {"accounts_attribute": "departmentNumber"}
    settings["accounts"] = {"names": {"G-1": "NSF CNS-2231", "RC": "Research computing"}, "assignments": [],
                            "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
                            "default_object_code": "6400"}
    settings["allocations"] = [{"account": "G-1", "from": "2026-11-01", "to": "2026-11-30", "amount": 15.0}]
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", path])
    assert result.exit_code == 0, result.output
    statement = CliRunner().invoke(main, ["statement", "--month", "2026-11", "--format", "csv", "--config", path])
    assert statement.exit_code == 0, statement.output
    assert ",allocation,allocation,G-1," in statement.output and ",-15," in statement.output
