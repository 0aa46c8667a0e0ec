"""People, teams and team leads, from an LDIF file or a live LDAP directory.

Both sources produce the same plain entries (DN and attributes), and
`build_directory` turns entries into a `Directory` the same way for both:
members and leads may be DNs (groupOfNames, Active Directory) or bare uids
(posixGroup memberUid), and a person may instead name their teams' DNs
(Active Directory memberOf). A member that names no person (someone who
left) is skipped with a warning.

Names are compared as LDAP compares them: uids and team names (`uid`, `cn`:
caseIgnoreMatch) without regard to case, DNs after RFC 4514 normalisation
(attribute types and values without regard to case, escapes such as `\\2C`
and `\\,` decoded). A directory in which two people share a uid, or two teams
a name, is refused: which of them to bill or mail would be a guess. A team
name longer than the ledger can store is cut, with a hash of the whole name
appended so that names stay apart, and a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from billing.accounts import SubjectKind
from billing.config import HIGHEST_BUDGET, DirectoryConfig
from billing.errors import RunFailed
from billing.frames import LONGEST_NAME

log = logging.getLogger(__name__)


class DirectoryError(RunFailed):
    """The directory could not be read; the message names the source and cause."""


class AmbiguousDirectoryError(DirectoryError):
    """Two entries with one uid or team name: read fine, but unusable (no `last_known` fallback either)."""


@dataclass(frozen=True)
class Person:
    uid: str
    name: str
    mail: str
    dn: str = field(default="", compare=False)  # for naming the entry in errors


@dataclass(frozen=True)
class Team:
    name: str
    members: tuple[str, ...]  # uids
    leads: tuple[str, ...]  # uids
    dn: str = field(default="", compare=False)
    cost_center: str = ""  # from teams.cost_center_attribute, for monthly statements
    budget: float | None = None  # per month, from teams.budget_attribute


@dataclass(frozen=True)
class NamedAccounts:
    """The account ids a source outside the config names for a team, a person or a namespace: a directory entry's
    accounts attribute (one value per account) or a ColdFront allocation (billing/directory/accounts.py turns them
    into assignments)."""

    kind: SubjectKind
    name: str  # as the ledger spells it
    accounts: tuple[str, ...]
    origin: Literal["coldfront", "directory"]
    source: str  # for a sentence naming it: "directory entry cn=robotics,ou=teams,... departmentNumber"


def name_key(name: str) -> str:
    """A uid or team name as LDAP's caseIgnoreMatch compares it: Unicode-normalised, case-folded,
    surrounding spaces dropped and inner runs of spaces as one."""
    return " ".join(unicodedata.normalize("NFKC", name).split()).casefold()


def _index(kind: str, entries: Iterable, name_of: Callable) -> dict:
    """Entries by name_key; two entries under one key make the directory ambiguous."""
    found: dict = {}
    for entry in entries:
        key = name_key(name_of(entry))
        if key in found:
            first = found[key]
            raise AmbiguousDirectoryError(
                f"the directory is ambiguous: {first.dn or name_of(first)!r} and {entry.dn or name_of(entry)!r} "
                f"have the same {kind} {name_of(entry)!r} (compared without regard to case), so nobody is billed "
                "or mailed from a guess"
            )
        found[key] = entry
    return found


@dataclass(frozen=True)
class Directory:
    people: dict[str, Person]
    teams: dict[str, Team]
    named_accounts: tuple[NamedAccounts, ...] = ()  # from the directory's accounts attributes and ColdFront
    _teams_of: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _people_by_key: dict[str, Person] = field(default_factory=dict, repr=False)
    _teams_by_key: dict[str, Team] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, people: Iterable[Person], teams: Iterable[Team], named_accounts: Iterable[NamedAccounts] = ()
           ) -> Directory:
        """A directory of these entries; two people with one uid or two teams with one name are refused."""
        people_by_key = _index("uid", people, lambda person: person.uid)
        teams_by_key = _index("team name", teams, lambda team: team.name)
        return cls({p.uid: p for p in people_by_key.values()}, {t.name: t for t in teams_by_key.values()},
                   tuple(named_accounts))

    def __post_init__(self) -> None:
        self._people_by_key.update(_index("uid", self.people.values(), lambda p: p.uid))
        self._teams_by_key.update(_index("team name", self.teams.values(), lambda t: t.name))
        memberships: dict[str, list[str]] = {}
        for team in sorted(self.teams.values(), key=lambda t: t.name):
            for uid in team.members:
                memberships.setdefault(name_key(uid), []).append(team.name)
        self._teams_of.update({uid: tuple(names) for uid, names in memberships.items()})

    def person(self, uid: str) -> Person | None:
        """The person with this uid, without regard to case."""
        return self._people_by_key.get(name_key(uid))

    def team(self, name: str) -> Team | None:
        """The team with this name, without regard to case; a name too long for the ledger finds its cut form."""
        return self._teams_by_key.get(name_key(ledger_name(name)))

    def teams_of(self, uid: str) -> tuple[str, ...]:
        """The teams a person is on, sorted by name."""
        return self._teams_of.get(name_key(uid), ())


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


ESCAPED = re.compile(r"\\([0-9A-Fa-f]{2}|.)", re.DOTALL)
SPECIAL = re.compile(r'([\\,+="<>;#])')


def _rdns(dn: str) -> tuple[str, ...]:
    """A DN's RDNs in RFC 4514 normal form, for comparing: attribute types lower-case, values with
    their escapes decoded (`\\2C` and `\\,` alike) and compared as name_key does, the parts of a
    multi-valued RDN sorted; an invalid DN is one RDN of its name_key."""
    from ldap3.core.exceptions import LDAPInvalidDnError  # here, not above: `billing report` reads no DN
    from ldap3.utils.dn import parse_dn

    try:
        parts = parse_dn(dn, escape=False, strip=True)
    except LDAPInvalidDnError:
        return (name_key(dn),)
    rdns, current = [], []
    for attribute, value, separator in parts:
        value = SPECIAL.sub(r"\\\1", name_key(_unescape(value)))
        current.append(f"{attribute.strip().lower()}={value}")
        if separator != "+":
            rdns.append("+".join(sorted(current)))
            current = []
    return tuple(rdns)


def _unescape(value: str) -> str:
    """An attribute value of a DN with its escapes decoded; hex pairs are UTF-8 bytes."""
    raw = bytearray()
    position = 0
    for escape in ESCAPED.finditer(value):
        raw += value[position:escape.start()].encode()
        code = escape.group(1)
        raw += bytes.fromhex(code) if len(code) == 2 else code.encode()
        position = escape.end()
    raw += value[position:].encode()
    return raw.decode("utf-8", "replace")


def normalise_dn(dn: str) -> str:
    """The form of a DN two spellings of one entry share, for comparing member DNs."""
    return ",".join(_rdns(dn))


def _under(dn: str, base: str) -> bool:
    if not base:
        return True
    entry, above = _rdns(dn), _rdns(base)
    return len(entry) >= len(above) and entry[len(entry) - len(above):] == above


def ledger_name(name: str) -> str:
    """A name of at most LONGEST_NAME characters; a longer one keeps its start and gets a hash of the
    whole name (without regard to case, like the name itself) so that two long names stay two."""
    if len(name) <= LONGEST_NAME:
        return name
    return f"{name[:LONGEST_NAME - 9]}~{hashlib.sha256(name_key(name).encode()).hexdigest()[:8]}"


def storable(name: str) -> str:
    """A team name the ledger can store, with a warning when it had to be cut."""
    short = ledger_name(name)
    if short != name:
        log.warning("team %r… has %d characters, more than the %d the ledger stores: billed as %r",
                    name[:40], len(name), LONGEST_NAME, short)
    return short


def build_directory(people: Iterable[Entry], teams: Iterable[Entry], config: DirectoryConfig) -> Directory:
    """People and teams from entries; memberships resolved by DN or uid, from either side."""
    p, t = config.people, config.teams
    found: list[Person] = []
    named: list[NamedAccounts] = []
    uid_by_dn: dict[str, str] = {}
    joined: dict[str, list[str]] = {}  # normalised team DN -> uids naming it in member_of_attribute
    for entry in people:
        uid = entry.first(p.uid_attribute)
        if not uid:
            continue
        found.append(Person(uid, entry.first(p.name_attribute) or uid, entry.first(p.mail_attribute), entry.dn))
        uid_by_dn[normalise_dn(entry.dn)] = uid
        named += _named_accounts(entry, "person", uid, p.accounts_attribute)
        for team_dn in entry.all(p.member_of_attribute) if p.member_of_attribute else []:
            joined.setdefault(normalise_dn(team_dn), []).append(uid)
    persons = _index("uid", found, lambda person: person.uid)

    def resolve(values: list[str], team: str, role: str) -> tuple[str, ...]:
        uids = []
        for value in values:
            named = None if "=" in value else persons.get(name_key(value))  # a bare uid (memberUid)
            uid = uid_by_dn.get(normalise_dn(value)) if "=" in value else (named.uid if named else None)
            if uid is None:
                log.warning("team %s: %s %r names no person in the directory; skipped", team, role, value)
            elif uid not in uids:
                uids.append(uid)
        return tuple(uids)

    groups: list[Team] = []
    for entry in teams:
        name = entry.first(t.name_attribute)
        if not name:
            continue
        members = resolve(entry.all(t.member_attribute), name, "member")
        members += tuple(uid for uid in sorted(joined.get(normalise_dn(entry.dn), [])) if uid not in members)
        leads = resolve(entry.all(t.lead_attribute), name, "lead")
        cost_center = entry.first(t.cost_center_attribute) if t.cost_center_attribute else ""
        groups.append(Team(storable(name), members=members, leads=leads, dn=entry.dn, cost_center=cost_center,
                           budget=_budget(entry, name, t.budget_attribute)))
        named += _named_accounts(entry, "team", groups[-1].name, t.accounts_attribute)
    return Directory.of(found, groups, named)


def _named_accounts(entry: Entry, kind: SubjectKind, name: str, attribute: str) -> list[NamedAccounts]:
    """The accounts an entry's attribute names, one per value (a university's directory holds a department number
    or shortcode per value, with no percentages: the subject's charge is split equally between them)."""
    values = list(dict.fromkeys(value.strip() for value in entry.all(attribute) if value.strip())) if attribute else []
    return [NamedAccounts(kind, name, tuple(values), "directory", f"directory entry {entry.dn} {attribute}")
            ] if values else []


