"""Budget alerts: a team's month crossing a share of its budget, told to its leads and the admins once.

Crossing a share of the budget in `budgets.alert_at` (by what was spent, not
by the forecast) alerts the team's leads and the admins once per threshold
and month: the alert is recorded in the ledger database before it is sent,
with a message owed to each recipient (table `deliveries`), so a re-run or a
backfill finds it and sends nothing again. Each message goes out once
(billing/notify/deliveries.py): one a recipient refused stays owed, and the
next run of a day of the month sends it again, to that recipient alone. A
re-run that lowers the spend below a threshold keeps the record: the alert
went out, and the month does not alert for that threshold again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from html import escape

from sqlalchemy import Engine

from billing.config import EmailConfig
from billing.directory.people import Directory
from billing.ledger import messages
from billing.money import money
from billing.notify.deliveries import deliver_once
from billing.notify.mail import Envelope, Letter, MailError, build_message
from billing.publish.answers import budget_statuses, closed
from billing.publish.links import page_url, slug, team_page

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Alert:
    """A team's month crossed `threshold` × its budget; found by the run of `day`."""

    team: str
    month: date  # first day
    threshold: float
    day: date
    spent: float
    budget: float


def crossed_thresholds(engine: Engine, day: date, budgets: dict[str, float], thresholds: list[float]) -> list[Alert]:
    """The thresholds that the month to date of `day` (as the day's pages show it: publish/answers.py) has crossed
    and that no alert was recorded for.

    A closed month alerts no more: finance has booked it.
    """
    month = day.replace(day=1)
    if not budgets or closed(engine, month):
        return []
    sent = messages.alerted(engine, month)
    return [
        Alert(team, month, threshold, day, status.month_to_date, budgets[team])
        for team, status in budget_statuses(engine, budgets, day).items() if status.month_to_date > 0
        for threshold in thresholds
        if status.month_to_date >= threshold * budgets[team] and (team, threshold) not in sent
    ]


def _recorded(engine: Engine, month: date) -> list[Alert]:
    """The alerts recorded for the month."""
    return [Alert(row["team"], month, row["threshold"], row["day"], row["spent"], row["budget"]) for row in
            messages.recorded_alerts(engine, month)]


def record_alerts(engine: Engine, alerts: list[tuple[Alert, list[str]]]) -> None:
    """Record alerts and the message each owes each of its recipients, in one transaction (a concurrent run
    recording one too fails instead of sending twice)."""
    now = datetime.now(timezone.utc)
    messages.record_alerts(
        engine,
        [{"month": a.month, "team": a.team, "threshold": a.threshold, "day": a.day, "spent": a.spent,
          "budget": a.budget, "sent_at": now} for a, _ in alerts],
        [{"day": a.month, "message": message_name(a, address), "address": address, "claimed_at": None,
          "delivered_at": None} for a, addresses in alerts for address in addresses])


def message_name(alert: Alert, address: str) -> str:
    """The alert's message to one address, as the deliveries table and an outbox name it."""
    return f"{alert.month:%Y-%m}-budget-{alert.team}-{round(alert.threshold * 100)}-{slug(address)}"


def alert_letter(alert: Alert, currency: str, reports_url: str = "") -> Letter:
    """Plain text and a minimal HTML body: an alert must read well anywhere; it links to the team's page
    of the day where `reports_url` publishes the reports."""
    month = f"{alert.month:%B %Y}"
    spent = f"{alert.spent / alert.budget:.1%}"  # one figure: the subject's is the body's
    subject = f"Budget alert: {alert.team} has spent {spent} of its {month} budget"
    subject = " ".join("".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in subject).split())
    lines = [
        f"Team {alert.team} has spent {money(alert.spent, currency)} of its {month} budget of "
        f"{money(alert.budget, currency)} ({spent}), crossing {alert.threshold:.0%} "
        f"as the ledger stood after the run of {alert.day}.",
        f"This alert is sent once for {alert.threshold:.0%} of the budget this month.",
    ]
    paragraphs = [escape(line) for line in lines]
    link = page_url(reports_url, team_page(alert.day, alert.team))
    if link:
        lines.append(f"The team's report of {alert.day}: {link}")
        paragraphs.append(f'<a href="{escape(link)}">The team\'s report of {alert.day}</a>')
    html = "<!DOCTYPE html><html><body>" + "".join(f"<p>{p}</p>" for p in paragraphs) + "</body></html>"
    return Letter(subject, "\n\n".join(lines) + "\n", html)


def leads_and_admins(teams: Iterable[str], directory: Directory, email: EmailConfig) -> list[str]:
    """The teams' leads with a mail address, and the admins; each address once (an allocation's alert shares it)."""
    found = []
    for name in teams:
        team = directory.teams.get(name)
        found += [directory.people[uid].mail for uid in (team.leads if team else ()) if directory.people[uid].mail]
    return list(dict.fromkeys([*found, *email.admins]))


def _owed(engine: Engine, month: date, email: EmailConfig, currency: str, reports_url: str) -> list[Envelope]:
    """A message for each recipient of the month's alerts that was not delivered yet (refused, or not tried)."""
    owed = messages.undelivered(engine, month)
    envelopes = []
    for alert in _recorded(engine, month):
        letter = alert_letter(alert, currency, reports_url)
        for name, address in owed.items():
            if name != message_name(alert, address):
                continue
            try:
                envelopes.append(Envelope(name, build_message(email.from_, [address], letter)))
            except MailError as exc:
                log.error("budget alert to %s: %s", address, exc)
    return envelopes


def send_alerts(engine: Engine, day: date, budgets: dict[str, float], thresholds: list[float],
                directory: Directory, email: EmailConfig, currency: str, reports_url: str = "") -> list[str]:
    """Alert every newly crossed threshold once to each recipient, and send again what the month's alerts still
    owe (a refused recipient); one sentence per message that failed."""
    alerts = crossed_thresholds(engine, day, budgets, thresholds)
    if alerts and not email.enabled:
        log.warning("budget: %d threshold(s) crossed, no alert sent (email is not enabled)", len(alerts))
    if not email.enabled or closed(engine, day.replace(day=1)):
        return []
    for alert in alerts:
        log.warning("budget: team %s crossed %.0f%% of its %s budget (%.2f of %.2f %s)", alert.team,
                    100 * alert.threshold, f"{alert.month:%Y-%m}", alert.spent, alert.budget, currency)
    recipients = [(alert, leads_and_admins([alert.team], directory, email)) for alert in alerts]
    for alert, addresses in recipients:
        if not addresses:
            log.warning("budget alert of team %s: no lead with a mail address and no admins; not sent", alert.team)
    if recipients:
        record_alerts(engine, recipients)
    month = day.replace(day=1)
    return deliver_once(_owed(engine, month, email, currency, reports_url), email, engine, month)
