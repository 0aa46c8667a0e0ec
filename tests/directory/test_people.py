import hashlib
import json
import logging

import pytest

from billing.config import Config, DirectoryConfig
from billing.directory.people import (
    AmbiguousDirectoryError,
    Directory,
    DirectoryError,
    Person,
    Team,
    directory_from_json,
    directory_to_json,
    normalise_dn,
)
from billing.directory.sources import check_directory, load_directory
from tests.helpers.config import MINIMAL_CONFIG

LDIF = """\
version: 1

dn: dc=example,dc=org
objectClass: domain
dc: example

dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice Liddell
sn: Liddell
mail: alice@example.org

dn: uid=bob,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: bob
cn:: QsO2YiBNw7xsbGVy
sn: Muller
mail: bob@example.org

dn: cn=robotics,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: robotics
member: uid=alice,ou=people,dc=example,dc=org
member: UID=Bob, OU=People, DC=Example, DC=Org
member: uid=gone,ou=people,dc=example,dc=org
owner: uid=alice,ou=people,dc=example,dc=org
owner: uid=bob,ou=people,dc=example,dc=org

dn: cn=vision,ou=teams,dc=example,dc=org
objectClass: posixGroup
cn: vision
gidNumber: 1001
memberUid: bob
"""


def config(path, **teams) -> DirectoryConfig:
    return DirectoryConfig(
        ldif=str(path),
        people={"base": "ou=people,dc=example,dc=org"},
        teams={"base": "ou=teams,dc=example,dc=org", **teams},
    )


def test_people_teams_and_leads_from_ldif(tmp_path, caplog):
    path = tmp_path / "directory.ldif"
    path.write_text(LDIF)
    with caplog.at_level(logging.WARNING):
        directory = load_directory(config(path))
    assert sorted(directory.people) == ["alice", "bob"]
    assert directory.people["bob"].name == "Böb Müller"  # base64 value decoded as UTF-8
    robotics = directory.teams["robotics"]
    assert robotics.members == ("alice", "bob")  # DN matched regardless of case and spaces
    assert robotics.leads == ("alice", "bob")
    assert "uid=gone" in caplog.text and "skipped" in caplog.text
    assert directory.teams_of("alice") == ("robotics",)
    assert directory.teams["vision"].members == ()  # member_attribute is member, not memberUid


def test_posix_group_members_by_uid(tmp_path):
    path = tmp_path / "directory.ldif"
    path.write_text(LDIF)
    directory = load_directory(config(path, member_attribute="memberUid"))
    assert directory.teams["vision"].members == ("bob",)
    assert directory.teams_of("bob") == ("vision",)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(DirectoryError, match="cannot be read"):
        load_directory(config(tmp_path / "missing.ldif"))
    bad = tmp_path / "bad.ldif"
    bad.write_text("dn: uid=x,dc=example\nthis line has no colon\n")
    with pytest.raises(DirectoryError, match="not valid LDIF"):
        load_directory(config(bad))


def test_normalise_dn():
    assert normalise_dn("UID=Bob, OU=People,dc=Example") == "uid=bob,ou=people,dc=example"
    assert normalise_dn(r"cn=Smith\, John,ou=x") == normalise_dn(r"CN=smith\, john, ou=X")


def test_a_snapshot_restores_people_teams_leads_and_memberships():
    directory = Directory(
        {"alice": Person("alice", "Alice Liddell", "alice@example.org"), "bob": Person("bob", "Bob", "")},
        {"robotics": Team("robotics", ("alice", "bob"), ("bob",)), "vision": Team("vision", ("alice",), ())},
    )
    restored = directory_from_json(directory_to_json(directory))

    assert restored.people == directory.people
    assert restored.teams == directory.teams
    assert restored.teams_of("alice") == ("robotics", "vision")


def test_check_reads_the_whole_directory_and_counts_it(tmp_path):
    path = tmp_path / "directory.ldif"
    path.write_text(LDIF)
    whole = Config.model_validate({**MINIMAL_CONFIG, "directory": config(path).model_dump(),
                                   "budgets": {"monthly": {"vision": 10}}})
    assert check_directory(whole) == (f"directory file {path}: 2 people, 2 teams (1 with a lead); the 1 teams and "
                                      "people the config names are in it")


# --- names compared as LDAP compares them; ambiguity refused

PEOPLE = "ou=people,dc=example,dc=org"


def person_entry(dn: str, uid: str, mail: str) -> str:
    return f"dn: {dn}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\nmail: {mail}\n"


def load(tmp_path, ldif: str, **teams) -> Directory:
    path = tmp_path / "directory.ldif"
    path.write_text(ldif)
    return load_directory(config(path, **teams))


def test_uids_and_team_names_match_without_regard_to_case(tmp_path):
    ldif = LDIF.replace("uid: alice", "uid: Alice") + """
dn: cn=NLP,ou=teams,dc=example,dc=org
objectClass: posixGroup
cn: NLP
gidNumber: 1002
memberUid: ALICE
"""
    directory = load(tmp_path, ldif, member_attribute="memberUid")
    assert directory.person("alice") == directory.person("ALICE") == Person("Alice", "Alice Liddell", "alice@example.org")
    assert directory.team("nlp").name == "NLP" and directory.team("nlp").members == ("Alice",)
    assert directory.teams_of("alice") == ("NLP",)
    assert directory.person("carol") is None and directory.team("robot") is None


