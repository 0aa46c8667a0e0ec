"""The teams and people the config names, looked up in the directory the run reads.

A name the directory does not hold would bill a team nobody leads (`team: visoin`), and one it spells otherwise
(`team: ROBOTICS` for `robotics`) would split a team in two in the ledger, which keeps names as they are written.
So `billing run`, `backfill` and `check` refuse both as a configuration error (exit status 2), naming each key
with the closest names the directory holds or its spelling, before any store is asked.
"""

from __future__ import annotations

import difflib

from billing.config import Config, ConfigError, DirectoryName
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
    by_key = {name.casefold(): name for name in known}
    closest = [by_key[key] for key in difflib.get_close_matches(named.name.casefold(), by_key, CLOSEST)]
    nearest = f"the closest: {', '.join(closest)}" if closest else "none is close"
    return f"{named.key}: the directory has no {named.kind} {named.name!r} ({nearest})"
