import logging

import pytest

from billing.config import DirectoryConfig
from billing.directory import (
    Directory,
    DirectoryError,
    Person,
    Team,
    directory_from_json,
    directory_to_json,
    normalise_dn,
)
from billing.directory_sources import check_directory, load_directory

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
    assert check_directory(config(path)) == f"directory file {path}: 2 people, 2 teams (1 with a lead)"
