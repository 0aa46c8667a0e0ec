"""The live directory reader against ldap3's in-memory mock server (fast), and closed ports.

The real-server behaviour (TLS, binds, size limits, outages) is covered by
tests/integration/test_ldap.py against slapd; here: the three layouts, paging
and what becomes of the entries.
"""

from __future__ import annotations

import logging

import pytest
from ldap3 import MOCK_SYNC, Connection, Server

from billing.charge.ownership import assign_owners
from billing.config import DirectoryConfig, NamespaceRules
from billing.directory.ldap import PAGE_SIZE, read_entries, read_ldap
from billing.directory.people import DirectoryError
from fixtures.servers import free_port

URL = "ldap://mock.example.org"


def mock_connection(entries: dict[str, dict]) -> Connection:
    connection = Connection(Server("mock"), client_strategy=MOCK_SYNC)
    for dn, attributes in entries.items():
        connection.strategy.add_entry(dn, attributes)
    connection.bind()
    return connection


def person(uid: str, **extra) -> tuple[str, dict]:
    return f"uid={uid},ou=people,dc=example,dc=org", {
        "objectClass": ["inetOrgPerson", "posixAccount"],
        "uid": uid,
        "cn": uid.title(),
        "sn": uid,
        "mail": f"{uid}@example.org",
        **extra,
    }


OPENLDAP_PEOPLE = dict(person(u) for u in ("alice", "bob", "carol"))

GROUP_OF_NAMES = DirectoryConfig(
    url=URL,
    people={"base": "ou=people,dc=example,dc=org"},
    teams={"base": "ou=teams,dc=example,dc=org"},
)


def test_group_of_names_members_and_leads_are_dns_compared_normalised():
    connection = mock_connection(
        {
            **OPENLDAP_PEOPLE,
            "cn=robotics,ou=teams,dc=example,dc=org": {
                "objectClass": ["groupOfNames"],
                "cn": "robotics",
                "member": ["uid=alice,ou=people,dc=example,dc=org", "UID=Bob, OU=People, DC=Example, DC=Org"],
                "owner": ["uid=carol,ou=people,dc=example,dc=org"],
            },
            "cn=vision,ou=teams,dc=example,dc=org": {
                "objectClass": ["groupOfNames"],
                "cn": "vision",
                "member": ["uid=alice,ou=people,dc=example,dc=org", "uid=carol,ou=people,dc=example,dc=org"],
                "owner": ["uid=alice,ou=people,dc=example,dc=org", "uid=carol,ou=people,dc=example,dc=org"],
            },
        }
    )
    directory = read_entries(connection, URL, GROUP_OF_NAMES)

    assert sorted(directory.people) == ["alice", "bob", "carol"]
    assert directory.people["carol"].mail == "carol@example.org"
    assert directory.people["bob"].name == "Bob"
    assert directory.teams["robotics"].members == ("alice", "bob")
    assert directory.teams["robotics"].leads == ("carol",)
    assert directory.teams["vision"].leads == ("alice", "carol")
    assert directory.teams_of("alice") == ("robotics", "vision")


def test_posix_group_members_are_uids_and_someone_who_left_is_skipped(caplog):
    connection = mock_connection(
        {
            **OPENLDAP_PEOPLE,
            "cn=robotics,ou=groups,dc=example,dc=org": {
                "objectClass": ["posixGroup"],
                "cn": "robotics",
                "gidNumber": "5001",
                "memberUid": ["alice", "bob", "dave"],  # dave left: no person entry
            },
        }
    )
    config = DirectoryConfig(
        url=URL,
        people={"base": "ou=people,dc=example,dc=org", "filter": "(objectClass=posixAccount)"},
        teams={
            "base": "ou=groups,dc=example,dc=org",
            "filter": "(objectClass=posixGroup)",
            "member_attribute": "memberUid",
            "lead_attribute": "",
        },
    )
    with caplog.at_level(logging.WARNING):
        directory = read_entries(connection, URL, config)

    assert directory.teams["robotics"].members == ("alice", "bob")
    assert directory.teams["robotics"].leads == ()
    assert "'dave' names no person" in caplog.text


AD_USERS = "OU=Users,DC=corp,DC=example,DC=com"
AD_GROUPS = "OU=Teams,DC=corp,DC=example,DC=com"


