"""Who may see what in `billing serve`, decided from the ledger's own facts.

A person sees their own namespaces (ledger rows whose owner is them, their
share of each); a team lead sees their teams, leads taken from the directory
snapshot the last successful run stored with the ledger; the uids in
`web.admins` see everything. uids match without regard to case, as in LDAP.
Anything else is refused with `Forbidden`, never narrowed down quietly.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from billing.directory.people import directory_from_json
from billing.ledger.read import latest_directory
from billing.publish.report import Subject, known_names


class Forbidden(Exception):
    """The viewer may not see what was asked for; the message says what and why."""


@dataclass(frozen=True)
class Viewer:
    """Someone signed in: their uid (as the directory spells it), whether admin, the teams they lead."""

    uid: str
    admin: bool
    leads: tuple[str, ...]

    def team(self, name: str) -> Subject:
        """The team as a report subject, if this viewer leads it or is an admin."""
        led = next((team for team in self.leads if team.casefold() == name.casefold()), None)
        if not (led or self.admin):
            raise Forbidden(f"{self.uid} is not a lead of team {name!r} (leads come from the directory): a team's "
                            "page shows what each member spent, for its leads and the admins; your own costs are on /me")
        return Subject("team", led or name)

    def person(self, uid: str) -> Subject:
        """A person's own namespaces as a report subject: only the person themselves or an admin."""
        if uid.casefold() != self.uid.casefold() and not self.admin:
            raise Forbidden(f"{self.uid} may see only their own costs, not those of {uid!r}")
        return Subject("person", self.uid if uid.casefold() == self.uid.casefold() else uid)

    def everything(self) -> Subject:
        """All teams: admins only."""
        if not self.admin:
            raise Forbidden(f"{self.uid} is not in web.admins, so cannot see all teams")
        return Subject("all")

    def asked(self, subject: Subject | None) -> Subject:
        """The subject a question names (billing/publish/asked.py), if this viewer may see it; a question naming
        none is about everything for an admin and about one's own costs for anyone else."""
        if subject is None:
            return self.everything() if self.admin else self.person(self.uid)
        if subject.kind == "all" or subject.name is None:
            return self.everything()
        return self.team(subject.name) if subject.kind == "team" else self.person(subject.name)


def viewer(engine: Engine, uid: str, admins: list[str]) -> Viewer:
    """The viewer of a signed-in uid; without a stored directory nobody leads a team."""
    stored = latest_directory(engine)
    directory = directory_from_json(stored[1]) if stored else None
    people = directory.people if directory else {}
    teams = directory.teams.values() if directory else ()
    key = uid.casefold()
    canonical = next((known for known in people if known.casefold() == key), uid)
    led = sorted(team.name for team in teams if any(lead.casefold() == key for lead in team.leads))
    return Viewer(canonical, key in {admin.casefold() for admin in admins}, tuple(led))


def spelled(engine: Engine, subject: Subject) -> Subject:
    """The team or person as the ledger spells it: names match without regard to case, as uids do in LDAP, for
    every viewer alike."""
    if subject.name is None:
        return subject
    names = known_names(engine, subject.kind)
    wanted = subject.name.casefold()
    found = subject.name if subject.name in names else next((n for n in names if n.casefold() == wanted), None)
    return Subject(subject.kind, found or subject.name)
