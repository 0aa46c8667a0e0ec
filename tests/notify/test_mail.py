import email
import os
import socket
import stat
import threading
from datetime import date
from email import policy

import pytest

from billing.config import Config, EmailConfig
from billing.ledger.database import open_ledger
from billing.notify.deliveries import deliver_once
from billing.notify.mail import Envelope, Letter, MailError, build_message, connect_smtp
from fixtures.servers import free_port
from tests.helpers.config import MINIMAL_CONFIG

LETTER = Letter("Cluster billing 2026-11-20: team robotics 32.60 USD", "Total 32.60 USD\n", "<p>Total 32.60 USD</p>")


def parse(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=policy.default)


def test_message_is_multipart_alternative_with_text_and_html():
    message = parse(bytes(build_message("Billing <billing@example.org>", ["lead@example.org"], LETTER)))
    assert message.get_content_type() == "multipart/alternative"
    assert message["To"] == "lead@example.org"
    assert message["From"] == "Billing <billing@example.org>"
    assert message["Subject"] == LETTER.subject
    assert message["Message-ID"].endswith("@example.org>")
    assert message.get_body(("plain",)).get_content() == "Total 32.60 USD\n"
    assert message.get_body(("html",)).get_content().strip() == "<p>Total 32.60 USD</p>"


@pytest.mark.parametrize(
    "address",
    ["lead@example.org\r\nBcc: spy@example.org", "lead@example.org\nBcc: spy@example.org", "no-at-sign", "a@x.org, b@y.org"],
)
def test_an_address_that_could_add_headers_or_recipients_is_refused(address):
    with pytest.raises(MailError):
        build_message("billing@example.org", [address], LETTER)


def test_a_subject_with_a_line_break_is_refused():
    with pytest.raises(MailError, match="line break"):
        build_message("billing@example.org", ["a@example.org"], Letter("x\r\nBcc: spy@example.org", "t", "<p>h</p>"))


def deliver(envelopes: list[Envelope], config: EmailConfig, tmp_path) -> list[str]:
    """The messages sent as a run sends them: each once, recorded in a ledger of their own."""
    return deliver_once(envelopes, config, open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}"), date(2026, 11, 20))


def test_outbox_gets_one_eml_file_per_message(tmp_path, caplog):
    config = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"))
    envelopes = [
        Envelope(f"2026-11-20-{n}", build_message("billing@example.org", [f"{n}@example.org"], LETTER)) for n in ("a", "b")
    ]
    with caplog.at_level("INFO", logger="billing.notify.mail"):
        assert deliver(envelopes, config, tmp_path) == []
    # nothing was delivered to anyone: the log says where the messages are
    assert [r.getMessage() for r in caplog.records] == [f"email: 2 of 2 messages written to the outbox {tmp_path / 'outbox'}"]
    files = sorted((tmp_path / "outbox").iterdir())
    assert [f.name for f in files] == ["2026-11-20-a.eml", "2026-11-20-b.eml"]
    assert [parse(f.read_bytes())["To"] for f in files] == ["a@example.org", "b@example.org"]


def test_the_outbox_and_its_messages_are_private_under_umask_022(tmp_path):
    config = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "spool" / "outbox"))
    previous = os.umask(0o022)
    try:
        assert deliver([Envelope("admins", build_message("billing@example.org", ["a@example.org"], LETTER))], config,
                       tmp_path) == []
    finally:
        os.umask(previous)
    modes = {p: stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("spool", "spool/outbox", "spool/outbox/admins.eml")}
    assert modes == {"spool": 0o700, "spool/outbox": 0o700, "spool/outbox/admins.eml": 0o600}


def test_an_unreachable_server_fails_every_message_without_raising(tmp_path):
    config = EmailConfig(enabled=True, smtp_host="127.0.0.1", smtp_port=free_port(), starttls=False)
    envelopes = [Envelope(n, build_message("billing@example.org", [f"{n}@example.org"], LETTER)) for n in ("a", "b")]
    failures = deliver(envelopes, config, tmp_path)
    assert len(failures) == 2 and failures[0].startswith("a: not sent, SMTP server 127.0.0.1:")


def test_connect_names_the_server_it_cannot_reach():
    port = free_port()
    with pytest.raises(MailError, match=f"SMTP server 127.0.0.1:{port} is unreachable"):
        connect_smtp(EmailConfig(enabled=True, smtp_host="127.0.0.1", smtp_port=port))


def test_a_server_refusing_the_session_names_smtp_host_and_smtp_port():
    """A server that greets with 554 (RFC 5321: no service here for this client), e.g. a relay for other hosts."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def refuse() -> None:
        client, _ = listener.accept()
        client.sendall(b"554 5.7.1 no SMTP service here\r\n")
        client.close()

    threading.Thread(target=refuse, daemon=True).start()
    email_section = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": port, "starttls": False}
    config = Config.model_validate({**MINIMAL_CONFIG, "email": email_section})
    with pytest.raises(MailError) as failure:
        connect_smtp(config.email)
    listener.close()
    assert str(failure.value) == (
        f"SMTP server 127.0.0.1:{port} is unreachable or refused the session: 554 5.7.1 no SMTP service here; email.smtp_host and "
        "email.smtp_port must name a mail server that accepts this host (587 with starttls, 465 for implicit TLS)"
    )
