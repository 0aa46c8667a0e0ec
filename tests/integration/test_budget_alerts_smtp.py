"""Budget alerts through a real SMTP server (aiosmtpd): one message per recipient and threshold, never two.

Figures as in tests/publish/test_budgets.py: 21.00 USD a day against a budget of 50.00, alerts at 50 % and 100 %.
"""

from email import message_from_bytes, policy

from click.testing import CliRunner

from billing.cli import main
from tests.helpers.budgets import budget_job, run  # noqa: F401 (pytest fixtures)


def budget_alerts(smtp) -> list[tuple[str, str]]:
    found = []
    for received in smtp.messages:
        message = message_from_bytes(received.data, policy=policy.default)
        if message["Subject"].startswith("Budget alert"):
            found += [(address, message["Subject"]) for address in received.rcpt_tos]
    return sorted(found)


def test_each_threshold_alerts_leads_and_admins_once(budget_job, smtp_server):  # noqa: F811
    smtp = smtp_server()
    config = budget_job(outbox_dir="", smtp_host=smtp.host, smtp_port=smtp.port, starttls=False)
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-02")  # 42.00: 84 %
    run(config, "run", "--date", "2026-11-02")
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-03")  # 63.00: 126 %
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-03")
    half = "Budget alert: robotics has spent 84.0% of its November 2026 budget"
    whole = "Budget alert: robotics has spent 126.0% of its November 2026 budget"
    assert budget_alerts(smtp) == sorted([("alice@example.org", half), ("infra@example.org", half),
                                          ("alice@example.org", whole), ("infra@example.org", whole)])


def test_a_recipient_that_refused_an_alert_gets_it_from_the_next_run_and_no_one_else_again(budget_job, smtp_server):  # noqa: F811
    """Issue 44.5: an alert one recipient refused (550) stayed sent, and that recipient never got it."""
    refusing = smtp_server(refuse={"alice@example.org"})
    config = budget_job(outbox_dir="", smtp_host=refusing.host, smtp_port=refusing.port, starttls=False)
    refused = CliRunner().invoke(main, ["backfill", "--from", "2026-11-01", "--to", "2026-11-02", "--config", config])
    assert refused.exit_code == 1 and "alice@example.org" in refused.output  # 42.00: 84 %, refused for alice
    half = "Budget alert: robotics has spent 84.0% of its November 2026 budget"
    assert budget_alerts(refusing) == [("infra@example.org", half)]

    accepting = smtp_server()
    config = budget_job(outbox_dir="", smtp_host=accepting.host, smtp_port=accepting.port, starttls=False)
    run(config, "run", "--date", "2026-11-02")
    run(config, "run", "--date", "2026-11-02")
    assert budget_alerts(accepting) == [("alice@example.org", half)]  # alice's once; infra's not again
