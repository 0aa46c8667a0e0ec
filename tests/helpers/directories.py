"""A small LDAP directory for the real slapd."""

from __future__ import annotations

from fixtures.directory import directory_ldif

LDIF = directory_ldif(["alice", "bob", "carol"], {"robotics": ["alice", "bob"]}, {"robotics": ["alice"]})
