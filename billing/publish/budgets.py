"""Monthly budgets: the month to date against the budget, a forecast of the month's end, alerts once per threshold.

A team's budget is `budgets.monthly[team]` from the config, else the value of
the team's `teams.budget_attribute` in the directory. Spend is what the
ledger charges to the team for the month's days (its `cost`): adjustments
that correct a closed month are booked on statements, not counted here.

The forecast is FORECAST_METHOD: the month to date plus the mean daily cost
of the last FORECAST_DAYS days that a run completed (days never run are left
out of the mean, not counted as zero) times the days left in the month.

Crossing a share of the budget in `budgets.alert_at` (by what was spent, not
by the forecast) alerts the team's leads and the admins once per threshold
and month: the alert is recorded in the ledger database before it is sent,
so a re-run or a backfill finds it and sends nothing again; if sending fails
to every recipient the record is removed again, so the next run retries
(if some recipients got it, it stays sent, and the run reports the others). A re-run that lowers
the spend below a threshold keeps the record: the alert went out, and the
month does not alert for that threshold again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from html import escape

from sqlalchemy import Engine, and_, delete, func, insert, select

from billing.config import BudgetsConfig, EmailConfig
from billing.days import days_in_month
from billing.directory.people import Directory
from billing.ledger.tables import budget_alerts, chargeback, closed_months, completed, fetch, read_rows, transaction
from billing.notify.mail import Envelope, Letter, MailError, build_message, deliver
from billing.publish.formatting import money
from billing.publish.links import page_url, team_page

log = logging.getLogger(__name__)

FORECAST_DAYS = 7
FORECAST_METHOD = (
    f"month to date + the mean daily cost of the last {FORECAST_DAYS} billed days × the days left in the month"
)


@dataclass(frozen=True)
class BudgetStatus:
    """One team's month as of a day: what it may spend, has spent, and will have spent at this rate."""

    team: str
    as_of: date
    budget: float | None  # None: the team has no budget
    month_to_date: float
    forecast: float

    @property
    def used(self) -> float | None:
        """Share of the budget spent."""
        return self.month_to_date / self.budget if self.budget else None

    @property
    def forecast_share(self) -> float | None:
        return self.forecast / self.budget if self.budget else None

    @property
    def days_left(self) -> int:
        return days_left(self.as_of)


def days_left(day: date) -> int:
    """Days of the month after `day`."""
    return days_in_month(day) - day.day


def team_budgets(config: BudgetsConfig, directory: Directory | None) -> dict[str, float]:
    """Each team's monthly budget: the config's, else the directory's."""
    budgets = {name: team.budget for name, team in (directory.teams if directory else {}).items() if team.budget}
    return budgets | dict(config.monthly)


def forecast(month_to_date: float, recent: list[float | None], as_of: date) -> float:
    """FORECAST_METHOD; `recent` holds the daily costs of the days up to `as_of`, None for a day never run."""
    billed = [cost for cost in recent[-FORECAST_DAYS:] if cost is not None]
    rate = sum(billed) / len(billed) if billed else 0.0
    return month_to_date + rate * days_left(as_of)


def budget_status(team: str, budget: float | None, as_of: date, daily: dict[date, float], runs: set[date]) -> BudgetStatus:
    """The status from a team's daily costs (`daily`, days without rows may be absent) and the days run."""
    month = as_of.replace(day=1)
    month_to_date = sum(cost for day, cost in daily.items() if month <= day <= as_of)
    recent_days = [as_of - timedelta(days=n) for n in range(FORECAST_DAYS - 1, -1, -1)]
    recent = [daily.get(day, 0.0) if day in runs else None for day in recent_days]
    return BudgetStatus(team, as_of, budget, month_to_date, forecast(month_to_date, recent, as_of))


def read_budget_status(engine: Engine, team: str, as_of: date, budget: float | None) -> BudgetStatus:
    """A team's status as of a day, from the ledger (for `billing report`)."""
    first = min(as_of.replace(day=1), as_of - timedelta(days=FORECAST_DAYS - 1))
    rows = read_rows(engine, first, as_of, team)
    daily = {day: float(cost) for day, cost in rows.groupby("day")["cost"].sum().items()}
    return budget_status(team, budget, as_of, daily, completed(engine, first, as_of))


# --- alerts -----------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    """A team's month crossed `threshold` × its budget; found by the run of `day`."""

    team: str
    month: date  # first day
    threshold: float
    day: date
    spent: float
    budget: float


def _month_spend(engine: Engine, month: date, teams: list[str]) -> dict[str, float]:
    last = month.replace(day=days_in_month(month))
    query = (select(chargeback.c.team, func.sum(chargeback.c.cost).label("spent"))
             .where(chargeback.c.day.between(month, last), chargeback.c.team.in_(teams))
             .group_by(chargeback.c.team))
    return {row["team"]: row["spent"] for row in fetch(engine, query)}


