"""ColdFront's projects and allocations, read over its REST API (the `coldfront.plugins.api` plugin, read-only:
GET /api/projects/ and /api/allocations/?allocation_attributes=true with a user's token), as the accounts its
allocations name for namespaces and teams (docs/spec.md "Accounts from ColdFront").

An allocation in one of the configured statuses pays for the namespaces and teams its `namespace_attribute` and
`team_attribute` name, charged to the accounts its `account_attribute` names; an allocation with neither
attribute is not billing's (a Slurm account, a storage quota) and is left alone. What it names becomes
`NamedAccounts` of origin "coldfront", which billing/directory/accounts.py turns into assignments as it does the
directory's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from billing.accounts import Subject, SubjectKind
from billing.config import ColdFrontConfig
from billing.directory.people import Directory, NamedAccounts
from billing.errors import RunFailed
from billing.redact import redact


class ColdFrontError(RunFailed):
    """ColdFront did not answer, or not as its REST API does; the sentence names the URL and the cause."""


@dataclass(frozen=True)
class MappedAllocation:
    """An allocation that pays for namespaces or teams: what it names, and its project's PI."""

    id: int
    project: str
    pi: str
    subjects: tuple[Subject, ...]
    accounts: tuple[str, ...]  # as its account attribute's values give them, in their order

    @property
    def source(self) -> str:
        return f"ColdFront allocation {self.id} (project {self.project!r}, PI {self.pi or 'unknown'})"


def read_allocations(config: ColdFrontConfig) -> tuple[MappedAllocation, ...]:
    """The allocations in the configured statuses that name a namespace or a team, by id."""
    with requests.Session() as session:
        session.headers["Authorization"] = f"Token {config.secret('token') or ''}"
        session.verify = config.ca_file or True
        pis = {project["title"]: project.get("pi") or "" for project in _listed(session, config, "projects/")}
        allocations = _listed(session, config, "allocations/?allocation_attributes=true")
    mapped = []
    for allocation in allocations:
        values: dict[str, list[str]] = {}
        for attribute in allocation.get("allocation_attributes") or []:
            values.setdefault(attribute["allocation_attribute_type"], []).append(str(attribute["value"]).strip())
        subjects = tuple(Subject(kind, value) for kind, name in _subject_attributes(config)
                         if name for value in dict.fromkeys(values.get(name, [])) if value)
        if subjects and allocation.get("status") in config.statuses:
            accounts = tuple(dict.fromkeys(value for value in values.get(config.account_attribute, []) if value))
            mapped.append(MappedAllocation(int(allocation["id"]), allocation.get("project") or "",
                                           pis.get(allocation.get("project") or "", ""), subjects, accounts))
    return tuple(sorted(mapped, key=lambda a: a.id))


def _subject_attributes(config: ColdFrontConfig) -> tuple[tuple[SubjectKind, str], ...]:
    """Which attribute names each kind of subject."""
    return (("namespace", config.namespace_attribute), ("team", config.team_attribute))


def named_by(allocations: tuple[MappedAllocation, ...]) -> tuple[NamedAccounts, ...]:
    """What each allocation names, per subject, for billing/directory/accounts.py."""
    return tuple(NamedAccounts(subject.kind, subject.name, allocation.accounts, "coldfront", allocation.source)
                 for allocation in allocations for subject in allocation.subjects)


def with_allocations(directory: Directory, allocations: tuple[MappedAllocation, ...]) -> Directory:
    """The directory holding, beside its own, the accounts the allocations name: what the run stores and close
    reads."""
    return Directory.of(directory.people.values(), directory.teams.values(),
                        directory.named_accounts + named_by(allocations))


def with_accounts_as_stored(directory: Directory, stored: Directory | None) -> Directory:
    """The directory holding the accounts the last stored directory names (the directory's and ColdFront's as of the
    last night that read both) in place of its own: a night ColdFront does not answer draws allocations with the
    accounts its pages and the month's close read, not with the directory's alone. Without a stored directory,
    the directory's own."""
    if stored is None:
        return directory
    return Directory.of(directory.people.values(), directory.teams.values(), stored.named_accounts)


def _listed(session: requests.Session, config: ColdFrontConfig, path: str) -> list[dict[str, Any]]:
    """Every object of a list endpoint: one answer, or its pages where ColdFront is set to paginate."""
    url: str | None = f"{config.url.rstrip('/')}/api/{path}"
    found: list[dict[str, Any]] = []
    while url:
        answer = _get(session, config, url)
        if isinstance(answer, list):
            return found + answer
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
            raise ColdFrontError(f"ColdFront at {redact(url)} answered with no list of objects: is it ColdFront's "
                                 f"REST API (PLUGIN_API=True)?")
        found += answer["results"]
        url = answer.get("next")
    return found


def _get(session: requests.Session, config: ColdFrontConfig, url: str) -> Any:
    """One answer's JSON; any failure as a ColdFrontError naming the URL, the cause and the fix."""
    shown = redact(url)
    try:
        response = session.get(url, timeout=config.timeout)
    except requests.Timeout:
        raise ColdFrontError(f"ColdFront at {shown} did not answer within {config.timeout:g} s "
                             f"(coldfront.timeout)") from None
    except requests.RequestException as exc:
        raise ColdFrontError(f"ColdFront at {shown} is unreachable ({type(exc).__name__}: "
                             f"{redact(str(exc))[:200]})") from None
    if response.status_code in (401, 403):
        raise ColdFrontError(f"ColdFront at {shown} refused the token ({response.status_code}): give "
                             f"{config.secret_source('token')} the API token of a staff user") from None
    if response.status_code != 200:
        raise ColdFrontError(f"ColdFront at {shown} answered {response.status_code} {response.reason}")
    try:
        return response.json()
    except ValueError:
        raise ColdFrontError(f"ColdFront at {shown} answered with no JSON: is its REST API plugin on "
                             f"(PLUGIN_API=True)?") from None
