"""Who receives which daily summary: admins the all-teams one, each team lead their team's,
and with `email.personal` each person with costs their own.

Every recipient gets a message of their own, so an address that cannot be
used (or a server that refuses it) costs only that one message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from billing.config import EmailConfig
from billing.directory.people import Directory
from billing.notify.letters import admin_letter, person_letter, team_letter
from billing.notify.mail import Envelope, Letter, MailError, build_message
from billing.publish.dayview import DayReport, slug
from billing.publish.digest import PersonalDigest

log = logging.getLogger(__name__)


def _recipients(report: DayReport, directory: Directory, email: EmailConfig,
                reports_url: str) -> list[tuple[str, str, Letter]]:
    """(outbox name, address, letter) for every admin and every lead of a team billed on the day."""
    day = report.day.isoformat()
    admins = admin_letter(report, reports_url)
    recipients = [(f"{day}-admins-{slug(address)}", address, admins) for address in email.admins]
    if not email.team_leads:
        return recipients
    for team in report.teams:
        if not team.by_usage:  # nothing billed to the team on the day
            continue
        listed = directory.team(team.team)
        leads = listed.leads if listed else ()
        letter = team_letter(report, team.team, reports_url)
        for uid in leads:
            person = directory.people[uid]
            if person.mail:
                recipients.append((f"{day}-team-{team.slug}-{slug(uid)}", person.mail, letter))
            else:
                log.warning("team %s: lead %s has no mail address in the directory; no summary sent", team.team, uid)
    return recipients


def _people(digests: Sequence[PersonalDigest], directory: Directory) -> list[tuple[str, str, Letter]]:
    """(outbox name, address, letter) for every person with a digest and a mail address."""
    recipients = []
    for digest in digests:
        person = directory.people.get(digest.uid)
        if person and person.mail:
            recipients.append((f"{digest.last}-person-{slug(digest.uid)}", person.mail, person_letter(digest)))
        else:
            log.warning("person %s: no mail address in the directory; no personal summary sent", digest.uid)
    return recipients


def summary_envelopes(report: DayReport, directory: Directory, email: EmailConfig,
                      digests: Sequence[PersonalDigest] = (), reports_url: str = "") -> tuple[list[Envelope], list[str]]:
    """The day's messages, each linking to its page below `reports_url` when set, and one sentence for each
    recipient whose message could not be built."""
    envelopes, failures = [], []
    for name, address, letter in _recipients(report, directory, email, reports_url) + _people(digests, directory):
        try:
            envelopes.append(Envelope(name, build_message(email.from_, [address], letter)))
        except MailError as exc:
            failures.append(f"{name}: {exc}")
            log.error("email: %s", failures[-1])
    return envelopes, failures