def ad_user(account: str, groups: list[str]) -> tuple[str, dict]:
    member_of = {"memberOf": [f"CN={g},{AD_GROUPS}" for g in groups]} if groups else {}
    return f"CN={account.title()},{AD_USERS}", {
        "objectClass": ["top", "person", "organizationalPerson", "user"],
        "sAMAccountName": account,
        "displayName": f"{account.title()} Example",
        "mail": f"{account}@corp.example.com",
        **member_of,
    }


AD = DirectoryConfig(
    url=URL,
    people={
        "base": AD_USERS,
        "filter": "(&(objectClass=user)(!(objectClass=computer)))",
        "uid_attribute": "sAMAccountName",
        "name_attribute": "displayName",
        "member_of_attribute": "memberOf",
    },
    teams={"base": AD_GROUPS, "filter": "(objectClass=group)", "lead_attribute": "managedBy"},
)


def test_active_directory_membership_from_member_of_and_from_the_group():
    connection = mock_connection(
        {
            **dict([ad_user("alice", ["Robotics", "Vision"]), ad_user("bob", []), ad_user("carol", ["vision"])]),
            f"CN=Robotics,{AD_GROUPS}": {
                "objectClass": ["group"],
                "cn": "Robotics",
                "member": [f"CN=Bob,{AD_USERS}"],  # bob only through the group's member list
                "managedBy": [f"cn=carol,{AD_USERS.lower()}"],
            },
            f"CN=Vision,{AD_GROUPS}": {"objectClass": ["group"], "cn": "Vision"},
        }
    )
    directory = read_entries(connection, URL, AD)

    assert sorted(directory.people) == ["alice", "bob", "carol"]
    assert directory.people["alice"].name == "Alice Example"
    assert directory.teams["Robotics"].members == ("bob", "alice")
    assert directory.teams["Vision"].members == ("alice", "carol")
    assert directory.teams["Robotics"].leads == ("carol",)
    assert directory.teams_of("alice") == ("Robotics", "Vision")


def test_more_people_than_a_page_are_read_in_pages():
    people = 2 * PAGE_SIZE + 3
    teams = {"ou=teams,dc=example,dc=org": {"objectClass": ["organizationalUnit"], "ou": "teams"}}
    connection = mock_connection({**dict(person(f"u{i:04d}") for i in range(people)), **teams})
    searches = []
    search = connection.search
    connection.search = lambda *args, **kwargs: searches.append(kwargs["paged_size"]) or search(*args, **kwargs)

    directory = read_entries(connection, URL, GROUP_OF_NAMES)

    assert len(directory.people) == people
    assert searches == [PAGE_SIZE] * 4  # three pages of people, one of (no) teams


def test_a_failed_search_names_the_server_and_the_base():
    connection = mock_connection(OPENLDAP_PEOPLE)
    config = DirectoryConfig(url=URL, people={"base": "ou=staff,dc=example,dc=org"})
    expected = r"^directory ldap://mock\.example\.org: searching ou=staff,dc=example,dc=org .*noSuchObject"
    with pytest.raises(DirectoryError, match=expected):
        read_entries(connection, URL, config)


def test_names_made_of_filter_syntax_match_nobody():
    connection = mock_connection(
        {
            **OPENLDAP_PEOPLE,
            "cn=robotics,ou=teams,dc=example,dc=org": {
                "objectClass": ["groupOfNames"],
                "cn": "robotics",
                "member": ["uid=alice,ou=people,dc=example,dc=org"],
            },
        }
    )
    directory = read_entries(connection, URL, GROUP_OF_NAMES)
    rules = NamespaceRules(team_pattern=r"^team-(?P<team>.+)$", person_pattern=r"^(?P<uid>.+)$")
    hostile = ["a*)(uid=*", "*", "team-*", "team-robotics)(cn=*", "alice)(|(uid=*"]

    ownership = assign_owners(hostile + ["alice"], directory, rules)

    by_namespace = ownership.set_index("namespace")
    assert set(by_namespace.loc[hostile, "team"]) == {"unallocated"}
    assert by_namespace.loc[hostile, "owner"].isna().all()
    assert by_namespace.loc["alice", "team"] == "robotics"


def test_when_no_server_answers_the_error_names_each_url_and_its_cause():
    down = [f"ldap://127.0.0.1:{free_port()}", f"ldap://127.0.0.1:{free_port()}"]
    with pytest.raises(DirectoryError) as failure:
        read_ldap(DirectoryConfig(url=down))
    assert str(failure.value) == (
        f"no directory server could be read: directory {down[0]}: connection failed (Connection refused);"
        f" directory {down[1]}: connection failed (Connection refused); the directory is down or url is wrong"
    )
