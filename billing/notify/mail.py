"""Building and sending messages: SMTP, or `.eml` files in an outbox.

A message is multipart/alternative (plain text and HTML). Header values come
from the directory and the ledger, so anything with CR or LF in it is
refused rather than let it add headers. `Outgoing` sends one message at a
time, so that each is recorded as it goes (billing/notify/deliveries.py);
one that cannot be sent does not stop the others.
"""

from __future__ import annotations

import logging
import os
import smtplib
import socket
import ssl
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from email.policy import SMTP, default
from email.utils import formatdate, getaddresses, make_msgid
from pathlib import Path

from billing.config import EmailConfig, untrusted_certificate
from billing.errors import RunFailed
from billing.private import private_directory, write_private_file

log = logging.getLogger(__name__)

SMTP_TIMEOUT = 30.0  # seconds for connecting and for each SMTP command
IMPLICIT_TLS_PORT = 465


class MailError(RunFailed):
    """A message could not be built, sent or written; the message names it."""


@dataclass(frozen=True)
class Letter:
    """What a message says; who receives it is decided when it is built."""

    subject: str
    text: str
    html: str


@dataclass(frozen=True)
class Envelope:
    """A built message and a short name for logs and outbox files (`admins`, `team-robotics`)."""

    name: str
    message: EmailMessage


def _address(value: str) -> Address:
    """One mailbox like `a@b.org` or `Name <a@b.org>`; anything else is refused."""
    if any(c in value for c in "\r\n\0"):
        raise MailError(f"email address {value!r} contains a line break")
    parsed = getaddresses([value])
    if len(parsed) != 1 or "@" not in parsed[0][1]:
        raise MailError(f"{value!r} is not one email address")
    name, addr_spec = parsed[0]
    try:
        return Address(display_name=name, addr_spec=addr_spec)
    except (ValueError, IndexError) as exc:
        raise MailError(f"{value!r} is not a valid email address ({exc})") from None


def build_message(sender: str, recipients: list[str], letter: Letter) -> EmailMessage:
    """A multipart/alternative message; raises MailError for a bad address or subject."""
    if any(c in letter.subject for c in "\r\n"):
        raise MailError(f"subject {letter.subject!r} contains a line break")
    message = EmailMessage()
    message["From"] = _address(sender)
    message["To"] = [_address(r) for r in recipients]
    message["Subject"] = letter.subject
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(domain=_address(sender).domain or None)
    message.set_content(letter.text)
    message.add_alternative(letter.html, subtype="html")
    return message


def connect_smtp(config: EmailConfig) -> smtplib.SMTP:
    """A logged-in SMTP session: implicit TLS on port 465, else STARTTLS if configured."""
    where = f"SMTP server {config.smtp_host}:{config.smtp_port}"
    context = ssl.create_default_context(cafile=config.ca_file or None)
    if config.username and config.smtp_port != IMPLICIT_TLS_PORT and not config.starttls:
        log.warning("%s: the login and password are sent unencrypted (use starttls: true or port %d)",
                    where, IMPLICIT_TLS_PORT)
    try:
        if config.smtp_port == IMPLICIT_TLS_PORT:
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(config.smtp_host, config.smtp_port, timeout=SMTP_TIMEOUT, context=context)
        else:
            smtp = smtplib.SMTP(config.smtp_host, config.smtp_port, timeout=SMTP_TIMEOUT)
            if config.starttls:
                smtp.starttls(context=context)
        if config.username:
            smtp.login(config.username, config.password or "")
    except smtplib.SMTPAuthenticationError as exc:
        raise MailError(f"{where} refused the login: {_reason(exc)}; check {config.secret_source('username')} and "
                        f"{config.secret_source('password')}") from None
    except smtplib.SMTPNotSupportedError as exc:  # no STARTTLS, or no login offered
        raise MailError(f"{where}: {_reason(exc).rstrip('.')}; {_unsupported_fix(config, str(exc))}") from None
    except ssl.SSLCertVerificationError as exc:
        raise MailError(f"{where}: TLS failed ({_reason(exc)}); {_certificate_fix(config, exc)}") from None
    except (ConnectionError, TimeoutError, socket.gaierror) as exc:  # nothing answers there
        raise MailError(f"{where} is unreachable ({exc.strerror or _reason(exc)}); the server is down or "
                        f"{config.key('smtp_host')} and smtp_port are wrong") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise MailError(f"{where} is unreachable or refused the session: {_reason(exc)}; {config.key('smtp_host')} "
                        f"and {config.key('smtp_port')} must name a mail server that accepts this host (587 with "
                        f"starttls, {IMPLICIT_TLS_PORT} for implicit TLS)") from None
    return smtp


