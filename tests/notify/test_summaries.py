from dataclasses import replace
from datetime import date
from decimal import Decimal
from email import message_from_bytes, policy

from billing.accounts import Account, AccountAssignment, Subject
from billing.config import EmailConfig
from billing.directory.people import Directory, Person, Team
from billing.notify.letters import admin_letter, team_letter
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


def test_an_account_ending_soon_is_a_line_of_the_admins_and_its_teams_summaries(report):
    ending = (AccountAssignment(Subject("team", "robotics"), Account("NSF-2231", "NSF CNS-2231"), Decimal(60),
                                date(2026, 9, 1), date(2026, 12, 15)),
              AccountAssignment(Subject("person", "bob"), Account("G-7", "A fellowship"), Decimal(100),
                                date(2026, 1, 1), date(2026, 12, 1)))
    told = replace(report, accounts_ending=ending)
    robotics_line = "team robotics: NSF-2231 (NSF CNS-2231, 60 %), last charged 2026-12-15"
    bob_line = "person bob: G-7 (A fellowship, 100 %), last charged 2026-12-01"
    admins = admin_letter(told)
    assert "ACCOUNTS ENDING SOON" in admins.text and robotics_line in admins.text and bob_line in admins.text
    assert robotics_line in admins.html and "Accounts ending soon" in admins.html
    robotics = team_letter(told, "robotics")
    assert robotics_line in robotics.text and bob_line not in robotics.text and robotics_line in robotics.html
    vision = team_letter(told, "vision")  # none of vision's accounts ends: no such part
    assert "ACCOUNTS ENDING SOON" not in vision.text and "Accounts ending soon" not in vision.html
    assert "ACCOUNTS ENDING SOON" not in admin_letter(report).text


def test_the_admins_summary_names_the_charges_of_the_day_no_account_takes(report):
    unfunded = Account("RC-UNFUNDED", "Research computing, unfunded use")
    told = replace(report, default_account=unfunded, charged_to_default=(
        {"team": "nlp", "namespaces": "corpus, tagging", "cost": 1.005},
        {"team": "speech", "namespaces": "asr", "cost": 1.005}))
    admins = admin_letter(told)
    assert "CHARGED TO THE DEFAULT ACCOUNT RC-UNFUNDED (Research computing, unfunded use)" in admins.text
    rows = {line.split()[0]: line.split()[-2] for line in admins.text.splitlines()
            if line.startswith(("nlp ", "speech ", "Rounding", "Total "))}
    # 1.005 shows 1.01 twice, their total 2.01: a Rounding row of -0.01 (the one-figure rule)
    assert (rows["nlp"], rows["speech"], rows["Rounding"], rows["Total"]) == ("1.01", "1.01", "-0.01", "2.01")
    assert "Charged to the default account" in admins.html and "corpus, tagging" in admins.html
    assert "DEFAULT ACCOUNT" not in admin_letter(report).text
