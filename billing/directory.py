"""People, teams and team leads, from an LDIF file or a live LDAP directory.

Both sources produce the same plain entries (DN and attributes), and
`build_directory` turns entries into a `Directory` the same way for both:
members and leads may be DNs (groupOfNames, Active Directory) or bare uids
(posixGroup memberUid), and a person may instead name their teams' DNs
(Active Directory memberOf); DNs are compared normalised. A member that
names no person (someone who left) is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ldap3.core.exceptions import LDAPInvalidDnError
from ldap3.utils.dn import parse_dn
from ldif import LDIFParser

from billing.config import DirectoryConfig

log = logging.getLogger(__name__)


class DirectoryError(Exception):
    """The directory could not be read; the message names the source and cause."""


@dataclass(frozen=True)
class Person:
    uid: str
    name: str
    mail: str


@dataclass(frozen=True)
class Team:
    name: str
    members: tuple[str, ...]  # uids
    leads: tuple[str, ...]  # uids
    cost_center: str = ""  # from teams.cost_center_attribute, for monthly statements
    budget: float | None = None  # per month, from teams.budget_attribute


@dataclass(frozen=True)
class Directory:
    people: dict[str, Person]
    teams: dict[str, Team]
    _teams_of: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        memberships: dict[str, list[str]] = {}
        for team in sorted(self.teams.values(), key=lambda t: t.name):
            for uid in team.members:
                memberships.setdefault(uid, []).append(team.name)
        self._teams_of.update({uid: tuple(names) for uid, names in memberships.items()})

    def teams_of(self, uid: str) -> tuple[str, ...]:
        """The teams a person is on, sorted by name."""
        return self._teams_of.get(uid, ())


@dataclass(frozen=True)
class Entry:
    """One directory entry; attribute names lower-case, values as strings."""

    dn: str
    attributes: dict[str, list[str]]

    def first(self, name: str) -> str:
        values = self.attributes.get(name.lower(), [])
        return values[0] if values else ""

    def all(self, name: str) -> list[str]:
        return self.attributes.get(name.lower(), [])


def normalise_dn(dn: str) -> str:
    """Case- and space-insensitive form of a DN, for comparing member DNs."""
    try:
        return ",".join(f"{attr.strip().lower()}={value.strip().lower()}" for attr, value, _ in parse_dn(dn, strip=True))
    except LDAPInvalidDnError:
        return dn.strip().lower()


def _under(dn: str, base: str) -> bool:
    if not base:
        return True
    dn, base = normalise_dn(dn), normalise_dn(base)
    return dn == base or dn.endswith("," + base)


def build_directory(people: Iterable[Entry], teams: Iterable[Entry], config: DirectoryConfig) -> Directory:
    """People and teams from entries; memberships resolved by DN or uid, from either side."""
    p, t = config.people, config.teams
    persons: dict[str, Person] = {}
    uid_by_dn: dict[str, str] = {}
    joined: dict[str, list[str]] = {}  # normalised team DN -> uids naming it in member_of_attribute
    for entry in people:
        uid = entry.first(p.uid_attribute)
        if not uid:
            continue
        persons[uid] = Person(uid, entry.first(p.name_attribute) or uid, entry.first(p.mail_attribute))
        uid_by_dn[normalise_dn(entry.dn)] = uid
        for team_dn in entry.all(p.member_of_attribute) if p.member_of_attribute else []:
            joined.setdefault(normalise_dn(team_dn), []).append(uid)

    def resolve(values: list[str], team: str, role: str) -> tuple[str, ...]:
        uids = []
        for value in values:
            uid = uid_by_dn.get(normalise_dn(value)) if "=" in value else (value if value in persons else None)
            if uid is None:
                log.warning("team %s: %s %r names no person in the directory; skipped", team, role, value)
            elif uid not in uids:
                uids.append(uid)
        return tuple(uids)

    groups: dict[str, Team] = {}
    for entry in teams:
        name = entry.first(t.name_attribute)
        if not name:
            continue
        members = resolve(entry.all(t.member_attribute), name, "member")
        members += tuple(uid for uid in sorted(joined.get(normalise_dn(entry.dn), [])) if uid not in members)
        groups[name] = Team(name, members=members, leads=resolve(entry.all(t.lead_attribute), name, "lead"),
                            cost_center=entry.first(t.cost_center_attribute) if t.cost_center_attribute else "",
                            budget=_budget(entry, name, t.budget_attribute))
    return Directory(persons, groups)


def _budget(entry: Entry, team: str, attribute: str) -> float | None:
    """A team's monthly budget from its directory entry; a value that is no positive amount is skipped."""
    value = entry.first(attribute) if attribute else ""
    if not value:
        return None
    try:
        budget = float(value.replace(",", ""))
    except ValueError:
        budget = math.nan
    if not (math.isfinite(budget) and budget > 0):
        log.warning("team %s: %s %r is not a positive amount; no budget from the directory", team, attribute, value)
        return None
    return budget


def read_ldif(path: Path, config: DirectoryConfig) -> Directory:
    """A directory exported as LDIF: people below people.base, teams below teams.base."""
    try:
        with path.open("rb") as stream:
            records = [
                Entry(dn, {k.lower(): [_text(v) for v in vs] for k, vs in attrs.items()})
                for dn, attrs in LDIFParser(stream).parse()
                if dn
            ]
    except OSError as exc:
        raise DirectoryError(f"directory file {path} cannot be read: {exc.strerror}") from None
    except ValueError as exc:
        raise DirectoryError(f"directory file {path} is not valid LDIF: {exc}") from None
    uid_attr = config.people.uid_attribute.lower()
    people = [e for e in records if _under(e.dn, config.people.base) and uid_attr in e.attributes]
    person_dns = {e.dn for e in people}
    teams = [e for e in records if _under(e.dn, config.teams.base) and e.dn not in person_dns]
    return build_directory(people, teams, config)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def load_directory(config: DirectoryConfig) -> Directory:
    """The whole directory, read once per run."""
    if config.ldif:
        return read_ldif(Path(config.ldif), config)
    from billing.ldap import read_ldap  # the live directory: its own module

    return read_ldap(config)


def check_directory(config: DirectoryConfig) -> str:
    """One line for `billing check`: the directory read whole, as the nightly run reads it."""
    directory = load_directory(config)
    led = sum(1 for team in directory.teams.values() if team.leads)
    source = f"directory file {config.ldif}" if config.ldif else "directory " + ", ".join(config.urls)
    return f"{source}: {len(directory.people)} people, {len(directory.teams)} teams ({led} with a lead)"


def directory_to_json(directory: Directory) -> str:
    """The directory as JSON, stored by each successful run for `on_failure: last_known`."""
    return json.dumps(
        {
            "people": [asdict(person) for person in directory.people.values()],
            "teams": [asdict(team) for team in directory.teams.values()],
        }
    )


def directory_from_json(text: str) -> Directory:
    """The inverse of `directory_to_json`."""
    data = json.loads(text)
    people = [Person(**person) for person in data["people"]]
    teams = [Team(t["name"], tuple(t["members"]), tuple(t["leads"]), t.get("cost_center", ""), t.get("budget"))
             for t in data["teams"]]
    return Directory({p.uid: p for p in people}, {t.name: t for t in teams})
