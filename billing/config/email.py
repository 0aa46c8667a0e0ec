"""How the emails go out: SMTP (or an outbox directory), the sender, and who gets which."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from billing.config.section import ConfigPath, Section, check_ca_file


class EmailConfig(Section):
    enabled: bool = False
    smtp_host: str = ""
    smtp_port: Annotated[int, Field(gt=0, lt=65536)] = 587
    starttls: bool = True
    ca_file: ConfigPath = ""  # CA bundle that signed the SMTP server's certificate; '' trusts the system's CAs
    username_env: str = ""
    username_file: ConfigPath = ""
    password_env: str = ""
    password_file: ConfigPath = ""
    from_: str = Field(default="billing@localhost", alias="from")
    admins: list[str] = []
    team_leads: bool = True
    # each person with spending gets their own summary: daily (every run) or weekly (the run of each Sunday)
    # (YAML reads a bare `off` as false, which means the same)
    personal: Annotated[Literal["daily", "weekly", "off"], BeforeValidator(lambda v: "off" if v is False else v)] = "off"
    outbox_dir: ConfigPath = ""
    SECRETS = ("username", "password")

    @model_validator(mode="after")
    def _sender(self) -> EmailConfig:
        if self.enabled and not (self.smtp_host or self.outbox_dir):
            raise ValueError("an enabled email section needs smtp_host or outbox_dir")
        if self.ca_file:
            check_ca_file(self.ca_file)
        return self

    @property
    def username(self) -> str | None:
        return self.secret("username")

    @property
    def password(self) -> str | None:
        return self.secret("password")
