"""Who pays for a namespace: docs/spec.md "Rule 7: owner and team", as a pure function."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from billing import frames
from billing.config import NamespaceRules
from billing.directory.people import Directory


def owners_of(namespace: str, directory: Directory, rules: NamespaceRules) -> list[tuple[str, str | None, float]]:
    """(team, owner, share) for one namespace; the shares add up to exactly 1. uids and team names
    match the directory's without regard to case (as LDAP matches them) and are written as it spells them."""
    if namespace in rules.overrides:
        named = rules.overrides[namespace]
        team = directory.team(named)  # the directory's spelling, whose leads get the summary
        return [(team.name if team else named, None, 1.0)]
    team_match = re.search(rules.team_pattern, namespace)
    team = directory.team(team_match.group("team")) if team_match else None
    if team:
        return [(team.name, None, 1.0)]
    person_match = re.search(rules.person_pattern, namespace)
    person = directory.person(person_match.group("uid")) if person_match else None
    if person:
        teams = directory.teams_of(person.uid) or (rules.unallocated_team,)
        return [(team, person.uid, 1.0 / len(teams)) for team in teams]
    return [(rules.unallocated_team, None, 1.0)]


def assign_owners(namespaces: Iterable[str], directory: Directory, rules: NamespaceRules) -> pd.DataFrame:
    """One row per (namespace, team): frames.OWNERSHIP.columns."""
    rows = [
        (namespace, team, owner, share)
        for namespace in sorted(set(namespaces))
        for team, owner, share in owners_of(namespace, directory, rules)
    ]
    return pd.DataFrame(rows, columns=frames.OWNERSHIP.columns)


def unallocated_reason(namespace: str, owner: str | None, directory: Directory, rules: NamespaceRules) -> str:
    """Why a namespace was charged to the unallocated team, for the admins who fix it: its ledger `owner`
    (rule 3: a person on no team), else which name rule found nothing in the directory."""
    if owner:
        return f"person {owner} is on no team"
    if rules.overrides.get(namespace) == rules.unallocated_team:
        return "namespaces.overrides charges it here"
    team_match = re.search(rules.team_pattern, namespace)
    person_match = re.search(rules.person_pattern, namespace)
    if team_match and not directory.team(team_match.group("team")):
        return f"no team {team_match.group('team')!r} in the directory"
    if person_match and directory.person(person_match.group("uid")):
        return f"person {person_match.group('uid')} is on no team"
    if person_match:
        return f"no person {person_match.group('uid')!r} in the directory"
    return "the name matches neither a team nor a person pattern"
