"""Who pays for a namespace: SPEC.md rule 7, as a pure function."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from billing.config import NamespaceRules
from billing.directory import Directory

OWNERSHIP_COLUMNS = ["namespace", "team", "owner", "share"]


def owners_of(namespace: str, directory: Directory, rules: NamespaceRules) -> list[tuple[str, str | None, float]]:
    """(team, owner, share) for one namespace; the shares add up to exactly 1."""
    if namespace in rules.overrides:
        return [(rules.overrides[namespace], None, 1.0)]
    team_match = re.search(rules.team_pattern, namespace)
    if team_match and team_match.group("team") in directory.teams:
        return [(team_match.group("team"), None, 1.0)]
    person_match = re.search(rules.person_pattern, namespace)
    if person_match and person_match.group("uid") in directory.people:
        uid = person_match.group("uid")
        teams = directory.teams_of(uid) or (rules.unallocated_team,)
        return [(team, uid, 1.0 / len(teams)) for team in teams]
    return [(rules.unallocated_team, None, 1.0)]


def assign_owners(namespaces: Iterable[str], directory: Directory, rules: NamespaceRules) -> pd.DataFrame:
    """One row per (namespace, team): OWNERSHIP_COLUMNS."""
    rows = [
        (namespace, team, owner, share)
        for namespace in sorted(set(namespaces))
        for team, owner, share in owners_of(namespace, directory, rules)
    ]
    return pd.DataFrame(rows, columns=OWNERSHIP_COLUMNS)
