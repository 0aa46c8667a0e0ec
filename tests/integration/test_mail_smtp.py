"""Summary emails through a real SMTP server (aiosmtpd on loopback), parsed back."""

import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from email import message_from_bytes, policy
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import billing.collect.day
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.config import EmailConfig, load_config
from billing.directory.people import Directory, Person, Team
from billing.jobs.run import run_day
from billing.ledger.database import open_ledger
from billing.notify.deliveries import deliver_once
from billing.notify.mail import MailError, connect_smtp
from billing.notify.summaries import summary_envelopes
from billing.publish.dayview import read_report
from tests.helpers.budgets import budget_job, run  # noqa: F401 (pytest fixtures)
from tests.helpers.config import stub_node_metrics
from tests.helpers.jobs import LDIF, USAGE
from tests.helpers.report_ledger import DAY, DAY_TOTAL, TEAM_COST, write_ledger

DIRECTORY = Directory(
    {
        "alice": Person("alice", "Alice", "alice@example.org"),
        "bob": Person("bob", "Bob", "bob@example.org"),
    },
    {
        "robotics": Team("robotics", ("alice", "bob"), leads=("alice",)),
        "vision": Team("vision", ("bob",), leads=("bob",)),
    },
)


@pytest.fixture
def ledger_url(tmp_path):
    return write_ledger(tmp_path / "ledger.db")


def ledger_sums(url: str) -> dict[str, float]:
    """The day's cost per team and in all, straight from the table with SQL."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        sums = dict(db.execute("SELECT team, SUM(cost) FROM chargeback WHERE day = ? GROUP BY team", (str(DAY),)))
    return {**sums, "all teams": sum(sums.values())}


def email_config(server, **settings) -> EmailConfig:
    return EmailConfig(
        enabled=True, smtp_host=server.host, smtp_port=server.port, admins=["infra@example.org"],
        **{"from": "Cluster billing <billing@example.org>", "starttls": False, **settings},
    )


def received(server) -> dict[str, tuple]:
    """Recipient -> (parsed message, plain text, html) of everything the server accepted."""
    out = {}
    for got in server.messages:
        message = message_from_bytes(got.data, policy=policy.default)
        [recipient] = got.rcpt_tos
        out[recipient] = (
            message,
            message.get_body(("plain",)).get_content(),
            message.get_body(("html",)).get_content(),
        )
    return out


def test_admins_and_leads_receive_their_summaries_over_starttls_with_login(
    smtp_server, test_ca, ledger_url, monkeypatch, tmp_path
):
    server = smtp_server(tls=test_ca, auth=("billing", "s3cret"), auth_required=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca_cert))  # trust the test CA
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    (tmp_path / "password").write_text("s3cret\n")
    config = email_config(server, starttls=True, username_env="BILLING_SMTP_USER", password_file=str(tmp_path / "password"))

    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, failures = summary_envelopes(report, DIRECTORY, config)
    assert failures == [] and deliver_once(envelopes, config, open_ledger(ledger_url), DAY) == []

    got = received(server)
    assert sorted(got) == ["alice@example.org", "bob@example.org", "infra@example.org"]
    assert all(m.tls and m.login == "billing" and m.mail_from == "billing@example.org" for m in server.messages)
    sums = ledger_sums(ledger_url)
    for recipient, who in [("infra@example.org", "all teams"), ("alice@example.org", "robotics"), ("bob@example.org", "vision")]:
        message, text, html = got[recipient]
        total = f"{sums[who]:,.2f} USD"
        assert total == (f"{DAY_TOTAL} USD" if who == "all teams" else f"{TEAM_COST[who]} USD")  # the hand-worked figure
        label = who if who == "all teams" else f"team {who}"
        assert message["Subject"] == f"Cluster billing 2026-11-20: {label} {total}"
        assert message["To"] == recipient
        assert message.get_content_type() == "multipart/alternative"
        assert f"Day total:      {total}" in text
        assert '<td class="num" style="' in html and f">{total}</td>" in html
    _, text, _ = got["alice@example.org"]
    assert "alice" in text and "25.20 USD" in text and "bob" in text and "5.90 USD" in text  # per person


def test_a_refused_recipient_does_not_stop_the_others(smtp_server, ledger_url):
    server = smtp_server(refuse={"alice@example.org"})
    config = email_config(server)
    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, _ = summary_envelopes(report, DIRECTORY, config)
    failures = deliver_once(envelopes, config, open_ledger(ledger_url), DAY)
    assert len(failures) == 1 and "alice" in failures[0]
    assert sorted(received(server)) == ["bob@example.org", "infra@example.org"]


def test_a_wrong_password_is_one_sentence_naming_the_server(smtp_server, test_ca, monkeypatch):
    server = smtp_server(tls=test_ca, auth=("billing", "s3cret"), auth_required=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca_cert))
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "wrong")
    config = email_config(server, starttls=True, username_env="BILLING_SMTP_USER", password_env="BILLING_SMTP_PASSWORD")
    with pytest.raises(MailError, match=f"SMTP server 127.0.0.1:{server.port} refused the login"):
        connect_smtp(config)


def test_an_untrusted_certificate_is_refused(smtp_server, test_ca):
    server = smtp_server(tls=test_ca)
    with pytest.raises(MailError, match="CERTIFICATE_VERIFY_FAILED"):
        connect_smtp(email_config(server, starttls=True))


def test_port_465_speaks_tls_from_the_first_byte(smtp_server, test_ca, ledger_url, monkeypatch):
    server = smtp_server(tls=test_ca, implicit_tls=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca_cert))
    monkeypatch.setattr("billing.notify.mail.IMPLICIT_TLS_PORT", server.port)  # the test server cannot have port 465
    config = email_config(server, starttls=True)  # starttls does not matter on the implicit-TLS port
    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, _ = summary_envelopes(report, DIRECTORY, config)
    assert deliver_once(envelopes, config, open_ledger(ledger_url), DAY) == []
    assert len(server.messages) == 3 and all(m.tls for m in server.messages)


def test_the_ca_file_of_the_config_is_trusted_without_touching_the_system(smtp_server, test_ca, ledger_url, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    server = smtp_server(tls=test_ca)
    config = email_config(server, starttls=True, ca_file=str(test_ca.ca_cert))
    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, _ = summary_envelopes(report, DIRECTORY, config)
    assert deliver_once(envelopes, config, open_ledger(ledger_url), DAY) == []
    assert len(server.messages) == 3 and all(m.tls for m in server.messages)


@pytest.mark.parametrize("starttls, warned", [(False, True), (True, False)])
def test_a_login_over_a_cleartext_session_is_a_warning(smtp_server, test_ca, monkeypatch, caplog, starttls, warned):
    server = smtp_server(tls=test_ca if starttls else None, auth=("billing", "s3cret"), auth_required=True)
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "s3cret")
    config = email_config(server, starttls=starttls, ca_file=str(test_ca.ca_cert),
                          username_env="BILLING_SMTP_USER", password_env="BILLING_SMTP_PASSWORD")
    with caplog.at_level(logging.WARNING, logger="billing.notify.mail"):
        connect_smtp(config).quit()
    expected = [f"SMTP server 127.0.0.1:{server.port}: the login and password are sent unencrypted "
                "(use starttls: true or port 465)"]
    assert [r.getMessage() for r in caplog.records if r.name == "billing.notify.mail"] == (expected if warned else [])


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href"]


def hrefs(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.hrefs


def every_message(server) -> list[tuple[str, str, str]]:
    """(subject, plain text, html) of every message the server accepted, whoever it went to."""
    messages = [message_from_bytes(got.data, policy=policy.default) for got in server.messages]
    return [(m["Subject"], m.get_body(("plain",)).get_content(), m.get_body(("html",)).get_content())
            for m in messages]


def job_config(path: str, **settings) -> str:
    """The budget job's config (robotics, lead and person alice, 21.00 a day against 50.00) with `settings`."""
    with open(path) as f:
        config = {**yaml.safe_load(f), **settings}
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


