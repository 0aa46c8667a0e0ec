"""Summary emails through a real SMTP server (aiosmtpd on loopback), parsed back."""

import logging
import sqlite3
from email import message_from_bytes, policy

import pytest

from billing.config import EmailConfig
from billing.dayview import read_report
from billing.directory import Directory, Person, Team
from billing.ledger import open_ledger
from billing.mail import MailError, connect_smtp, deliver
from billing.summaries import summary_envelopes
from tests.report_ledger import DAY, DAY_TOTAL, TEAM_COST, write_ledger

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
    assert failures == [] and deliver(envelopes, config) == []

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
    failures = deliver(envelopes, config)
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
    monkeypatch.setattr("billing.mail.IMPLICIT_TLS_PORT", server.port)  # the test server cannot have port 465
    config = email_config(server, starttls=True)  # starttls does not matter on the implicit-TLS port
    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, _ = summary_envelopes(report, DIRECTORY, config)
    assert deliver(envelopes, config) == []
    assert len(server.messages) == 3 and all(m.tls for m in server.messages)


def test_the_ca_file_of_the_config_is_trusted_without_touching_the_system(smtp_server, test_ca, ledger_url, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    server = smtp_server(tls=test_ca)
    config = email_config(server, starttls=True, ca_file=str(test_ca.ca_cert))
    report = read_report(open_ledger(ledger_url), DAY, "USD", "unallocated")
    envelopes, _ = summary_envelopes(report, DIRECTORY, config)
    assert deliver(envelopes, config) == []
    assert len(server.messages) == 3 and all(m.tls for m in server.messages)


@pytest.mark.parametrize("starttls, warned", [(False, True), (True, False)])
def test_a_login_over_a_cleartext_session_is_a_warning(smtp_server, test_ca, monkeypatch, caplog, starttls, warned):
    server = smtp_server(tls=test_ca if starttls else None, auth=("billing", "s3cret"), auth_required=True)
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "s3cret")
    config = email_config(server, starttls=starttls, ca_file=str(test_ca.ca_cert),
                          username_env="BILLING_SMTP_USER", password_env="BILLING_SMTP_PASSWORD")
    with caplog.at_level(logging.WARNING, logger="billing.mail"):
        connect_smtp(config).quit()
    expected = [f"SMTP server 127.0.0.1:{server.port}: the login and password are sent unencrypted "
                "(use starttls: true or port 465)"]
    assert [r.getMessage() for r in caplog.records if r.name == "billing.mail"] == (expected if warned else [])
