"""What an assistant may ask of the ledger through `billing mcp`, each question answered by billing/publish/answers.py
for one viewer under the rules of `billing serve` (billing/web/access.py).

A tool's answer is the JSON document the command line prints for the same question (`billing report --format json`,
`billing statement --format json`) or, where the command line has no such question (what changed, waste, where a
figure comes from), one built from those same answers, so that an assistant quotes the figures of the pages and
reports to the cent. Nothing here knows the MCP SDK: billing/web/mcp_server.py registers the tools and turns their
errors into one-sentence tool errors.
"""

from __future__ import annotations

import json
import re
from datetime import date

import pandas as pd
from sqlalchemy import Engine

from billing.config import Config
from billing.days import FIRST_DAY, LAST_DAY, NotADay, parse_day, yesterday
from billing.publish import answers
from billing.publish.report import Report, ReportError, Subject, breakdown, report_range
from billing.publish.report_formats import json_text
from billing.publish.statement_formats import json_text as statement_json
from billing.web.access import Viewer, spelled
from billing.web.app import LONGEST_RANGE

RULES = [  # how a ledger row's figures are made (docs/spec.md "Billing arithmetic")
    "quantity: resource-hours the pod requested while Running, sampled every step (docs/spec.md Rule 4)",
    "unit_price: the cluster's price in force that day, per GPU model for GPUs (Rule 6, 'Prices over time')",
    "list_cost = quantity × unit_price; cost = list_cost less the pod's priority-class discount (Rule 8)",
    "a person's namespace on k teams is split equally among them (Rule 7); unrequested-* rows are the "
    "cluster's capacity nobody requested, shared by requests",
]
AUDIT = ("a day is written only when its self-audit agreed (audit.enabled; a sample of pods billed again instant by "
         "instant), so every day the ledger holds passed it, or was run with audit.enabled false")


