"""Each message once: claimed, sent and recorded one at a time (docs/spec.md "Messages go out once").

A message is one summary or budget alert to one address; the ledger database keeps a row of it (table
`deliveries`). Just before a message is sent, a run claims it (an insert, or an update of an unclaimed row, that
only one run can make), and right after, records it delivered, or on a failure releases it for the next try. So a
run killed at message 8 of 53 leaves 7 delivered, 1 claimed and 45 unclaimed, and the CronJob's retry sends the
45 at once.

The one claimed (in flight at the kill) is in doubt: the server may have accepted it before the run died, and
SMTP has no way to ask. A claim is a lease of CLAIM_SECONDS: longer than sending one message can take (the session
is opened before the claim; each of its four SMTP replies waits SMTP_TIMEOUT at most), so a live run's claim never
runs out and two runs never both send a message. A run that finds a claim of another run waits for it: recorded
delivered, it is done; run out, the run that made it stopped, and this run takes it over and sends it again, with
its first Message-ID, marking the row `taken_over_at`: that recipient may have it twice (a mail store that
recognises the Message-ID shows it once).
"""

from __future__ import annotations

import logging
import time
from datetime import date, datetime, timedelta, timezone
from enum import Enum

from sqlalchemy import Engine

from billing.config import EmailConfig
from billing.ledger.database import writing
from billing.ledger.messages import claim_new, delivery, record_delivery, take_claim
from billing.notify.mail import SMTP_TIMEOUT, Envelope, Outgoing, log_outcome

log = logging.getLogger(__name__)

CLAIM_SECONDS = 5 * SMTP_TIMEOUT  # a claim this old without a delivery is a run that stopped sending: take it over
LOOK_AGAIN_SECONDS = 1.0  # how often a run looks again at messages another run is sending
CORRECTION = "Correction: "  # what a resent summary's subject starts with


class Claim(Enum):
    """What a run may do with a message now."""

    SEND = "send"  # claimed by this run
    DONE = "done"  # delivered before
    BUSY = "busy"  # another run is sending it


def deliver_once(envelopes: list[Envelope], email: EmailConfig, ledger: Engine, day: date,
                 resend: bool = False) -> list[str]:
    """Send each message of `day` that no run delivered yet (with `resend`: every one, as a correction), waiting
    for those another run is sending; one sentence per message that failed."""
    if resend:
        for envelope in envelopes:
            envelope.message.replace_header("Subject", CORRECTION + str(envelope.message["Subject"]))
    outcomes: list[str | None] = []  # of the messages this run sent or could not: None, or why it failed
    before = 0
    pending = envelopes
    with Outgoing(email) as outgoing:
        while pending:
            busy = []
            for envelope in pending:
                unreachable = outgoing.ready()
                if unreachable:  # nothing is claimed while the server is out of reach
                    outcomes.append(f"{envelope.name}: not sent, {unreachable}")
                    continue
                claim = _claim(ledger, day, envelope, resend)
                if claim is Claim.SEND:
                    outcomes.append(outgoing.send(envelope))
                    _record(ledger, day, envelope, outcomes[-1])
                elif claim is Claim.DONE:
                    before += 1
                else:
                    busy.append(envelope)
            if busy and pending is envelopes:  # the first pass
                log.info("email: %d message(s) of %s claimed by another run: waiting until it records them, or "
                         "its claims are %d s old", len(busy), day, CLAIM_SECONDS)
            pending, resend = busy, False  # what this pass sent is not sent again
            if pending:
                time.sleep(LOOK_AGAIN_SECONDS)
    if before:
        log.info("email: %d of %d messages of %s went out before: not sent again (`billing run --resend` sends a "
                 "day's summaries again, as corrections)", before, len(envelopes), day)
    failures = [outcome for outcome in outcomes if outcome]
    if outcomes:
        log_outcome(len(outcomes), failures, email)
    return failures


def _claim(ledger: Engine, day: date, envelope: Envelope, resend: bool) -> Claim:
    """Whether this run may send the message now; if so, the ledger says it is being sent."""
    now, message_id = _now(), str(envelope.message["Message-ID"])
    if claim_new(ledger, day, envelope.name, _address(envelope), now, message_id):
        return Claim.SEND
    with writing(ledger) as connection:
        found = delivery(connection, day, envelope.name)
        if found is None:  # released and gone meanwhile: look again
            return Claim.BUSY
        if found.delivered_at is not None and not resend:
            return Claim.DONE
        stopped = found.delivered_at is None and found.claimed_at is not None
        if stopped and _aware(found.claimed_at) > now - timedelta(seconds=CLAIM_SECONDS):
            return Claim.BUSY
        if stopped and found.message_id:  # the same message again, not a new one
            envelope.message.replace_header("Message-ID", found.message_id)
        taken = take_claim(connection, day, envelope.name, found, {
            "claimed_at": now, "delivered_at": None, "message_id": str(envelope.message["Message-ID"]),
            "taken_over_at": now if stopped else None})
    if not taken:  # another run claimed it first
        return Claim.BUSY
    if stopped:
        log.warning("email: %s was being sent by a run that stopped (claimed %s UTC): sent again with the same "
                    "Message-ID; %s may receive it twice", envelope.name, f"{found.claimed_at:%Y-%m-%d %H:%M:%S}",
                    _address(envelope))
    return Claim.SEND


def _record(ledger: Engine, day: date, envelope: Envelope, failure: str | None) -> None:
    """Delivered; or after a failure released, so that the next try sends it."""
    record_delivery(ledger, day, envelope.name, {"delivered_at": _now()} if failure is None else {"claimed_at": None})


def _address(envelope: Envelope) -> str:
    return ", ".join(str(a) for a in envelope.message.get_all("To", []))


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(moment: datetime) -> datetime:
    """A time read back from the database, in UTC (SQLite gives it back without its zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