@pytest.mark.parametrize("reports_url", ["https://billing.example.org/reports", "https://billing.example.org/reports/"])
def test_every_email_links_to_its_own_page_below_reports_url(budget_job, smtp_server, tmp_path, reports_url):  # noqa: F811
    server = smtp_server()
    config = job_config(budget_job(outbox_dir="", smtp_host=server.host, smtp_port=server.port, starttls=False,
                                   personal="daily"), reports_url=reports_url)
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-02", "--email")  # 84 % of the budget on November 2
    links = {subject: (hrefs(html), text) for subject, text, html in every_message(server)
             if "2026-11-02" in subject or subject.startswith("Budget alert")}
    base = "https://billing.example.org/reports/"
    assert {subject: found for subject, (found, _) in links.items()} == {
        "Cluster billing 2026-11-02: all teams 21.00 USD": [base + "2026-11-02/index.html"],
        "Cluster billing 2026-11-02: team robotics 21.00 USD": [base + "2026-11-02/teams/robotics.html"],
        "Your cluster costs 2026-11-02: 21.00 USD": [reports_url],
        "Budget alert: robotics has spent 84.0% of its November 2026 budget": [base + "2026-11-02/teams/robotics.html"],
    }
    for found, text in links.values():
        assert found[0] in text  # the plain text part carries the same address
        page = tmp_path / "reports" / found[0].removeprefix(base)
        assert page.is_file() or found[0] == reports_url  # the page is where the link says