class Tools:
    """The tools over one ledger and configuration; each takes the viewer it answers for."""

    def __init__(self, ledger: Engine, config: Config) -> None:
        self.ledger, self.config = ledger, config

    def subject(self, viewer: Viewer, team: str | None, person: str | None) -> Subject:
        """A team, a person, or by default everything for an admin and one's own costs for anyone else, as serve's
        /api/v1/costs decides it; Forbidden when the viewer may not see it."""
        if team and person:
            raise ReportError("give team or person, not both")
        if team:
            subject = viewer.team(team)
        elif person:
            subject = viewer.person(person)
        else:
            subject = viewer.everything() if viewer.admin else viewer.person(viewer.uid)
        return spelled(self.ledger, subject)

    def range(self, first: str | None, last: str | None, names: tuple[str, str] = ("first_day", "last_day")
              ) -> tuple[date, date]:
        """The first and last day (YYYY-MM-DD; errors name the arguments `names`), by default the month to
        yesterday; at most LONGEST_RANGE days, as in serve."""
        begin, end = report_range(self.config.zone, _day(names[0], first), _day(names[1], last))
        if (end - begin).days >= LONGEST_RANGE:
            raise ReportError(f"the range {begin} to {end} is longer than {LONGEST_RANGE} days; ask for a shorter one")
        return begin, end

    def costs(self, viewer: Viewer, team: str | None = None, person: str | None = None, first: str | None = None,
              last: str | None = None, by: str | None = None) -> dict:
        """`billing report --format json` of the subject and range."""
        subject = self.subject(viewer, team, person)
        begin, end = self.range(first, last)
        return _json(answers.report(self.ledger, self.config, subject, begin, end,
                                    breakdown(by, self.config.cost_labels)))

    def changes(self, viewer: Viewer, before_from: str, before_to: str, after_from: str, after_to: str,
                team: str | None = None, person: str | None = None) -> dict:
        """Each breakdown's groups with cost before, after and the change, and the price sets in force between."""
        subject = self.subject(viewer, team, person)
        found = answers.changes(self.ledger, self.config, subject,
                                self.range(before_from, before_to, ("before_first_day", "before_last_day")),
                                self.range(after_from, after_to, ("after_first_day", "after_last_day")))
        before, after = found.before["namespace"], found.after["namespace"]
        return {
            **_whose(subject), "currency": after.currency,
            "before": {"from": before.first.isoformat(), "to": before.last.isoformat(), "total_cost": before.total_cost,
                       "missing_days": [day.isoformat() for day in before.missing_days]},
            "after": {"from": after.first.isoformat(), "to": after.last.isoformat(), "total_cost": after.total_cost,
                      "missing_days": [day.isoformat() for day in after.missing_days]},
            "change": after.total_cost - before.total_cost,
            **{f"by_{by}": found.differences(by) for by in answers.CHANGE_BREAKDOWNS},
            "price_changes": [{"cluster": cluster, "from": day.isoformat()} for cluster, day in found.price_changes],
        }

    def waste(self, viewer: Viewer, team: str | None = None, person: str | None = None, first: str | None = None,
              last: str | None = None) -> dict:
        """Idle GPU-hours and unused CPU core-hours over the range, as serve's pages show them."""
        subject = self.subject(viewer, team, person)
        begin, end = self.range(first, last)
        frame = answers.waste(self.ledger, subject, begin, end)
        return {**_whose(subject), "from": begin.isoformat(), "to": end.isoformat(),
                "per": answers.WASTE_KEYS[subject.kind], "rows": _records(frame)}

    def budget(self, viewer: Viewer, team: str, as_of: str | None = None) -> dict:
        """The team's month of `as_of` (default yesterday) against its budget, and the month's forecast: the
        figures `billing report --team TEAM --to AS_OF --format json` carries."""
        subject = spelled(self.ledger, viewer.team(team))
        day = _day("as_of", as_of) or yesterday(self.config.zone)
        answer = answers.report(self.ledger, self.config, subject, day.replace(day=1), day, "namespace")
        status = answer.budget
        assert status is not None  # a team's report always carries its budget status
        return {"team": subject.name, "currency": answer.currency, "budget_month": f"{day:%Y-%m}",
                "as_of": day.isoformat(), "budget": status.budget, "month_to_date": status.month_to_date,
                "forecast": None if status.closed else status.forecast, "used": status.used,
                "forecast_share": None if status.closed else status.forecast_share, "days_left": status.days_left,
                "forecast_method": answers.FORECAST_METHOD, "month_closed": status.closed}

    def statement(self, viewer: Viewer, month: str, team: str | None = None) -> dict:
        """`billing statement --month MONTH [--team TEAM] --format json`: a team's for its leads, all for admins."""
        if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", month) or not FIRST_DAY.year <= int(month[:4]) <= LAST_DAY.year:
            raise ReportError(f"month={month!r} is not a month like 2026-11")
        subject = spelled(self.ledger, viewer.team(team)) if team else viewer.everything()
        first = date(int(month[:4]), int(month[5:]), 1)
        return json.loads(statement_json(answers.statement(self.ledger, self.config, first, subject.name)))

    def figure_source(self, viewer: Viewer, day: str, team: str | None = None, person: str | None = None) -> dict:
        """Where a day's figures come from: its ledger rows, the prices in force, the rules, the run and its audit."""
        subject = self.subject(viewer, team, person)
        found = answers.source(self.ledger, self.config, subject, _day("day", day) or yesterday(self.config.zone))
        return {**_json(found.rows), "prices": found.prices, "rules": RULES, "run": found.run,
                "data_coverage": [{"cluster": cluster, "coverage": share} for cluster, share in found.coverage],
                "audit": AUDIT}


def _day(name: str, value: str | None) -> date | None:
    """A day argument, None when absent; NotADay naming it when it is no day."""
    if value is None or value == "":
        return None
    try:
        return parse_day(value)
    except NotADay as exc:
        raise NotADay(f"{name}={exc}") from None


def _json(report: Report) -> dict:
    """The report as `billing report --format json` prints it."""
    return json.loads(json_text(report))


def _whose(subject: Subject) -> dict:
    return {"team": subject.name if subject.kind == "team" else None,
            **({"person": subject.name} if subject.kind == "person" else {})}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows with None where a measure is NaN (no day of the group measured it)."""
    return [{k: None if pd.isna(v) else v for k, v in row.items()} for row in frame.to_dict("records")]
