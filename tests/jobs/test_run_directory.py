"""What a run does when the directory is unreachable: fail and keep the ledger, or use the last known one."""

from __future__ import annotations

import email
import email.policy
import json
import logging
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import update

import billing.collect.day
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.config import Config
from billing.directory.people import AmbiguousDirectoryError, DirectoryError
from billing.jobs.run import run_day
from billing.ledger.database import open_ledger
from billing.ledger.read import latest_directory, read_rows
from billing.ledger.tables import directory_snapshots
from fixtures.servers import free_port
from tests.helpers.config import stub_node_metrics
from tests.helpers.faults import ledger_state
from tests.helpers.jobs import LDIF as ALICE_ON_ROBOTICS

DAY = date(2026, 11, 20)


@pytest.fixture(autouse=True)
def fixed_usage(monkeypatch):
    """10 core-hours in each of three namespaces; collection is not what is tested here."""
    usage = pd.DataFrame(
        {
            "namespace": ["alice", "team-robotics", "nobody"],
            "resource": ["cpu"] * 3,
            "gpu_model": [""] * 3,
            "priority_class": [""] * 3,
            "pool": [""] * 3,
            "quantity": [10.0] * 3,
        }
    )
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *_: ClusterUsage(context.cluster.name, usage, 3, 1, 1.0))
    stub_node_metrics(monkeypatch)


# alice leads robotics (from the reports' job test) and is on vision too
LDIF = ALICE_ON_ROBOTICS + """
dn: cn=vision,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: vision
member: uid=alice,ou=people,dc=example,dc=org
"""


def make_config(tmp_path: Path, **directory) -> Config:
    (tmp_path / "directory.ldif").write_text(LDIF)
    return Config.model_validate(
        {
            "database": f"sqlite:///{tmp_path}/ledger.db",
            "output_dir": str(tmp_path / "reports"),
            "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["admin@example.org"]},
            "clusters": [
                {
                    "name": "jaguar",
                    "prometheus": {"url": "http://prometheus.invalid:9090"},
                    "prices": {"cpu_core_hour": 0.5, "memory_gib_hour": 0.0, "gpu_hour": 0.0},
                }
            ],
            "directory": {
                "people": {"base": "ou=people,dc=example,dc=org"},
                "teams": {"base": "ou=teams,dc=example,dc=org"},
                **directory,
            },
        }
    )


def cost_by_team(config: Config) -> dict[str, float]:
    rows = read_rows(open_ledger(config.database), DAY, DAY)
    return rows.groupby("team")["cost"].sum().to_dict()


# alice is on robotics and vision: her 10 core-h x 0.5 split in half; nobody is no person.
EXPECTED = {"robotics": 2.5 + 5.0, "vision": 2.5, "unallocated": 5.0}


def test_an_outage_fails_the_run_and_keeps_the_days_rows(tmp_path):
    url = f"ldap://127.0.0.1:{free_port()}"
    run_day(make_config(tmp_path, ldif=str(tmp_path / "directory.ldif")), DAY)
    config = make_config(tmp_path, url=url)
    before = read_rows(open_ledger(config.database), DAY, DAY)

    with pytest.raises(DirectoryError, match=f"^directory {url}: connection failed \\(Connection refused\\); "
                                          "the directory is down or directory.url is wrong$"):
        run_day(config, DAY)

    pd.testing.assert_frame_equal(read_rows(open_ledger(config.database), DAY, DAY), before)


def test_the_command_exits_1_with_one_sentence(tmp_path):
    url = f"ldap://127.0.0.1:{free_port()}"
    path = tmp_path / "billing.yaml"
    path.write_text(
        "clusters: [{name: jaguar, prometheus: {url: 'http://prometheus.invalid:9090'},"
        " prices: {cpu_core_hour: 0.5, memory_gib_hour: 0, gpu_hour: 0}}]\n"
        f"database: sqlite:///{tmp_path}/ledger.db\noutput_dir: {tmp_path}/reports\n"
        f"directory: {{url: '{url}'}}\n"
    )
    result = CliRunner().invoke(main, ["run", "--date", str(DAY), "--config", str(path)])

    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (f"billing: directory {url}: connection failed (Connection refused); "
                                                      "the directory is down or directory.url is wrong")