def crossed_thresholds(engine: Engine, day: date, budgets: dict[str, float], thresholds: list[float]) -> list[Alert]:
    """The thresholds that the month of `day` has crossed by now and that no alert was recorded for.

    A closed month alerts no more: finance has booked it.
    """
    month = day.replace(day=1)
    if not budgets or fetch(engine, select(closed_months.c.month).where(closed_months.c.month == month)):
        return []
    spent = _month_spend(engine, month, sorted(budgets))
    sent = {(row["team"], row["threshold"]) for row in
            fetch(engine, select(budget_alerts.c.team, budget_alerts.c.threshold).where(budget_alerts.c.month == month))}
    return [
        Alert(team, month, threshold, day, spent[team], budget)
        for team, budget in sorted(budgets.items()) if team in spent
        for threshold in thresholds
        if spent[team] >= threshold * budget and (team, threshold) not in sent
    ]


def _key(alert: Alert):
    return and_(budget_alerts.c.month == alert.month, budget_alerts.c.team == alert.team,
                budget_alerts.c.threshold == alert.threshold)


def record_alerts(engine: Engine, alerts: list[Alert]) -> None:
    """Record alerts as sent, in one transaction (a concurrent run recording one too fails instead of sending twice)."""
    now = datetime.now(timezone.utc)
    with transaction(engine, "recording budget alerts") as conn:
        conn.execute(insert(budget_alerts), [
            {"month": a.month, "team": a.team, "threshold": a.threshold, "day": a.day, "spent": a.spent,
             "budget": a.budget, "sent_at": now} for a in alerts])


def forget_alerts(engine: Engine, alerts: list[Alert]) -> None:
    """Remove the records of alerts that could not be sent, so that the next run sends them."""
    with transaction(engine, "removing unsent budget alerts") as conn:
        for alert in alerts:
            conn.execute(delete(budget_alerts).where(_key(alert)))


def alert_letter(alert: Alert, currency: str, reports_url: str = "") -> Letter:
    """Plain text and a minimal HTML body: an alert must read well anywhere; it links to the team's page
    of the day where `reports_url` publishes the reports."""
    month = f"{alert.month:%B %Y}"
    subject = f"Budget alert: {alert.team} has spent {alert.spent / alert.budget:.0%} of its {month} budget"
    subject = " ".join("".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in subject).split())
    lines = [
        f"Team {alert.team} has spent {money(alert.spent, currency)} of its {month} budget of "
        f"{money(alert.budget, currency)} ({alert.spent / alert.budget:.1%}), crossing {alert.threshold:.0%} "
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


def _envelopes(alert: Alert, directory: Directory, email: EmailConfig, currency: str,
               reports_url: str) -> list[Envelope]:
    team = directory.teams.get(alert.team)
    addresses = [directory.people[uid].mail for uid in (team.leads if team else ()) if directory.people[uid].mail]
    addresses += [a for a in email.admins if a not in addresses]
    letter = alert_letter(alert, currency, reports_url)
    name = f"{alert.month:%Y-%m}-budget-{alert.team}-{round(alert.threshold * 100)}"
    envelopes = []
    for number, address in enumerate(addresses):
        try:
            envelopes.append(Envelope(f"{name}-{number}", build_message(email.from_, [address], letter)))
        except MailError as exc:
            log.error("budget alert to %s: %s", address, exc)
    return envelopes


def send_alerts(engine: Engine, day: date, budgets: dict[str, float], thresholds: list[float],
                directory: Directory, email: EmailConfig, currency: str, reports_url: str = "") -> list[str]:
    """Alert every newly crossed threshold once; one sentence per message that failed."""
    alerts = crossed_thresholds(engine, day, budgets, thresholds)
    if not alerts:
        return []
    if not email.enabled:
        log.warning("budget: %d threshold(s) crossed, no alert sent (email is not enabled)", len(alerts))
        return []
    record_alerts(engine, alerts)
    failures, unsent = [], []
    for alert in alerts:
        log.warning("budget: team %s crossed %.0f%% of its %s budget (%.2f of %.2f %s)", alert.team,
                    100 * alert.threshold, f"{alert.month:%Y-%m}", alert.spent, alert.budget, currency)
        envelopes = _envelopes(alert, directory, email, currency, reports_url)
        if not envelopes:
            log.warning("budget alert of team %s: no lead with a mail address and no admins; not sent", alert.team)
            continue
        failed = deliver(envelopes, email)
        failures += failed
        if len(failed) == len(envelopes):  # nobody got it: the next run tries again
            unsent.append(alert)
    if unsent:
        forget_alerts(engine, unsent)
    return failures
