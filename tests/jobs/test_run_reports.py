"""`billing run` and `billing render`: reports and emails come after the ledger, from the ledger."""

from email import message_from_bytes, policy

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import billing.jobs.run
from billing.cli import main
from billing.collect.usage import USAGE_COLUMNS, ClusterUsage
from fixtures.servers import free_port
from tests.helpers.config import stub_node_metrics
from tests.helpers.html_tables import read_page

LDIF = """\
dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A
mail: alice@example.org

dn: cn=robotics,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: robotics
member: uid=alice,ou=people,dc=example,dc=org
owner: uid=alice,ou=people,dc=example,dc=org
"""

# 10 GPU-h at 2.00 and 100 core-h at 0.01 in alice's namespace: 21.00 USD, all robotics
USAGE = pd.DataFrame([("alice", "gpu", "", "", "", 10.0), ("alice", "cpu", "", "", "", 100.0)], columns=USAGE_COLUMNS)


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setattr(billing.jobs.run, "collect_cluster", lambda cluster, *args: ClusterUsage(cluster.name, USAGE, 1, 0, 1.0))
    stub_node_metrics(monkeypatch)
    (tmp_path / "directory.ldif").write_text(LDIF)
    settings = {
        "database": f"sqlite:///{tmp_path / 'ledger.db'}",
        "output_dir": str(tmp_path / "reports"),
        "clusters": [
            {
                "name": "jaguar",
                "prometheus": {"replay": str(tmp_path)},
                "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0},
            }
        ],
        "directory": {"ldif": str(tmp_path / "directory.ldif")},
        "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]},
    }

    def write(**email):
        settings["email"].update(email)
        (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
        return str(tmp_path / "billing.yaml")

    return write


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
