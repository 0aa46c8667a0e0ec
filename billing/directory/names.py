"""The teams and people the config names, looked up in the directory the run reads; the namespaces its accounts'
assignments name, looked up among those the clusters billed.

A name the directory does not hold would bill a team nobody leads (`team: visoin`), and one it spells otherwise
(`team: ROBOTICS` for `robotics`) would split a team in two in the ledger, which keeps names as they are written.
So `billing run`, `backfill` and `check` refuse both as a configuration error (exit status 2), naming each key
with the closest names the directory holds or its spelling, before any store is asked.

A namespace is not the directory's: an assignment may fund one before it is made, so one no cluster has billed is a
warning, named with the closest billed (`visoin`: a typo charges nothing). One in another case is no Kubernetes
namespace, which the config refuses (billing/config/accounts.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from datetime import date

from billing.accounts import AccountAssignment
from billing.config import AccountsConfig, Config, ConfigError, DirectoryName
from billing.directory.people import Directory, ledger_name

CLOSEST = 3  # names suggested for one the directory does not hold


def check_names(config: Config, directory: Directory) -> int:
    """How many names the config gives, each found in `directory` as spelled; ConfigError naming every one not."""
    names = config.directory_names()
    mistakes = [mistake for name in names if (mistake := _mistake(name, directory))]
    if mistakes:
        raise ConfigError("; ".join(mistakes))
    return len(names)


def _mistake(named: DirectoryName, directory: Directory) -> str:
    """Why the directory does not hold `named` as the config spells it; '' when it does."""
    if named.kind == "team":
        team = directory.team(named.name)
        spelled, written, known = (team.name if team else None), ledger_name(named.name), list(directory.teams)
    else:
        person = directory.person(named.name)
        spelled, written, known = (person.uid if person else None), named.name, list(directory.people)
    if spelled == written:
        return ""
    if spelled is not None:
        otherwise = ("no statement would take it off" if named.key.startswith("credits.")
                     else f"its costs are kept apart from the rest of the {named.kind}'s")
        return (f"{named.key}: the directory spells this {named.kind} {spelled!r}, not {named.name!r}: write it so, "
                f"or {otherwise}")
    return f"{named.key}: the directory has no {named.kind} {named.name!r} ({_closest(named.name, known)})"


def assigned_namespaces(section: AccountsConfig, day: date) -> set[str]:
    """The namespaces the assignments valid on `day` name."""
    return {assignment.subject.name for assignment in _namespace_assignments(section, day)}


def unbilled_namespaces(section: AccountsConfig, day: date, billed: Collection[str]) -> list[str]:
    """A sentence for each namespace an assignment valid on `day` names that is not among the `billed` namespaces
    (those the clusters billed: the night's and the ledger's)."""
    return [f"{assignment.source}.namespace: no cluster has billed a namespace {assignment.subject.name!r} "
            f"({_closest(assignment.subject.name, billed)}): correct it if it is a typo; until a cluster bills it, "
            f"the assignment charges nothing"
            for assignment in _namespace_assignments(section, day) if assignment.subject.name not in billed]


def _namespace_assignments(section: AccountsConfig, day: date) -> list[AccountAssignment]:
    return [assignment for assignment in section.accounts().assignments
            if assignment.subject.kind == "namespace" and assignment.valid_on(day)]


def _closest(name: str, known: Collection[str]) -> str:
    """The names of `known` closest to `name` whatever their case, as a clause."""
    by_key = {other.casefold(): other for other in sorted(known)}
    closest = [by_key[key] for key in difflib.get_close_matches(name.casefold(), by_key, CLOSEST)]
    return f"the closest: {', '.join(closest)}" if closest else "none is close"
