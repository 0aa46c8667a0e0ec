"""The daily summaries' email bodies: the day's numbers laid out by the same templates as the pages.

Each letter is a plain-text part and an HTML part whose CSS is inlined, since
mail clients drop `<style>` blocks; subjects stay one line whatever a team is called.
"""

from __future__ import annotations

import re

import css_inline

from billing.money import money
from billing.notify.mail import Letter
from billing.publish.dayview import DayReport
from billing.publish.digest import PersonalDigest
from billing.publish.links import day_page, page_url, team_page
from billing.publish.pages import render_template


def _subject(report: DayReport, who: str, cost: float) -> str:
    return _one_line(f"Cluster billing {report.day}: {who} {money(cost, report.currency)}")


def _one_line(line: str) -> str:
    """One line whatever the names hold: CR, LF and other controls become spaces."""
    return " ".join(re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", " ", line).split())


_inliner = css_inline.CSSInliner(load_remote_stylesheets=False, keep_at_rules=True)


def _letter(subject: str, template: str, **values) -> Letter:
    html = _inliner.inline(render_template(f"{template}.html.j2", **values))
    return Letter(subject, render_template(f"{template}.txt.j2", **values), html)


def admin_letter(report: DayReport, reports_url: str = "") -> Letter:
    """The all-teams summary for the admins, linking to the day's page where `reports_url` publishes it."""
    return _letter(_subject(report, "all teams", report.cost), "email_admins", report=report,
                   link=page_url(reports_url, day_page(report.day)))


def person_letter(digest: PersonalDigest) -> Letter:
    """A person's own summary (email.personal)."""
    period = f"{digest.first}" if digest.first == digest.last else f"{digest.first} to {digest.last}"
    subject = _one_line(f"Your cluster costs {period}: {money(digest.cost, digest.currency)}")
    return _letter(subject, "email_person", digest=digest)


def team_letter(report: DayReport, team: str, reports_url: str = "") -> Letter:
    """One team's summary, per person, for its leads, linking to the team's page of the day."""
    summary = report.team(team)
    return _letter(_subject(report, f"team {team}", summary.cost), "email_team", report=report, team=summary,
                   link=page_url(reports_url, team_page(report.day, team)))
