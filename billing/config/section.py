"""What every section of the configuration file shares: unknown keys refused, secrets named by `<key>_env` or
`<key>_file` and read when used, paths relative to the file, and the value types several sections use."""

from __future__ import annotations

import math
import os
import re
import ssl
from pathlib import Path
from typing import Annotated, ClassVar, Protocol

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

from billing.errors import UsageError
from billing.redact import HIDDEN


class ConfigError(UsageError):
    """The configuration is unusable; the message names the key."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> float:
    """Seconds from `60s`, `2m`, `1h30m` or a bare number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and _DURATION.fullmatch(value):
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    else:
        raise ValueError(f"expected a duration like 60s or 2m, got {value!r}")
    if not math.isfinite(seconds):
        raise ValueError("a duration must be finite")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _web_address(value: str) -> str:
    if value and not value.startswith(("http://", "https://")):
        # without a scheme redact() cannot tell a `user:password@` in it, so the sentence leaves it out itself
        shown = f"{HIDDEN}@{value.rpartition('@')[2]}" if "@" in value else value
        raise ValueError(f"expected an http:// or https:// URL, got {shown!r}")
    return value


WebAddress = Annotated[str, AfterValidator(_web_address)]  # '' or an http(s) URL


CONFIG_DIR = "config_dir"  # the validation context's key: the directory relative paths in the file start from


def _from_config_dir(value: str, info: ValidationInfo) -> str:
    """A relative path made absolute against the config file's directory (lexically, as Prometheus does)."""
    base = (info.context or {}).get(CONFIG_DIR)
    if not value or base is None or Path(value).is_absolute():
        return value
    return os.path.normpath(Path(base) / value)


_SQLITE_FILE = re.compile(r"(sqlite(?:\+\w+)?:///)([^?]*)(.*)", re.DOTALL)


def _sqlite_from_config_dir(value: str, info: ValidationInfo) -> str:
    """`sqlite:///billing.db` names a file relative to the config file's directory, like every other path."""
    match = _SQLITE_FILE.fullmatch(value)
    if not match or match[2] in ("", ":memory:") or match[2].startswith("file:"):
        return value
    return match[1] + _from_config_dir(match[2], info) + match[3]


ConfigPath = Annotated[str, AfterValidator(_from_config_dir)]  # '' or a file or directory
DatabaseUrl = Annotated[str, AfterValidator(_sqlite_from_config_dir)]  # an SQLAlchemy URL


class Section(BaseModel):
    """Unknown keys are mistakes, not extensions."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    SECRETS: ClassVar[tuple[str, ...]] = ()  # names of the section's <name>_env / <name>_file pairs
    _place: str = PrivateAttr("")  # where the section is in the file (`clusters[0].prometheus`), for messages

    @model_validator(mode="after")
    def _one_source_per_secret(self) -> Section:
        for name in self.SECRETS:
            if getattr(self, f"{name}_env") and getattr(self, f"{name}_file"):
                raise ValueError(f"set only one of {name}_env and {name}_file")
        return self

    def key(self, name: str) -> str:
        """The full name of one of the section's keys (`clusters[0].prometheus.ca_file`), for a sentence naming it."""
        return f"{self._place}.{name}" if self._place else name

    def secret_source(self, name: str) -> str:
        """Where the secret `name` is read from, for a sentence: `email.password_env SMTP_PASSWORD`."""
        for key in (f"{name}_env", f"{name}_file"):
            if getattr(self, key):
                return f"{self.key(key)} {getattr(self, key)}"
        return f"no {self.key(name + '_env')} or _file"

    def check_files(self) -> None:
        """Files a section needs where it is used (not when the config is read), checked with its secrets; none
        unless a section says otherwise."""

    def secret(self, name: str) -> str | None:
        """The secret named by `<name>_env` or `<name>_file`, read now; None when neither is set ('' is unset).

        Not kept: a Kubernetes Secret mounted as a file may be rotated while `billing serve` runs."""
        env_name, file_name = getattr(self, f"{name}_env"), getattr(self, f"{name}_file")
        where = f"{self._place}: " if self._place else ""
        if env_name:
            if env_name not in os.environ:
                raise ConfigError(f"{where}{name}_env names the environment variable {env_name}, which is not set")
            return os.environ[env_name]
        if file_name:
            try:
                return Path(file_name).read_text().strip()
            except OSError as exc:
                raise ConfigError(f"{where}{name}_file {file_name} cannot be read ({exc.strerror})") from None
        return None


def read_secrets(*sections: Section) -> None:
    """Read the sections' secrets, and check their files, now: one ConfigError naming every one that cannot be
    read or used."""
    problems = []
    for section in sections:
        try:
            section.check_files()
        except ConfigError as exc:
            problems.append(str(exc))
        for name in section.SECRETS:
            try:
                section.secret(name)
            except ConfigError as exc:
                problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))


def check_ca_file(path: str) -> None:
    """A CA bundle that TLS cannot use is a config mistake, found before any connection."""
    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:
        raise ValueError(f"ca_file {path} holds no usable PEM certificate ({exc.reason})") from None
    except OSError as exc:
        raise ValueError(f"ca_file {path} cannot be read ({exc.strerror})") from None


class ServerSection(Protocol):
    """A section naming a server that speaks TLS: the store, the directory, SMTP."""

    ca_file: str

    def key(self, name: str) -> str: ...


def untrusted_certificate(section: ServerSection, trusted: str = "the system's CAs") -> str:
    """What to set where a server's certificate did not verify: the section's ca_file (`trusted`: what was tried
    without one)."""
    if section.ca_file:
        return f"{section.key('ca_file')} {section.ca_file} holds no CA that signed the server's certificate"
    return f"set {section.key('ca_file')} to the CA that signed the server's certificate ({trusted} did not)"
