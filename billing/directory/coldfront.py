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

import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

import requests

from billing.accounts import Subject, SubjectKind, misspelled_namespace
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
    """The allocations in the configured statuses that name a namespace or a team, by id.

    The whole read, every answer and page, has `coldfront.timeout`: a server that sends its answer a byte every few
    seconds is never silent for as long as one read may wait, and would hold the night for hours. So it is read in
    a thread of its own that the night waits for no longer; one that is still reading then is left to end with its
    next silent read, or with the process (a daemon), and its answer is not used."""
    asking = _Asking(f"{config.url.rstrip('/')}/api/projects/")
    answer: Future[tuple[MappedAllocation, ...]] = Future()

    def read() -> None:
        try:
            answer.set_result(_read(config, asking))
        except BaseException as exc:  # handed to the night, which raises it
            answer.set_exception(exc)

    threading.Thread(target=read, name="coldfront", daemon=True).start()
    try:
        return answer.result(timeout=config.timeout)
    except TimeoutError:
        raise _too_slow(config, asking.url) from None


@dataclass
class _Asking:
    """The address the read is asking: what a ColdFront too slow is named by."""

    url: str


def _read(config: ColdFrontConfig, asking: _Asking) -> tuple[MappedAllocation, ...]:
    """`read_allocations`' answer, read as long as it takes."""
    with requests.Session() as session:
        session.headers["Authorization"] = f"Token {config.secret('token') or ''}"
        session.verify = config.ca_file or True
        pis = _pis(config, _listed(session, config, "projects/", asking))
        allocations = _listed(session, config, "allocations/?allocation_attributes=true", asking)
    mapped = [found for allocation in allocations if (found := _mapped(config, allocation, pis)) is not None]
    return tuple(sorted(mapped, key=lambda a: a.id))


def _too_slow(config: ColdFrontConfig, url: str) -> ColdFrontError:
    """One sentence for a read past coldfront.timeout, however it ran out (a silent read or the whole read's)."""
    return ColdFrontError(f"ColdFront at {redact(url)} did not answer within {config.timeout:g} s (coldfront.timeout)")


def _mapped(config: ColdFrontConfig, allocation: Any, pis: dict[str, str]) -> MappedAllocation | None:
    """An allocation as billing reads it, None where it pays for nothing billing bills; one that is not as ColdFront's
    API gives them (no id, an attribute without its type) is a ColdFrontError, not a guess."""
    try:
        values: dict[str, list[str]] = {}
        for attribute in allocation.get("allocation_attributes") or []:
            values.setdefault(attribute["allocation_attribute_type"], []).append(str(attribute["value"]).strip())
        subjects = tuple(Subject(kind, value) for kind, name in _subject_attributes(config)
                         if name for value in dict.fromkeys(values.get(name, [])) if value)
        if not subjects or allocation.get("status") not in config.statuses:
            return None
        accounts = tuple(dict.fromkeys(value for value in values.get(config.account_attribute, []) if value))
        project = str(allocation.get("project") or "")
        return MappedAllocation(int(allocation["id"]), project, pis.get(project, ""), subjects, accounts)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ColdFrontError(f"ColdFront at {redact(config.url)} gave an allocation billing cannot read "
                             f"({type(exc).__name__}: {str(exc)[:100]}) in {redact(str(allocation))[:200]}: is it "
                             f"ColdFront's REST API?") from None


def allocations_of(config: ColdFrontConfig, directory: Directory) -> tuple[tuple[MappedAllocation, ...], tuple[str, ...]]:
    """The allocations that pay for namespaces and teams, their teams as the directory spells them, and a sentence for
    each subject left out (`as_the_directory_spells`): what the night and `billing check` read."""
    return as_the_directory_spells(read_allocations(config), directory)


def as_the_directory_spells(allocations: tuple[MappedAllocation, ...], directory: Directory
                            ) -> tuple[tuple[MappedAllocation, ...], tuple[str, ...]]:
    """Each allocation's teams as the directory spells them (a PI's `Robotics` is team robotics, as LDAP compares
    names, and the ledger keeps the directory's spelling), and a sentence for each team the directory does not hold
    and each namespace no cluster could have (`Speech-Lab`): left out, as an unknown account id is, so that their
    charges go as if ColdFront named them nothing, rather than to an account through a name nothing is billed to.
    An allocation left with no subject is kept: its usage written back is 0.00."""
    kept, unknown = [], []
    for allocation in allocations:
        subjects: list[Subject] = []
        for subject in allocation.subjects:
            team = directory.team(subject.name) if subject.kind == "team" else None
            mistake = (misspelled_namespace(subject.name) if subject.kind == "namespace" else
                       "" if team else "the directory does not hold")
            if mistake:
                unknown.append(f"{allocation.source} names {subject}, which {mistake}: correct the value, or its "
                               f"charges go as if ColdFront named none")
            else:
                subjects.append(Subject(subject.kind, team.name if team else subject.name))
        kept.append(replace(allocation, subjects=tuple(dict.fromkeys(subjects))))
    return tuple(kept), tuple(unknown)


def _pis(config: ColdFrontConfig, projects: list[Any]) -> dict[str, str]:
    """Each project's PI by its title; a project not as ColdFront's API gives them is a ColdFrontError."""
    try:
        return {str(project["title"]): str(project.get("pi") or "") for project in projects}
    except (AttributeError, KeyError, TypeError) as exc:
        raise ColdFrontError(f"ColdFront at {redact(config.url)} gave a project billing cannot read "
                             f"({type(exc).__name__}: {str(exc)[:100]}): is it ColdFront's REST API?") from None


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


def _listed(session: requests.Session, config: ColdFrontConfig, path: str, asking: _Asking) -> list[dict[str, Any]]:
    """Every object of a list endpoint: one answer, or its pages where ColdFront is set to paginate."""
    url: str | None = f"{config.url.rstrip('/')}/api/{path}"
    found: list[dict[str, Any]] = []
    while url:
        asking.url = url
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
        # not followed: a sign-in page or another site would answer in the API's place
        response = session.get(url, timeout=config.timeout, allow_redirects=False)
    except requests.Timeout:
        raise _too_slow(config, url) from None
    except requests.RequestException as exc:
        raise ColdFrontError(f"ColdFront at {shown} is unreachable ({type(exc).__name__}: "
                             f"{redact(str(exc))[:200]})") from None
    if response.status_code in (401, 403):
        raise ColdFrontError(f"ColdFront at {shown} refused the token ({response.status_code}): give "
                             f"{config.secret_source('token')} the API token of a staff user") from None
    if response.is_redirect:
        raise ColdFrontError(f"ColdFront at {shown} answered {response.status_code} sending billing to "
                             f"{redact(response.headers.get('Location', ''))[:200]} (a sign-in page, or another "
                             f"address): give coldfront.url the address where the REST API answers the token itself")
    if response.status_code != 200:
        raise ColdFrontError(f"ColdFront at {shown} answered {response.status_code} {response.reason}: its own log "
                             f"says why")
    try:
        return response.json()
    except ValueError:
        raise ColdFrontError(f"ColdFront at {shown} answered with no JSON: is its REST API plugin on "
                             f"(PLUGIN_API=True)?") from None
