"""Budget alerts through a real SMTP server (aiosmtpd): one message per recipient and threshold, never two.

Figures as in tests/publish/test_budgets.py: 21.00 USD a day against a budget of 50.00, alerts at 50 % and 100 %.
"""

from email import message_from_bytes, policy

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
    half = "Budget alert: robotics has spent 84% of its November 2026 budget"
    whole = "Budget alert: robotics has spent 126% of its November 2026 budget"
    assert budget_alerts(smtp) == sorted([("alice@example.org", half), ("infra@example.org", half),
                                          ("alice@example.org", whole), ("infra@example.org", whole)])