def _budget(entry: Entry, team: str, attribute: str) -> float | None:
    """A team's monthly budget from its directory entry; a value that is no positive amount the config would take for
    one (NaN, inf, -5, 1e400, 80 %, 1e13) is skipped: a budget only alerts, so the night is billed all the same."""
    value = entry.first(attribute) if attribute else ""
    if not value:
        return None
    try:
        budget = float(value.replace(",", ""))
    except ValueError:
        budget = math.nan
    if not (math.isfinite(budget) and 0 < budget < HIGHEST_BUDGET):  # the config's bound on budgets.monthly
        log.warning("team %s: %s %r is not a positive amount below %g; no budget from the directory", team, attribute,
                    value, HIGHEST_BUDGET)
        return None
    return budget


def read_ldif(path: Path, config: DirectoryConfig) -> Directory:
    """A directory exported as LDIF: people below people.base, teams below teams.base."""
    from ldif import LDIFParser  # here, not above: `billing report` reads no LDIF

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


def directory_to_json(directory: Directory) -> str:
    """The directory as JSON, stored by each successful run for `on_failure: last_known`."""
    return json.dumps(
        {
            "people": [asdict(person) for person in directory.people.values()],
            "teams": [asdict(team) for team in directory.teams.values()],
            "named_accounts": [asdict(named) for named in directory.named_accounts],
        }
    )


def directory_from_json(text: str) -> Directory:
    """The inverse of `directory_to_json`."""
    data = json.loads(text)
    people = [Person(**person) for person in data["people"]]
    teams = [Team(t["name"], tuple(t["members"]), tuple(t["leads"]), t.get("dn", ""), t.get("cost_center", ""),
                  t.get("budget")) for t in data["teams"]]
    named = [NamedAccounts(n["kind"], n["name"], tuple(n["accounts"]), n["origin"], n["source"])
             for n in data.get("named_accounts", [])]  # snapshots stored before accounts came from the directory
    return Directory.of(people, teams, named)
