"""Where a run's directory comes from: an LDIF export (`directory.ldif`) or the live LDAP servers.

Kept out of billing/directory/people.py, on which billing/directory/ldap.py builds, so that
the two do not import each other.
"""

from __future__ import annotations

from pathlib import Path

from billing.config import Config, DirectoryConfig
from billing.directory.ldap import read_ldap
from billing.directory.names import check_names
from billing.directory.people import Directory, read_ldif


def load_directory(config: DirectoryConfig) -> Directory:
    """The whole directory, read once per run."""
    if config.ldif:
        return read_ldif(Path(config.ldif), config)
    return read_ldap(config)


def check_directory(config: Config) -> str:
    """One line for `billing check`: the directory read whole, as the nightly run reads it, holding every team and
    person the config names (ConfigError naming each one it does not)."""
    directory = load_directory(config.directory)
    named = check_names(config, directory)
    led = sum(1 for team in directory.teams.values() if team.leads)
    source = f"directory file {config.directory.ldif}" if config.directory.ldif else "directory " + ", ".join(config.directory.urls)
    return (f"{source}: {len(directory.people)} people, {len(directory.teams)} teams ({led} with a lead); "
            f"the {named} teams and people the config names are in it")
