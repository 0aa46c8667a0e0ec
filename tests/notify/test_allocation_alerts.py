"""Allocation alerts (billing/notify/allocation_alerts.py) on docs/billing.md's worked month: NIH-R01's 80.00 crosses
50 % on November 10, 80 % on the 16th and 100 % on the 20th (worked out by hand in tests/publish/test_allocations.py);
each threshold told once to vision's lead and the admins, whatever runs again."""

from __future__ import annotations

from datetime import date
from email import message_from_bytes, policy

from billing.config import EmailConfig
from billing.directory.people import Directory, Person, Team
from billing.ledger.allocations import allocation_draws_between
from billing.notify.allocation_alerts import send_allocation_alerts
from billing.publish.allocations import statuses
from tests.helpers.journals import NIH_80, allocated  # noqa: F401 (a fixture)
from tests.helpers.statements import NOV

DIRECTORY = Directory({"bob": Person("bob", "Bob", "bob@example.org"), "carol": Person("carol", "Carol", "")},
                      {"vision": Team("vision", ("bob", "carol"), leads=("bob", "carol"))})


def _run(engine, day: date, email: EmailConfig) -> list[str]:
    return send_allocation_alerts(engine, statuses(allocation_draws_between(engine, NOV, day), (NIH_80,), day,
                                                   {"NIH-R01": ["vision"]}), DIRECTORY, email)


def _told(outbox) -> list[tuple[str, str]]:
    parsed = [message_from_bytes(path.read_bytes(), policy=policy.default) for path in sorted(outbox.glob("*.eml"))]
    return sorted((str(message["To"]), str(message["Subject"]).strip()) for message in parsed)


def test_each_threshold_is_told_once_to_the_leads_and_the_admins(allocated, tmp_path):
    email = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"), admins=["infra@example.org"])
    assert _run(allocated, date(2026, 11, 9), email) == [] and _told(tmp_path / "outbox") == []
    _run(allocated, date(2026, 11, 10), email)
    half = "Allocation alert: NIH-R01 has drawn 52.5% of its allocation of 80.00 USD"  # 42.04 of 80.00, to 0.1 %
    assert _told(tmp_path / "outbox") == [("bob@example.org", half), ("infra@example.org", half)]
    _run(allocated, date(2026, 11, 10), email)  # the night run again: nothing new
    _run(allocated, date(2026, 11, 20), email)  # 80 % and 100 % crossed since
    told = _told(tmp_path / "outbox")
    assert len(told) == 6 and told.count(("bob@example.org", "Allocation alert: NIH-R01 has drawn 100.0% of its "
                                                             "allocation of 80.00 USD")) == 2
    _run(allocated, date(2026, 11, 30), email)
    assert len(_told(tmp_path / "outbox")) == 6
    sent = next((tmp_path / "outbox").glob("*-50-bob-example-org*.eml")).read_bytes()
    body = message_from_bytes(sent, policy=policy.default).get_body(("plain",)).get_content()
    assert "42.04 USD drawn (52.5%), crossing 50 % as the ledger stood after the run of 2026-11-10" in body


def test_without_email_nothing_is_recorded_and_the_alert_waits(allocated, tmp_path):
    assert _run(allocated, date(2026, 11, 20), EmailConfig(enabled=False)) == []
    email = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"))
    _run(allocated, date(2026, 11, 20), email)
    assert [subject.split(" has drawn ")[0] for _, subject in _told(tmp_path / "outbox")] == [
        "Allocation alert: NIH-R01"] * 3
