"""Each daily summary once (docs/spec.md "Messages go out once").

Before a message is sent, a run claims it in the ledger database (table `deliveries`, one row per day and
message, a message being one summary to one address): the claim is an insert that only one run can make, so
two runs of a day at once never both send it. After sending, the run records the delivery; after a failure it
drops its claim, so that the next try (the CronJob's retry, a re-run) sends exactly what is missing. A re-run
of a day sends nothing that was delivered unless asked to resend, and then says in the subject that it is a
correction. A run that dies between claiming and recording leaves a claim behind; after CLAIM_SECONDS
another run takes it over (that message may then arrive twice: sending and recording are not one step).
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta, timezone

from sqlalchemy import Engine, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from billing.config import EmailConfig
from billing.ledger.database import writing
from billing.ledger.tables import deliveries
from billing.notify.mail import Envelope, deliver_each

log = logging.getLogger(__name__)

CLAIM_SECONDS = 900  # a claim this old without a delivery is a run that died sending: another may take it over
CORRECTION = "Correction: "  # what a resent summary's subject starts with


def deliver_once(envelopes: list[Envelope], email: EmailConfig, ledger: Engine, day: date,
                 resend: bool = False) -> list[str]:
    """Send each of the day's messages that no run delivered yet (with `resend`: every one, as a correction);
    one sentence per message that failed, as `mail.deliver`."""
    claimed = [envelope for envelope in envelopes if _claim(ledger, day, envelope, resend)]
    if len(claimed) < len(envelopes):
        log.info("email: %d of %d summaries of %s went out before, or another run is sending them: not sent again "
                 "(`billing run --resend` sends them again, as corrections)", len(envelopes) - len(claimed),
                 len(envelopes), day)
    if resend:
        for envelope in claimed:
            envelope.message.replace_header("Subject", CORRECTION + str(envelope.message["Subject"]))
    failures = []
    for envelope, failure in zip(claimed, deliver_each(claimed, email)):
        key = and_(deliveries.c.day == day, deliveries.c.message == envelope.name)
        with ledger.begin() as connection:
            if failure:
                connection.execute(delete(deliveries).where(key))
                failures.append(failure)
            else:
                connection.execute(update(deliveries).where(key).values(delivered_at=_now()))
    return failures


def _claim(ledger: Engine, day: date, envelope: Envelope, resend: bool) -> bool:
    """Whether this run may send the message now; if so, the ledger says it is being sent."""
    now, address = _now(), ", ".join(str(a) for a in envelope.message.get_all("To", []))
    try:
        with ledger.begin() as connection:
            connection.execute(insert(deliveries).values(day=day, message=envelope.name, address=address,
                                                         claimed_at=now, delivered_at=None))
        return True
    except IntegrityError:  # claimed before: delivered, being sent, or left by a run that died
        pass
    key = and_(deliveries.c.day == day, deliveries.c.message == envelope.name)
    with writing(ledger) as connection:
        found = connection.execute(select(deliveries.c.claimed_at, deliveries.c.delivered_at).where(key)).one_or_none()
        if found is None:  # the claim was dropped meanwhile (a failed send): the next run sends it
            return False
        if found.delivered_at is not None:
            if not resend:
                return False
            unchanged = deliveries.c.delivered_at == found.delivered_at
        elif _aware(found.claimed_at) > now - timedelta(seconds=CLAIM_SECONDS):
            return False  # another run is sending it
        else:
            unchanged = deliveries.c.claimed_at == found.claimed_at
        taken = connection.execute(update(deliveries).where(key, unchanged).values(claimed_at=now, delivered_at=None))
        return taken.rowcount == 1


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(moment: datetime) -> datetime:
    """A time read back from the database, in UTC (SQLite gives it back without its zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
