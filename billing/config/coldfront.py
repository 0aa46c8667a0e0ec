"""ColdFront, the allocation manager many research computing centers run (docs/spec.md "Accounts from ColdFront"):
where its REST API is, which allocation attributes name a namespace or a team and the account charged, and how
each night's usage is written back to its allocations."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from billing.config.section import ConfigPath, Duration, Section, WebAddress

AttributeName = Annotated[str, Field(min_length=1)]


class ColdFrontConfig(Section):
    """A ColdFront with its REST API plugin (PLUGIN_API=True), read with a token of a user who sees every
    allocation (a staff user)."""

    url: Annotated[WebAddress, Field(min_length=1)]  # the site: the API is at <url>/api/
    token_env: str = ""
    token_file: ConfigPath = ""
    ca_file: ConfigPath = ""
    # the whole read (projects and allocations, every page, together); a ColdFront slower is down for the night
    timeout: Duration = 30.0
    namespace_attribute: str = ""  # an allocation attribute naming the namespace it pays for
    team_attribute: str = ""  # an allocation attribute naming the team (as the directory spells it) it pays for
    account_attribute: AttributeName  # an allocation attribute naming the account (an id of accounts.names)
    statuses: Annotated[list[AttributeName], Field(min_length=1)] = ["Active", "Renewal Requested"]
    # where each night's month to date is written back, as the allocation's usage of this attribute (a type with
    # usage, e.g. "Cloud Usage (EUR)"); '': not written back
    usage_attribute: str = ""
    # how ColdFront's own command line is run where its database is; billing adds `shell -c <script>`
    usage_command: Annotated[list[AttributeName], Field(min_length=1)] = ["coldfront"]
    SECRETS = ("token",)

    @model_validator(mode="after")
    def _a_subject(self) -> ColdFrontConfig:
        if not (self.namespace_attribute or self.team_attribute):
            raise ValueError("set namespace_attribute or team_attribute (or both): the allocation attribute naming "
                             "what an allocation pays for")
        return self
