"""Allocation alerts: a prepaid allocation drawn past one of its thresholds (docs/spec.md "Allocations"), told to the
leads of the teams that drew on it or hold its account and to the admins, once per threshold.

As budget alerts are (billing/notify/budget_alerts.py): the alert is recorded in the ledger (table
`allocation_alerts`) with a message owed to each recipient (table `deliveries`, under the allocation's first day)
before anything is sent, so a re-run or a backfill sends nothing again, and a message a recipient refused stays owed
and goes out with the next run. A re-run that draws less keeps the record: the alert went out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from html import escape

from sqlalchemy import Engine

from billing.allocations import Allocation
from billing.config import EmailConfig
from billing.directory.people import Directory
from billing.ledger import allocations as ledger
from billing.ledger import messages
from billing.money import money, total
from billing.notify.budget_alerts import leads_and_admins
from billing.notify.deliveries import deliver_once
from billing.notify.mail import Envelope, Letter, MailError, build_message
from billing.publish.allocations import AllocationStatus
from billing.publish.links import slug

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AllocationAlert:
    """`allocation` drawn to `drawn` by the run of `day`, crossing `threshold` percent of it."""

    allocation: Allocation
    threshold: float
    day: date
    drawn: float


def crossed_thresholds(statuses: Sequence[AllocationStatus], sent: set[tuple[str, date, float]]
                       ) -> list[AllocationAlert]:
    """The thresholds each allocation's draws have reached (to the billionth, as sums are) that no alert was recorded
    for."""
    return [AllocationAlert(status.allocation, threshold, status.as_of, status.drawn)
            for status in statuses for threshold in status.allocation.thresholds
            if total([status.drawn, -status.allocation.amount * threshold / 100]) >= 0
            and (status.allocation.account, status.allocation.first, threshold) not in sent]


def message_name(alert: AllocationAlert, address: str) -> str:
    """The alert's message to one address, as the deliveries table and an outbox name it."""
    held = alert.allocation
    return f"allocation-{slug(held.account)}-{held.first}-{round(alert.threshold)}-{slug(address)}"


def alert_letter(alert: AllocationAlert) -> Letter:
    """Plain text and a minimal HTML body, as a budget alert's."""
    held, unit = alert.allocation, alert.allocation.unit
    share = f"{alert.drawn / held.amount:.1%}"
    subject = f"Allocation alert: {held.account} has drawn {share} of its allocation of {money(held.amount, unit)}"
    lines = [
        f"Account {held.account}'s allocation of {money(held.amount, unit)} from {held.first} to {held.last} has "
        f"{money(alert.drawn, unit)} drawn ({share}), crossing {alert.threshold:g} % as the ledger stood after the run "
        f"of {alert.day}; {money(max(total([held.amount, -alert.drawn]), 0.0), unit)} is left.",
        "What is used beyond it is " + ("charged to the account as usual." if held.overage == "charge" else
                                        "shown as overage and not charged."),
        f"This alert is sent once for {alert.threshold:g} % of the allocation.",
    ]
    html = "<!DOCTYPE html><html><body>" + "".join(f"<p>{escape(line)}</p>" for line in lines) + "</body></html>"
    return Letter(subject, "\n\n".join(lines) + "\n", html)


def _owed(engine: Engine, allocations: Sequence[Allocation], email: EmailConfig) -> dict[date, list[Envelope]]:
    """Per allocation's first day, a message for each recipient of its alerts not delivered yet."""
    by_key = {(held.account, held.first): held for held in allocations}
    envelopes: dict[date, list[Envelope]] = {}
    for row in ledger.recorded_alerts(engine):
        held = by_key.get((row["account"], row["starts"]))
        if held is None:  # no longer configured
            continue
        alert = AllocationAlert(held, row["threshold"], row["day"], row["drawn"])
        for name, address in messages.undelivered(engine, held.first).items():
            if name != message_name(alert, address):
                continue
            try:
                envelopes.setdefault(held.first, []).append(
                    Envelope(name, build_message(email.from_, [address], alert_letter(alert))))
            except MailError as exc:
                log.error("allocation alert to %s: %s", address, exc)
    return envelopes


def send_allocation_alerts(engine: Engine, statuses: Sequence[AllocationStatus], directory: Directory,
                           email: EmailConfig) -> list[str]:
    """Alert every newly crossed threshold once to each recipient, and send again what earlier alerts still owe; one
    sentence per message that failed."""
    alerts = crossed_thresholds(statuses, ledger.alerted(engine)) if statuses else []
    if alerts and not email.enabled:
        log.warning("allocations: %d threshold(s) crossed, no alert sent (email is not enabled)", len(alerts))
    if not email.enabled or not statuses:
        return []
    teams = {(status.allocation.account, status.allocation.first): status.teams for status in statuses}
    recipients = []
    for alert in alerts:
        held = alert.allocation
        log.warning("allocations: %s drew %.1f%% of its allocation of %s (threshold %g%%)", held.account,
                    100 * alert.drawn / held.amount, money(held.amount, held.unit), alert.threshold)
        addresses = leads_and_admins(teams[held.account, held.first], directory, email)
        if not addresses:
            log.warning("allocation alert of %s: no lead with a mail address and no admins; not sent", held.account)
        recipients.append((alert, addresses))
    if recipients:
        ledger.record_alerts(
            engine,
            [{"account": a.allocation.account, "starts": a.allocation.first, "threshold": a.threshold, "day": a.day,
              "drawn": a.drawn, "amount": a.allocation.amount} for a, _ in recipients],
            [{"day": a.allocation.first, "message": message_name(a, address), "address": address,
              "claimed_at": None, "delivered_at": None} for a, addresses in recipients for address in addresses],
            datetime.now(timezone.utc))
    failed = []
    for first, envelopes in _owed(engine, [status.allocation for status in statuses], email).items():
        failed += deliver_once(envelopes, email, engine, first)
    return failed