def test_without_reports_url_no_email_has_a_link(budget_job, smtp_server):  # noqa: F811
    server = smtp_server()
    config = budget_job(outbox_dir="", smtp_host=server.host, smtp_port=server.port, starttls=False, personal="daily")
    run(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-02", "--email")
    messages = every_message(server)
    assert len(messages) == 8  # 2 days x (admins, lead, person) + the budget alert to the lead and the admins
    assert all(hrefs(html) == [] and "https://" not in text for _, text, html in messages)


@pytest.fixture
def mailing_job(tmp_path, monkeypatch, smtp_server):
    """(config path, SMTP server): the job billing 21.00 a day to robotics (collection stubbed), mailing the
    admins infra@, finance@ and bounce@ (which the server refuses) and robotics' lead alice@ over real SMTP."""
    monkeypatch.setattr(billing.collect.day, "collect_cluster",
                        lambda context, *args: ClusterUsage(context.cluster.name, USAGE, 1, 0, 1.0))
    stub_node_metrics(monkeypatch)
    (tmp_path / "directory.ldif").write_text(LDIF)
    server = smtp_server(refuse=("bounce@example.org",))
    settings = {
        "currency": "USD", "database": f"sqlite:///{tmp_path / 'ledger.db'}", "output_dir": str(tmp_path / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"replay": str(tmp_path)},
                      "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0}}],
        "directory": {"ldif": str(tmp_path / "directory.ldif")},
        "email": {"enabled": True, "smtp_host": server.host, "smtp_port": server.port, "starttls": False,
                  "from": "billing@example.org",
                  "admins": ["infra@example.org", "finance@example.org", "bounce@example.org"]},
    }
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path), server


def inboxes(server) -> dict[str, list[str]]:
    """Recipient -> the subjects it received, in order."""
    got: dict[str, list[str]] = {}
    for message in server.messages:
        parsed = message_from_bytes(message.data, policy=policy.default)
        for recipient in message.rcpt_tos:
            got.setdefault(recipient, []).append(str(parsed["Subject"]))
    return got


def invoke(config: str, *args: str):
    return CliRunner().invoke(main, [*args, "--config", config])


def test_each_summary_reaches_each_recipient_once_through_retries_reruns_and_backfills(mailing_job):
    """With one address refused, the CronJob retried twice and each try sent every summary again: the other
    recipients got the same email three times. Re-running a day and backfilling mailed everyone again too."""
    config, server = mailing_job
    for _ in range(3):  # the first try and the CronJob's two retries: exit 1 each time, for bounce@ alone
        result = invoke(config, "run", "--date", "2026-11-02")
        assert result.exit_code == 1 and "bounce@example.org" in result.output
    got = inboxes(server)
    assert sorted(got) == ["alice@example.org", "finance@example.org", "infra@example.org"]
    assert all(len(subjects) == 1 for subjects in got.values()), got

    assert invoke(config, "run", "--date", "2026-11-02", "--no-email").exit_code == 0  # a re-run without mail
    assert inboxes(server) == got

    result = invoke(config, "run", "--date", "2026-11-02", "--resend")  # a correction to everyone
    assert result.exit_code == 1
    again = inboxes(server)
    assert all(len(again[r]) == 2 and again[r][1] == "Correction: " + again[r][0] for r in got), again

    # an onboarding backfill of old days sends no daily summaries; with --email each day's once
    assert invoke(config, "backfill", "--from", "2026-11-03", "--to", "2026-11-05").exit_code == 0
    assert inboxes(server) == again
    result = invoke(config, "backfill", "--from", "2026-11-03", "--to", "2026-11-05", "--email")
    assert result.exit_code == 1
    result = invoke(config, "backfill", "--from", "2026-11-01", "--to", "2026-11-05", "--email")
    assert result.exit_code == 1
    final = inboxes(server)
    for recipient in got:
        days = sorted(s for s in final[recipient] if not s.startswith("Correction"))
        assert len(days) == len(set(days)) == 5, final[recipient]  # November 1 to 5, each once


def test_two_runs_of_a_day_at_once_send_each_summary_once(mailing_job):
    config, server = mailing_job
    loaded = load_config(Path(config))
    open_ledger(loaded.database).dispose()  # the schema made before: the runs race for the day, not for that
    with ThreadPoolExecutor(2) as pool:
        summaries = list(pool.map(lambda _: run_day(loaded, date(2026, 11, 7)), range(2)))
    got = inboxes(server)
    assert sorted(got) == ["alice@example.org", "finance@example.org", "infra@example.org"]
    assert all(len(subjects) == 1 for subjects in got.values()), got
    # bounce@'s was refused in the run that claimed it (the other found it claimed, or tried again after its
    # release and was refused as well)
    assert any("bounce@example.org" in failure for summary in summaries for failure in summary.undelivered)
