"""Accounts read from a real slapd (directory.teams.accounts_attribute, directory.people.accounts_attribute): one
value per account split equally, a missing attribute, an unknown id, the config winning, and `billing check`'s
line."""

from datetime import date
from decimal import Decimal

import pytest

from billing.config import load_config
from billing.directory.accounts import accounts_of, named_assignments
from billing.directory.ldap import read_ldap
from billing.directory.people import directory_from_json, directory_to_json
from billing.jobs.check import CheckWarning, accounts_named, accounts_today
from tests.helpers.directories import BASE, TREE


def entry(dn: str, classes: str, *accounts: str) -> str:
    """An entry of the test's directory with its departmentNumber values."""
    return "".join([f"dn: {dn},{BASE}\n", *(f"objectClass: {c}\n" for c in classes.split()), *(
        f"departmentNumber: {account}\n" for account in accounts)])


def team(name: str, *accounts: str) -> str:
    return entry(f"cn={name},ou=teams", "groupOfNames extensibleObject", *accounts) + (
        f"cn: {name}\nmember: uid=alice,ou=people,{BASE}\n\n")


def person(uid: str, *accounts: str) -> str:
    return entry(f"uid={uid},ou=people", "inetOrgPerson", *accounts) + f"uid: {uid}\ncn: {uid}\nsn: {uid}\n\n"


LDIF = (TREE + person("alice", "G-3") + person("bob") + team("robotics", "G-1", "G-2", "G-1") + team("vision")
        + team("speech", "X-404", "g-1", "NaN", "1e400") + team("nlp", "X-404", "G-2") + team("audio", "G-1"))
NAMES = {"G-1": "NSF CNS-2231", "G-2": "NIH R01", "G-3": "Startup alice", "RC": "Research computing"}
DAY = date(2026, 11, 17)


@pytest.fixture
def config(slapd_server, write_config, tmp_path):
    slapd = slapd_server(LDIF)
    (tmp_path / "password").write_text("secret\n")
    return load_config(write_config(
        directory={"url": slapd.url, "bind_dn": f"cn=admin,{BASE}", "bind_password_file": str(tmp_path / "password"),
                   "people": {"base": f"ou=people,{BASE}", "accounts_attribute": "departmentNumber"},
                   "teams": {"base": f"ou=teams,{BASE}", "filter": "(objectClass=groupOfNames)",
                             "accounts_attribute": "departmentNumber"}},
        accounts={"names": NAMES, "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
                  "default_object_code": "6400",
                  "assignments": [{"team": "audio", "account": "G-2", "from": "2026-11-01"}]}))


def test_the_directory_s_values_split_a_team_equally_the_config_wins_and_check_names_the_unknown(config):
    directory = read_ldap(config.directory)
    accounts = accounts_of(config.accounts, directory)

    def shares(team: str, person: str | None = None) -> list[tuple[str, Decimal]]:
        return [(share.account.id, share.percent) for share in accounts.shares(DAY, team, f"{team}-ns", person)]

    assert shares("robotics") == [("G-1", Decimal(50)), ("G-2", Decimal(50))]  # G-1 twice is one account
    assert shares("vision") == [("RC", Decimal(100))]  # no attribute: the default account
    assert shares("speech") == [("RC", Decimal(100))]  # none of its values is an account, g-1 not G-1 either
    assert shares("nlp") == [("G-2", Decimal(100))]  # the unknown value left out, the known one takes it whole
    assert shares("audio") == [("G-2", Decimal(100))]  # the config's G-2, not the directory's G-1
    assert shares("robotics", "alice") == [("G-3", Decimal(100))]  # her own charges: person over team
    assert shares("robotics", "bob") == [("G-1", Decimal(50)), ("G-2", Decimal(50))]  # bob's entry names none
    assert accounts.shares(date(2020, 1, 1), "robotics", "x", None) == accounts.shares(DAY, "robotics", "x", None)
    # what close and the pages read later: the snapshot the run stores
    assert directory_from_json(directory_to_json(directory)).named_accounts == directory.named_accounts
    unknown = named_assignments(directory.named_accounts, NAMES).unknown
    speech = f"directory entry cn=speech,ou=teams,{BASE} departmentNumber names account {{}} for team speech, which " \
             "accounts.names does not hold{}: name it there, or correct the value"
    assert unknown == (speech.format("'X-404'", ""), speech.format("'g-1'", " (accounts.names spells it 'G-1')"),
                       speech.format("'NaN'", ""), speech.format("'1e400'", ""),
                       f"directory entry cn=nlp,ou=teams,{BASE} departmentNumber names account 'X-404' for team "
                       "nlp, which accounts.names does not hold: name it there, or correct the value")
    # billing check's lines
    with pytest.raises(CheckWarning) as named:
        accounts_named(config, config.accounts)
    assert str(named.value).startswith("5 unknown: directory entry cn=speech,ou=teams,")
    with pytest.raises(CheckWarning) as today:
        accounts_today(config, config.accounts, DAY)
    assert str(today.value).endswith("go to the default account RC unless a namespace's or person's does: speech, "
                                     "vision")
