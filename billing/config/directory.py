"""Who people and teams are: the LDAP directory (or an LDIF export) and the rules that give a namespace its
team or person."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from billing.config.section import ConfigPath, Duration, Section, check_ca_file
from billing.redact import redact


class PeopleConfig(Section):
    base: str = ""
    filter: str = "(objectClass=inetOrgPerson)"
    uid_attribute: str = "uid"
    name_attribute: str = "cn"
    mail_attribute: str = "mail"
    member_of_attribute: str = ""  # e.g. memberOf (Active Directory): a person's team DNs
    accounts_attribute: str = ""  # e.g. departmentNumber: the accounts a person's own charges go to, one per value


class TeamsConfig(Section):
    base: str = ""
    filter: str = "(objectClass=groupOfNames)"
    name_attribute: str = "cn"
    member_attribute: str = "member"
    lead_attribute: str = "owner"
    cost_center_attribute: str = ""  # e.g. departmentNumber: the team's cost centre on its monthly statement
    budget_attribute: str = ""  # a team's monthly budget in the directory; budgets.monthly overrides it
    accounts_attribute: str = ""  # e.g. departmentNumber: the accounts a team's charges go to, one per value


class DirectoryConfig(Section):
    ldif: ConfigPath = ""  # a directory exported to an LDIF file instead of a live server
    url: str | list[str] = ""
    bind_dn: str = ""
    bind_password_env: str = ""
    bind_password_file: ConfigPath = ""
    ca_file: ConfigPath = ""
    starttls: bool = False  # upgrade ldap:// connections to TLS; ldaps:// is TLS already
    connect_timeout: Duration = 10.0
    timeout: Duration = 30.0  # for each answer from the server
    on_failure: Literal["fail", "last_known"] = "fail"  # last_known: use the last run's directory
    people: PeopleConfig = PeopleConfig()
    teams: TeamsConfig = TeamsConfig()
    SECRETS = ("bind_password",)

    @property
    def urls(self) -> list[str]:
        """The servers to try, in order (a failover list)."""
        return [self.url] if isinstance(self.url, str) else self.url

    @model_validator(mode="after")
    def _resolve(self) -> DirectoryConfig:
        if bool(self.ldif) == bool(self.url):
            raise ValueError("set exactly one of url and ldif")
        for url in self.urls if self.url else []:
            if not url.lower().startswith(("ldap://", "ldaps://")):
                raise ValueError(f"url {url!r} must start with ldap:// or ldaps://")
            if "@" in url.split("://", 1)[-1].split("/", 1)[0]:  # LDAP URLs (RFC 4516) have no user or password
                raise ValueError(f"url {redact(url)!r} names a user; give it as bind_dn and bind_password_env or _file")
            if self.starttls and url.lower().startswith("ldaps://"):
                raise ValueError(f"url {url!r} is ldaps:// (TLS already); starttls is for ldap:// URLs")
        if self.ca_file:
            check_ca_file(self.ca_file)
        return self

    @property
    def bind_password(self) -> str | None:
        return self.secret("bind_password")


def _compile_pattern(pattern: str, group: str) -> str:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from None
    if group not in compiled.groupindex:
        raise ValueError(f"the pattern needs a named group (?P<{group}>...)")
    return pattern


class NamespaceRules(Section):
    overrides: dict[str, str] = {}
    team_pattern: str = r"^team-(?P<team>[a-z0-9-]+)$"
    person_pattern: str = r"^(?P<uid>[a-z][a-z0-9-]*)$"
    unallocated_team: Annotated[str, Field(min_length=1)] = "unallocated"

    @field_validator("team_pattern")
    @classmethod
    def _team(cls, value: str) -> str:
        return _compile_pattern(value, "team")

    @field_validator("person_pattern")
    @classmethod
    def _person(cls, value: str) -> str:
        return _compile_pattern(value, "uid")