SECOND_ROBOTICS = ("dn: cn=Robotics,ou=archive,ou=teams,dc=example,dc=org\nobjectClass: groupOfNames\ncn: Robotics\n"
                   "member: uid=bob,ou=people,dc=example,dc=org\n")


@pytest.mark.parametrize("extra, both", [
    (person_entry("uid=alice,ou=contractors,ou=people,dc=example,dc=org", "alice", "evil@attacker.example"),
     "'uid=alice,ou=people,dc=example,dc=org' and 'uid=alice,ou=contractors,ou=people,dc=example,dc=org' have the "
     "same uid 'alice'"),
    (person_entry("uid=ALICE,ou=contractors,ou=people,dc=example,dc=org", "ALICE", "evil@attacker.example"),
     "'uid=alice,ou=people,dc=example,dc=org' and 'uid=ALICE,ou=contractors,ou=people,dc=example,dc=org' have the "
     "same uid 'ALICE'"),
    (SECOND_ROBOTICS, "'cn=robotics,ou=teams,dc=example,dc=org' and 'cn=Robotics,ou=archive,ou=teams,dc=example,dc=org' "
                      "have the same team name 'Robotics'"),
])
def test_two_people_with_one_uid_or_two_teams_with_one_name_are_refused_naming_both(tmp_path, extra, both):
    with pytest.raises(AmbiguousDirectoryError) as refused:
        load(tmp_path, LDIF + "\n" + extra)
    assert str(refused.value) == (
        f"the directory is ambiguous: {both} (compared without regard to case), so nobody is billed or mailed "
        "from a guess"
    )


def test_member_dns_match_after_rfc_4514_normalisation(tmp_path):
    ldif = LDIF + "\n" + person_entry(r"cn=Erin\, Example,ou=people,dc=example,dc=org", "erin", "erin@example.org") + """
dn: cn=nlp,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: nlp
member: cn=Erin\\2C Example,ou=people,dc=example,dc=org
owner: CN = ERIN\\2c  EXAMPLE , OU=People,DC=Example,DC=Org
"""
    nlp = load(tmp_path, ldif).team("nlp")
    assert nlp.members == ("erin",) and nlp.leads == ("erin",)


def test_normalised_dns_of_one_entry_are_equal_and_of_two_are_not():
    assert normalise_dn(r"cn=Erin\2C Example,dc=org") == normalise_dn(r"CN=erin\, example,DC=ORG") == (
        r"cn=erin\, example,dc=org")
    assert normalise_dn(r"cn=J\C3\BCrgen+uid=j,dc=org") == normalise_dn("UID=J+cn=jürgen,dc=org")  # UTF-8 bytes
    assert normalise_dn(r"cn=a\,b,dc=org") != normalise_dn("cn=a,cn=b,dc=org")  # an escaped comma is no separator
    assert normalise_dn(r"cn=a\2Bb,dc=org") != normalise_dn("cn=a+cn=b,dc=org")


def test_a_team_name_longer_than_the_ledger_stores_is_cut_with_a_hash(tmp_path, caplog):
    long = "robotics-" + "x" * 291  # 300 characters, all lower case: name_key is the name itself
    ldif = LDIF.replace("cn: robotics", f"cn: {long}").replace("dn: cn=robotics,", f"dn: cn={long},")
    with caplog.at_level(logging.WARNING):
        directory = load(tmp_path, ldif)
    short = long[:244] + "~" + hashlib.sha256(long.encode()).hexdigest()[:8]
    assert len(short) == 253 and sorted(directory.teams) == sorted([short, "vision"])
    assert directory.teams_of("alice") == (short,) and directory.team(short).leads == ("alice", "bob")
    assert f"has 300 characters, more than the 253 the ledger stores: billed as {short!r}" in caplog.text


def test_a_snapshot_with_one_uid_twice_is_refused():
    text = json.dumps({"people": [{"uid": "alice", "name": "Alice", "mail": "alice@example.org"},
                                  {"uid": "Alice", "name": "Evil", "mail": "evil@attacker.example"}], "teams": []})
    with pytest.raises(AmbiguousDirectoryError, match="^the directory is ambiguous: 'alice' and 'Alice' have the same"):
        directory_from_json(text)


@pytest.mark.parametrize(("value", "budget"), [
    ("60,000.50", 60000.5), ("NaN", None), ("inf", None), ("-5", None), ("0", None), ("1e400", None), ("80%", None),
    ("1e13", None),  # beyond what budgets.monthly takes (below 1e12): no month's budget of a research cluster
])
def test_a_budget_in_the_directory_is_a_positive_amount_the_config_would_take_or_none(tmp_path, caplog, value, budget):
    ldif = tmp_path / "directory.ldif"
    ldif.write_text(LDIF + f"departmentNumber: {value}\n")  # the vision team's entry
    directory = load_directory(Config.model_validate({**MINIMAL_CONFIG, "directory": {
        "ldif": str(ldif), "teams": {"budget_attribute": "departmentNumber"}}}).directory)
    assert directory.teams["vision"].budget == budget
    assert [r.getMessage() for r in caplog.records if "vision" in r.getMessage()] == ([] if budget else [
        f"team vision: departmentNumber {value!r} is not a positive amount below 1e+12; no budget from the directory"])
