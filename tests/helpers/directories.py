"""A small LDAP directory for the real slapd."""

from __future__ import annotations

from fixtures.directory import directory_ldif

LDIF = directory_ldif(["alice", "bob", "carol"], {"robotics": ["alice", "bob"]}, {"robotics": ["alice"]})

BASE = "dc=example,dc=org"
# the top of a directory with people and teams below it, for a test's own entries after it
TREE = f"""\
dn: {BASE}
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=people,{BASE}
objectClass: organizationalUnit
ou: people

dn: ou=teams,{BASE}
objectClass: organizationalUnit
ou: teams

"""
