"""The directory: people, teams and team leads, from an LDIF export or live LDAP."""
