"""`billing serve` and `billing mcp`: who is asking, who sees everything, which hosts and origins may call."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from billing.config.section import ConfigError, ConfigPath, DatabaseUrl, Duration, Section, WebAddress

HOST_NAME = re.compile(r"(?i)[a-z0-9]([a-z0-9.-]*[a-z0-9])?")  # a DNS name as a Host header gives it, no port


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class WebConfig(Section):
    """`billing serve`: who is asking (auth) and who sees everything (admins)."""

    auth: Literal["header", "ldap"] = "header"
    user_header: Annotated[str, Field(min_length=1)] = "X-Forwarded-User"  # set by the authenticating proxy
    trusted_proxies: list[str] = ["127.0.0.1/32", "::1/128"]  # the header counts only from these networks
    admins: list[str] = []  # uids that see every team
    database: DatabaseUrl = ""  # the ledger as billing serve reads it (a read-only role); '' = the top-level database
    session_key_env: str = ""  # auth ldap: the key that signs session cookies (at least 32 characters)
    session_key_file: ConfigPath = ""
    session_lifetime: Duration = 8 * 3600.0  # a login lasts this long
    login_attempts: Annotated[int, Field(ge=1)] = 5  # failed logins per user and per address ...
    login_window: Duration = 900.0  # ... within this time lock that user or address out for it
    # the failed logins, in an SQLite file that serve and mcp beside it both name; '' = kept in the process
    login_throttle_file: ConfigPath = ""
    # the names a request's Host may give (and an Origin's host), besides reports_url's: no DNS rebinding
    allowed_hosts: list[str] = ["localhost", "127.0.0.1", "::1"]
    allowed_origins: list[str] = []  # further origins a browser may call from, like https://assistant.example.org
    # /metrics: teams' costs for Prometheus, to a scraper sending this as a bearer token; unset: no /metrics
    metrics_token_env: str = ""
    metrics_token_file: ConfigPath = ""
    SECRETS = ("session_key", "metrics_token")

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an address or network like 127.0.0.1/32 or 10.0.0.0/8") from None
        return values

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, values: list[str]) -> list[str]:
        for value in values:
            if not (_is_address(value) or HOST_NAME.fullmatch(value)):
                raise ValueError(f"{value!r} is not a host name or address like billing.example.org or 127.0.0.1 "
                                 "(no scheme, port or path)")
        return [value.lower() for value in values]

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        for value in values:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
                raise ValueError(f"{value!r} is not an origin like https://assistant.example.org (a scheme, a host, "
                                 "perhaps a port, no path)")
        return [value.lower() for value in values]

    @property
    def metrics_token(self) -> str | None:
        """The token a scraper of /metrics must send; an empty one would let `Authorization: Bearer ` in. Spaces
        around it are no part of it: a header's value cannot carry them, so no scraper could send them."""
        token = self.secret("metrics_token")
        if token is None or token.strip():
            return None if token is None else token.strip()
        if self.metrics_token_env:
            raise ConfigError(f"{self._place}: metrics_token_env names the environment variable "
                              f"{self.metrics_token_env}, which is empty or only spaces")
        raise ConfigError(f"{self._place}: metrics_token_file {self.metrics_token_file} is empty")

    @property
    def metrics_token_key(self) -> str:
        """The key that names the token, for a scraper told it lacks it."""
        return f"{self._place}.metrics_token_env" if self.metrics_token_env else f"{self._place}.metrics_token_file"

    @model_validator(mode="after")
    def _session_key_named(self) -> WebConfig:
        if self.auth == "ldap" and not (self.session_key_env or self.session_key_file):
            raise ValueError("auth ldap needs session_key_env or session_key_file naming a key of at least 32 characters")
        return self

    @property
    def session_key(self) -> str | None:
        key = self.secret("session_key")
        if self.auth == "ldap" and len(key or "") < 32:
            raise ConfigError(f"{self._place}: auth ldap needs a session key of at least 32 characters, "
                              f"{self.session_key_env or self.session_key_file} holds {len(key or '')}")
        return key


LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")  # where an issuer may answer over plain http (a test's)


class McpConfig(Section):
    """`billing mcp --http`'s sign-in as the MCP authorization specification describes: the assistant finds the
    lab's authorization server in this server's protected resource metadata (RFC 9728) and sends its tokens."""

    auth: Literal["web", "oauth"] = "web"  # web: serve's sign-in (web.auth); oauth: the issuer's bearer tokens
    resource: WebAddress = ""  # this server's URL as assistants reach it, e.g. https://billing.example.org/mcp
    issuer: WebAddress = ""  # the lab's authorization server (OpenID Connect issuer) that signs the tokens
    uid_claim: Annotated[str, Field(min_length=1)] = "sub"  # the token's claim holding the person's uid

    @field_validator("resource")
    @classmethod
    def _resource(cls, value: str) -> str:
        if "#" in value:  # RFC 8707: a resource indicator has no fragment
            raise ValueError(f"{value!r} has a fragment (#...); give the URL assistants reach this server at")
        return value

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        """Over plain http anyone on the way could hand billing their own signing keys."""
        if value.startswith("http://") and urlsplit(value).hostname not in LOOPBACK_HOSTS:
            raise ValueError(f"the issuer {value!r} must be https:// (its signing keys are fetched from it)")
        return value

    @model_validator(mode="after")
    def _both_named(self) -> McpConfig:
        if bool(self.issuer) != bool(self.resource):
            raise ValueError("set both issuer and resource (the authorization server and this server's URL), "
                             "or neither")
        if self.auth == "oauth" and not self.issuer:
            raise ValueError("auth oauth needs issuer (the authorization server) and resource (this server's URL)")
        return self
