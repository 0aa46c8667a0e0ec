from email import message_from_bytes, policy

from billing.config import EmailConfig
from billing.directory.people import Directory, Person, Team
from billing.notify.summaries import summary_envelopes
from tests.helpers.day_reports import report  # noqa: F401 (a pytest fixture)

PEOPLE = {
    "alice": Person("alice", "Alice", "alice@example.org"),
    "bob": Person("bob", "Bob", "bob@example.org"),
    "carol": Person("carol", "Carol", ""),
    "mallory": Person("mallory", "Mallory", "m@example.org\r\nBcc: spy@example.org"),
}


def sent(envelopes):
    """(To, Subject) of every message."""
    parsed = [message_from_bytes(bytes(e.message), policy=policy.default) for e in envelopes]
    return sorted((m["To"], m["Subject"]) for m in parsed)


def test_admins_get_all_teams_and_each_lead_gets_their_team(report, caplog):
    directory = Directory(
        PEOPLE,
        {
            "robotics": Team("robotics", ("alice", "bob"), leads=("alice", "mallory")),
            "vision": Team("vision", ("bob",), leads=("bob", "carol")),
            "idle": Team("idle", (), leads=("bob",)),  # nothing billed on the day: no message
        },
    )
    config = EmailConfig(enabled=True, outbox_dir="x", admins=["infra@example.org", "ops@example.org"])
    envelopes, failures = summary_envelopes(report, directory, config)
    assert sent(envelopes) == [
        ("alice@example.org", "Cluster billing 2026-11-20: team robotics 32.60 USD"),
        ("bob@example.org", "Cluster billing 2026-11-20: team vision 5.90 USD"),
        ("infra@example.org", "Cluster billing 2026-11-20: all teams 40.32 USD"),
        ("ops@example.org", "Cluster billing 2026-11-20: all teams 40.32 USD"),
    ]
    # mallory's address would add a Bcc header: refused and reported; carol has none: a warning
    assert len(failures) == 1 and "mallory" in failures[0] and "line break" in failures[0]
    assert "lead carol has no mail address" in caplog.text
    assert len({e.name for e in envelopes}) == len(envelopes)  # outbox files do not overwrite each other


def test_without_team_leads_only_admins_are_written_to(report):
    directory = Directory(PEOPLE, {"robotics": Team("robotics", ("alice",), leads=("alice",))})
    config = EmailConfig(enabled=True, outbox_dir="x", admins=["infra@example.org"], team_leads=False)
    envelopes, failures = summary_envelopes(report, directory, config)
    assert [to for to, _ in sent(envelopes)] == ["infra@example.org"] and failures == []