def test_last_known_uses_the_directory_of_the_last_successful_run(tmp_path, caplog):
    url = f"ldap://127.0.0.1:{free_port()}"
    first = run_day(make_config(tmp_path, ldif=str(tmp_path / "directory.ldif")), DAY)
    config = make_config(tmp_path, url=url, on_failure="last_known")
    stored = latest_directory(open_ledger(config.database))

    with caplog.at_level(logging.WARNING):
        summary = run_day(config, DAY)

    assert first.directory_warning == ""
    assert url in summary.directory_warning and "last successful run" in summary.directory_warning
    assert any(r.levelno == logging.WARNING and url in r.getMessage() for r in caplog.records)
    assert cost_by_team(config) == pytest.approx(EXPECTED)
    assert latest_directory(open_ledger(config.database)) == stored  # a fallback run stores no new snapshot


def test_last_known_without_any_earlier_run_fails(tmp_path):
    config = make_config(tmp_path, url=f"ldap://127.0.0.1:{free_port()}", on_failure="last_known")
    with pytest.raises(DirectoryError, match="no earlier run stored a directory to fall back on"):
        run_day(config, DAY)


def test_an_ambiguous_last_known_directory_is_refused_too(tmp_path):
    """The stored copy names alice twice (as an older version or a hand edit could have stored it)."""
    url = f"ldap://127.0.0.1:{free_port()}"
    run_day(make_config(tmp_path, ldif=str(tmp_path / "directory.ldif")), DAY)
    config = make_config(tmp_path, url=url, on_failure="last_known")
    ledger = open_ledger(config.database)
    people = [
        {"uid": "alice", "name": "Alice", "mail": "alice@example.org", "dn": "uid=alice,ou=people,dc=example,dc=org"},
        {"uid": "ALICE", "name": "Mallory", "mail": "evil@attacker.example"},  # stored without a DN
    ]
    with ledger.begin() as conn:
        conn.execute(update(directory_snapshots).values(content=json.dumps({"people": people, "teams": []})))
    before = ledger_state(config.database)

    with pytest.raises(AmbiguousDirectoryError, match="^the directory is ambiguous: "
                                                      "'uid=alice,ou=people,dc=example,dc=org' and 'ALICE' have"):
        run_day(config, DAY)

    assert ledger_state(config.database) == before


STALE = "Owners and teams may be out of date"


def said_stale(tmp_path: Path) -> dict[str, bool]:
    """Whether each page and each part of each email of DAY warns that the directory was the last known one."""
    pages = {p.name: STALE in p.read_text() for p in (tmp_path / "reports" / str(DAY)).rglob("*.html")}
    parts = {}
    for eml in (tmp_path / "outbox").glob("*.eml"):
        message = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
        for part in message.walk():
            if part.get_content_maintype() == "text":
                parts[f"{eml.stem} {part.get_content_subtype()}"] = STALE.lower() in part.get_content().lower()
    return pages | parts


def test_reports_and_emails_say_the_directory_was_the_last_known_one(tmp_path):
    live = make_config(tmp_path, ldif=str(tmp_path / "directory.ldif"))
    run_day(live, DAY)
    assert set(said_stale(tmp_path).values()) == {False}

    url = f"ldap://127.0.0.1:{free_port()}"
    # re-runs of the day: its summaries go out again only as corrections (each once otherwise), written beside
    # the messages sent before; the outbox is emptied so that only the corrections are read
    for sent in (tmp_path / "outbox").glob("*.eml"):
        sent.unlink()
    run_day(make_config(tmp_path, url=url, on_failure="last_known"), DAY, summaries="resend")
    said = said_stale(tmp_path)
    pages = {name for name in said if name.endswith(".html")}
    assert pages == {"index.html", "robotics.html", "unallocated.html", "vision.html"}
    emails = sorted(name for name in said if " " in name)  # the admins' and robotics' lead's, two parts each
    assert [name.split()[-1] for name in emails] == ["html", "plain", "html", "plain"]
    assert emails[2].startswith(f"{DAY}-team-robotics-alice")
    assert set(said.values()) == {True}
    assert url in (tmp_path / "reports" / str(DAY) / "index.html").read_text()

    for sent in (tmp_path / "outbox").glob("*.eml"):
        sent.unlink()
    run_day(live, DAY, summaries="resend")  # the directory is back: the day's reports are plain again
    assert set(said_stale(tmp_path).values()) == {False}
