"""Directory snapshots (for `on_failure: last_known`) and the `billing check` line."""

from __future__ import annotations

from pathlib import Path

from billing.config import DirectoryConfig
from billing.directory import Directory, Person, Team, check_directory, directory_from_json, directory_to_json

LDIF = """\
dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice Liddell
sn: Liddell
mail: alice@example.org

dn: uid=bob,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: bob
cn: Bob
sn: Bob
mail: bob@example.org

dn: cn=robotics,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: robotics
member: uid=alice,ou=people,dc=example,dc=org
member: uid=bob,ou=people,dc=example,dc=org
owner: uid=bob,ou=people,dc=example,dc=org

dn: cn=vision,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: vision
member: uid=alice,ou=people,dc=example,dc=org
"""


def write_ldif(tmp_path: Path) -> DirectoryConfig:
    path = tmp_path / "directory.ldif"
    path.write_text(LDIF)
    return DirectoryConfig(
        ldif=str(path), people={"base": "ou=people,dc=example,dc=org"}, teams={"base": "ou=teams,dc=example,dc=org"}
    )


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
    config = write_ldif(tmp_path)
    assert check_directory(config) == f"directory file {config.ldif}: 2 people, 2 teams (1 with a lead)"
