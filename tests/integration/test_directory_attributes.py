"""A team's cost centre and budget read from a real slapd (teams.cost_center_attribute, teams.budget_attribute)."""

from billing.config import DirectoryConfig
from billing.directory.ldap import read_ldap
from billing.directory.people import directory_from_json, directory_to_json
from tests.helpers.directories import BASE, TREE

LDIF = f"""\
{TREE}dn: uid=alice,ou=people,{BASE}
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A
mail: alice@example.org

dn: cn=robotics,ou=teams,{BASE}
objectClass: groupOfNames
cn: robotics
member: uid=alice,ou=people,{BASE}
businessCategory: CC-4711
description: 60,000

dn: cn=vision,ou=teams,{BASE}
objectClass: groupOfNames
cn: vision
member: uid=alice,ou=people,{BASE}
"""


def test_cost_centre_and_budget_come_from_the_configured_attributes_and_survive_the_snapshot(slapd_server, tmp_path):
    server = slapd_server(LDIF)
    (tmp_path / "password").write_text("secret\n")
    config = DirectoryConfig(url=server.url, bind_dn=f"cn=admin,{BASE}", bind_password_file=str(tmp_path / "password"),
                             people={"base": f"ou=people,{BASE}"},
                             teams={"base": f"ou=teams,{BASE}", "cost_center_attribute": "businessCategory",
                                    "budget_attribute": "description"})
    directory = read_ldap(config)
    assert (directory.teams["robotics"].cost_center, directory.teams["robotics"].budget) == ("CC-4711", 60000.0)
    assert (directory.teams["vision"].cost_center, directory.teams["vision"].budget) == ("", None)
    assert directory_from_json(directory_to_json(directory)).teams == directory.teams  # what statements read later