def _unsupported_fix(config: EmailConfig, failure: str) -> str:
    """The keys to change where the server lacks STARTTLS or login."""
    if "STARTTLS" in failure:
        return (f"set {config.key('smtp_port')} to the server's TLS port ({IMPLICIT_TLS_PORT}), or "
                f"{config.key('starttls')}: false where the network may read the mail")
    return (f"the server offers no login here: unset {config.key('username_env')} and _file, or set "
            f"{config.key('starttls')}: true where it offers one only over TLS")


def _certificate_fix(config: EmailConfig, exc: ssl.SSLCertVerificationError) -> str:
    """The key to change where the server's certificate did not verify: smtp_host for another host's, else
    ca_file (without it Python trusts SSL_CERT_FILE's bundle, or the system's)."""
    if "mismatch" in str(exc.verify_message):
        return f"the server's certificate does not name {config.key('smtp_host')} {config.smtp_host}"
    bundle = os.environ.get("SSL_CERT_FILE")
    return untrusted_certificate(config, f"the bundle SSL_CERT_FILE names, {bundle}," if bundle else "the system's CAs")


def _reason(exc: Exception) -> str:
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{exc.smtp_code} {exc.smtp_error.decode(errors='replace') if isinstance(exc.smtp_error, bytes) else exc.smtp_error}"
    return str(exc) or type(exc).__name__


def log_outcome(messages: int, failures: list[str], config: EmailConfig) -> None:
    """Each failure, and how many of the messages went out."""
    for failure in failures:
        log.error("email: %s", failure)
    done = f"written to the outbox {config.outbox_dir}" if config.outbox_dir else "delivered"
    log.info("email: %d of %d messages %s", messages - len(failures), messages, done)


class Outgoing:
    """Messages going out one at a time: over one SMTP session (after a failed message the next one reconnects),
    or into the outbox. A context manager that closes the session."""

    def __init__(self, config: EmailConfig) -> None:
        self.config = config
        self._smtp: smtplib.SMTP | None = None
        self._unreachable = ""  # why the server could not be reached: then no message is tried again

    def __enter__(self) -> Outgoing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._hang_up()

    def _hang_up(self) -> None:
        if self._smtp is not None:
            _close(self._smtp)
            self._smtp = None

    def ready(self) -> str | None:
        """None when a message can go at once (the session is open, or the outbox is used); else why none can.

        Connecting first keeps the time between claiming a message and sending it short (billing/notify/deliveries.py).
        """
        if self.config.outbox_dir or self._smtp is not None:
            return None
        if not self._unreachable:
            try:
                self._smtp = connect_smtp(self.config)
                return None
            except MailError as exc:
                self._unreachable = str(exc)
        return self._unreachable

    def send(self, envelope: Envelope) -> str | None:
        """Send one message or write it to the outbox; None when it went out, else why not."""
        if self.config.outbox_dir:
            return _write_eml(envelope, Path(self.config.outbox_dir))
        unreachable = self.ready()
        if unreachable or self._smtp is None:
            return f"{envelope.name}: not sent, {unreachable}"
        try:
            refused = self._smtp.send_message(envelope.message)
        except (smtplib.SMTPException, OSError) as exc:
            self._hang_up()
            return f"{envelope.name}: not sent: {_reason(exc)}"
        return f"{envelope.name}: refused for {', '.join(refused)}" if refused else None


def _write_eml(envelope: Envelope, outbox: Path) -> str | None:
    path = outbox / f"{envelope.name}.eml"
    try:
        private_directory(outbox)
        path = outbox_path(outbox, envelope)
        write_private_file(path, envelope.message.as_bytes(policy=SMTP))
    except OSError as exc:
        return f"{envelope.name}: cannot write {path}: {exc.strerror or exc}"
    return None


def outbox_path(outbox: Path, envelope: Envelope) -> Path:
    """Where the message goes in the outbox: `<name>.eml`, or beside earlier messages of that name (a correction)
    `<name>.2.eml`, `<name>.3.eml`, …, never over another message. The same message (the same Message-ID, sent
    again by a run that took it over) goes over its own file, so the outbox holds it once."""
    number, path = 1, outbox / f"{envelope.name}.eml"
    while path.exists() and _message_id(path) != str(envelope.message["Message-ID"]):
        number += 1
        path = outbox / f"{envelope.name}.{number}.eml"
    return path


def _message_id(path: Path) -> str:
    with path.open("rb") as file:
        return str(BytesHeaderParser(policy=default).parse(file)["Message-ID"])


def _close(smtp: smtplib.SMTP) -> None:
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()
