"""The configuration file: schema, validation and secret resolution.

Everything the rest of the program knows about the YAML file comes through
`load_config`, which either returns a fully validated `Config` or raises
`ConfigError` with one sentence per mistake, each naming the key. Relative
paths in the file are made absolute against the file's directory, as
Prometheus and kubectl do with theirs, so that a config means the same from
any working directory.

Secrets (`<key>_env`, `<key>_file`) are read when a command uses them, not
when the file is loaded: `billing report` reads only the database and must
not need the SMTP password. `read_secrets` reads a command's secrets up front,
so that a run fails before it starts rather than at its last step.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import ssl
from dataclasses import dataclass
from datetime import date, datetime
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from billing.errors import UsageError
from billing.redact import HIDDEN, redact

log = logging.getLogger(__name__)


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


def _finite_number(value: object) -> object:
    """YAML's `true` is not a price of 1.0 (pydantic would take it as one), nor is .nan or .inf a price."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
# money per unit: a price or a multiplier of one. A billion per resource-hour is no real price; far larger
# values (1e25) overflow what reports can show as money and would fail after the day is committed.
HIGHEST_PRICE = 1e9
Price = Annotated[float, BeforeValidator(_finite_number), Field(ge=0, lt=HIGHEST_PRICE, allow_inf_nan=False)]
# a month's budget: money, so bounded like prices; a trillion is beyond any research cluster's month
HIGHEST_BUDGET = 1e12
Budget = Annotated[float, BeforeValidator(_finite_number), Field(gt=0, lt=HIGHEST_BUDGET, allow_inf_nan=False)]


def _web_address(value: str) -> str:
    if value and not value.startswith(("http://", "https://")):
        # without a scheme redact() cannot tell a `user:password@` in it, so the sentence leaves it out itself
        shown = f"{HIDDEN}@{value.rpartition('@')[2]}" if "@" in value else value
        raise ValueError(f"expected an http:// or https:// URL, got {shown!r}")
    return value


WebAddress = Annotated[str, AfterValidator(_web_address)]  # '' or an http(s) URL
HOST_NAME = re.compile(r"(?i)[a-z0-9]([a-z0-9.-]*[a-z0-9])?")  # a DNS name as a Host header gives it, no port


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True

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


class _Section(BaseModel):
    """Unknown keys are mistakes, not extensions."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    SECRETS: ClassVar[tuple[str, ...]] = ()  # names of the section's <name>_env / <name>_file pairs
    _place: str = PrivateAttr("")  # where the section is in the file (`clusters[0].prometheus`), for messages

    @model_validator(mode="after")
    def _one_source_per_secret(self) -> _Section:
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


def read_secrets(*sections: _Section) -> None:
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


def _check_ca_file(path: str) -> None:
    """A CA bundle that TLS cannot use is a config mistake, found before any connection."""
    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:
        raise ValueError(f"ca_file {path} holds no usable PEM certificate ({exc.reason})") from None
    except OSError as exc:
        raise ValueError(f"ca_file {path} cannot be read ({exc.strerror})") from None


def untrusted_certificate(section: PrometheusConfig | DirectoryConfig | EmailConfig,
                          trusted: str = "the system's CAs") -> str:
    """What to set where a server's certificate did not verify: the section's ca_file (`trusted`: what was tried
    without one)."""
    if section.ca_file:
        return f"{section.key('ca_file')} {section.ca_file} holds no CA that signed the server's certificate"
    return f"set {section.key('ca_file')} to the CA that signed the server's certificate ({trusted} did not)"


def _check_client_certificate(cert_file: str, key_file: str) -> None:
    try:
        ssl.create_default_context().load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror
        raise ValueError(f"cert_file {cert_file} and key_file {key_file} are no usable PEM certificate and "
                         f"unencrypted key ({reason})") from None


# an HTTP header's name (RFC 9110 token); Authorization has its own keys (bearer token, basic auth)
HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
HeaderValue = Annotated[str, Field(pattern=r"^[^\r\n\x00]*$")]  # a line break would start another header


class PrometheusConfig(_Section):
    """How to reach one cluster's store: each cluster has its own credentials (a lab's three Prometheus servers
    rarely share a token), a CA, a client certificate, and headers such as a Mimir tenant's X-Scope-OrgID."""

    url: str = ""
    replay: ConfigPath = ""  # a directory of recorded answers instead of a live server (the demo)
    selector: str = ""
    bearer_token_env: str = ""
    bearer_token_file: ConfigPath = ""
    basic_auth_user: str = ""  # with basic_auth_password_*: HTTP basic authentication
    basic_auth_password_env: str = ""
    basic_auth_password_file: ConfigPath = ""
    ca_file: ConfigPath = ""
    cert_file: ConfigPath = ""  # with key_file: a client certificate (mutual TLS), PEM
    key_file: ConfigPath = ""  # its private key, PEM, not encrypted (a mounted Secret)
    headers: dict[HeaderName, HeaderValue] = {}  # sent with every request, e.g. {X-Scope-OrgID: lab-a}
    timeout: Duration = 120.0
    retries: Annotated[int, Field(ge=0)] = 4  # on connection errors, timeouts, 429 and 5xx, with backoff
    # queries this store answers at once, across every day a backfill bills at once (per URL: clusters on one
    # shared store share the first one's limit)
    max_queries_in_flight: Annotated[int, Field(ge=1)] = 2
    # MiB one answer may take: a run holds about 20 times an answer's size while reading it (the CronJob has 2 Gi)
    max_answer_mib: Annotated[int, Field(ge=1)] = 64
    SECRETS = ("bearer_token", "basic_auth_password")

    @model_validator(mode="after")
    def _one_source(self) -> PrometheusConfig:
        if bool(self.url) == bool(self.replay):
            raise ValueError("set exactly one of url and replay")
        return self

    @model_validator(mode="after")
    def _credentials(self) -> PrometheusConfig:
        password = self.basic_auth_password_env or self.basic_auth_password_file
        if bool(self.basic_auth_user) != bool(password):
            raise ValueError("basic auth needs both basic_auth_user and basic_auth_password_env or _file")
        if self.basic_auth_user and (self.bearer_token_env or self.bearer_token_file):
            raise ValueError("set a bearer token or basic auth, not both: each is the Authorization header")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs both cert_file and key_file")
        if any(name.lower() == "authorization" for name in self.headers):
            raise ValueError("headers: set Authorization through bearer_token_* or basic_auth_*, which keep it secret")
        return self

    def check_files(self) -> None:
        """The CA bundle and client certificate can be used: read with the secrets, when a store is to be asked,
        not when the config is (`billing serve` and `report` never ask one, and their pods need not mount them)."""
        try:
            if self.ca_file:
                _check_ca_file(self.ca_file)
            if self.cert_file:
                _check_client_certificate(self.cert_file, self.key_file)
        except ValueError as exc:
            raise ConfigError(f"{self._place}: {exc}") from None

    @property
    def bearer_token(self) -> str | None:
        return self.secret("bearer_token")

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        password = self.secret("basic_auth_password")
        return (self.basic_auth_user, password) if password is not None else None


class Prices(_Section):
    cpu_core_hour: Price
    memory_gib_hour: Price
    gpu_hour: Price
    gpu_models: dict[str, Price] = {}
    # price multiplier per pod priority class (kube_pod_info's priority_class), e.g. backfill: 0.0 runs free;
    # other classes pay 1
    priority_classes: dict[str, Price] = {}


def _day(value: object) -> date:
    """A day as the config writes it (2026-03-01): YAML's own date, or text of that form. A time of day or a number
    (which pydantic would take as Unix seconds) is no day."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value} is no day of the calendar (expected a date like 2026-03-01)") from None
    raise ValueError(f"expected a date like 2026-03-01, got {value}")


Day = Annotated[date, BeforeValidator(_day)]  # every date key of the config


class DatedPrices(Prices):
    """A price set in force from a day on, until the next set's `from` (docs/spec.md "Prices over time and cost
    recovery")."""

    from_: Day = Field(alias="from")


# `prices` is one set for every day, or a list of dated sets; the tags name the form in pydantic's error locations,
# which config errors leave out (clusters[0].prices.gpu_hour, clusters[0].prices[1].from)
PRICE_FORMS = ("one set", "dated sets")
PriceSets = Annotated[
    Annotated[Prices, Tag(PRICE_FORMS[0])] | Annotated[list[DatedPrices], Tag(PRICE_FORMS[1])],
    Discriminator(lambda value: PRICE_FORMS[1] if isinstance(value, list) else PRICE_FORMS[0]),
]


class CostRecovery(_Section):
    """What a cluster cost per calendar month; `billing close` books cost recovery lines so that the month's
    charges on it add up to that (docs/spec.md "Prices over time and cost recovery")."""

    monthly_cost: Budget | None = None  # in the configured currency, e.g. an on-prem cluster's amortised cost
    # the cloud bill instead: the rows of the provider's FOCUS export that are this cluster, column (or
    # Tags.<key>) -> value; `billing invoice import` sums their BilledCost for a month
    invoice_match: dict[Annotated[str, Field(min_length=1)], str] = {}

    @model_validator(mode="after")
    def _one_source(self) -> CostRecovery:
        if (self.monthly_cost is None) == (not self.invoice_match):
            raise ValueError("set exactly one of monthly_cost and invoice_match")
        return self


class ReservedPools(_Section):
    """Node groups dedicated to a team: it pays their whole capacity, others' use of them is credited to it."""

    node_label: Annotated[str, Field(min_length=1)]  # kube_node_labels label naming a node's pool
    teams: dict[str, str]  # pool (the label's value) -> the team that reserved it


class KueueQueue(_Section):
    """A Kueue ClusterQueue: the team that owns its quota and the namespaces whose LocalQueues point at it (Kueue's
    metrics do not say which, docs/spec.md "Kueue quotas")."""

    team: Annotated[str, Field(min_length=1)]
    namespaces: list[Annotated[str, Field(min_length=1)]] = []


class Kueue(_Section):
    """Kueue ClusterQueues whose nominal quotas are billed as reserved capacity (docs/spec.md "Kueue quotas")."""

    queues: dict[str, KueueQueue]  # ClusterQueue name -> its team and namespaces
    # ResourceFlavor name -> the GPU model its nodeLabels select (its price in prices.gpu_models)
    flavors: dict[str, Annotated[str, Field(min_length=1)]] = {}

    @field_validator("queues")
    @classmethod
    def _some_queue(cls, queues: dict[str, KueueQueue]) -> dict[str, KueueQueue]:
        if not queues:
            raise ValueError("lists no ClusterQueue, so no quota would be billed: list the queues and their teams, "
                             "or remove kueue")
        return queues

    def queue_of(self) -> dict[str, str]:
        """namespace -> its ClusterQueue; a namespace listed under two belongs to the first in name order."""
        owned: dict[str, str] = {}
        for queue in sorted(self.queues):
            for namespace in self.queues[queue].namespaces:
                owned.setdefault(namespace, queue)
        return owned


LabelName = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]


class LabelNames(_Section):
    """Where the cluster's scrapes put the exporters' own labels, e.g. `exported_namespace` after a scrape
    with honor_labels: false; set, it replaces billing's detection of that for every metric family."""

    namespace: LabelName = "namespace"
    pod: LabelName = "pod"
    container: LabelName = "container"
    node: LabelName = "node"


RequestRule = Literal["pod", "containers"]
# pods Pending but bound to a node (docs/spec.md "Rule 2: running"): measured and shown only, or billed as Running
BoundPendingRule = Literal["show", "charge"]


class ClusterConfig(_Section):
    name: Annotated[str, Field(min_length=1)]
    prometheus: PrometheusConfig
    gpu_model_label: str = "label_nvidia_com_gpu_product"
    # node labels naming other vendors' accelerator models (AMD, Habana, TPU), tried in order on nodes
    # where gpu_model_label is absent
    vendor_model_labels: list[Annotated[str, Field(min_length=1)]] = []
    # node label of time-slicing replicas; None: the top-level gpu_replicas_label, '' none on this cluster
    gpu_replicas_label: str | None = None
    prices: PriceSets
    # unrequested capacity (allocatable that no request covered): unbilled, or shared over the teams in proportion
    # to their cost, as `unrequested-<resource>` ledger rows, so the ledger adds up to the whole cluster's price
    unrequested: Literal["unbilled", "share"] = "unbilled"
    reserved_pools: ReservedPools | None = None
    kueue: Kueue | None = None  # ClusterQueues' quotas billed as reserved capacity
    recover: CostRecovery | None = None  # None: charges stay what the prices make them
    label_names: LabelNames | None = None
    # what a pod's request is (docs/spec.md rule 3): what the scheduler reserves for it (pod), or its app
    # containers' requests only (containers, the older rule); None: the top-level `requests`
    requests: RequestRule | None = None
    # what pods Pending but bound to a node held: shown beside the bill, or charged as Running; None: the top level's
    bound_pending: BoundPendingRule | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_name_of_unrequested(cls, data: Any) -> Any:
        """`idle`, the old name of `unrequested`, is still read, with a warning: configs written before the rename
        bill the same."""
        if not isinstance(data, dict) or "idle" not in data:
            return data
        if "unrequested" in data:
            raise ValueError("idle is the old name of unrequested; keep only unrequested")
        log.warning("cluster %s: config key idle is now called unrequested; it is still read, but rename it "
                    "(unrequested: %s)", data.get("name"), data["idle"])
        return {("unrequested" if key == "idle" else key): value for key, value in data.items()}

    @model_validator(mode="after")
    def _pools_or_quotas(self) -> ClusterConfig:
        if self.kueue is not None and self.reserved_pools is not None:
            raise ValueError("reserved_pools and kueue are both set: a cluster has one or the other (a pod on a "
                             "pool's node would be credited twice)")
        if self.kueue is not None and self.unrequested == "share":
            raise ValueError("kueue and unrequested: share are both set: a quota's owner pays its idle quota, so "
                             "sharing what no pod requested would charge it twice; keep unrequested: unbilled")
        return self

    @field_validator("prices")
    @classmethod
    def _sets_go_forward(cls, prices: Prices | list[DatedPrices]) -> Prices | list[DatedPrices]:
        if isinstance(prices, list):
            if not prices:
                raise ValueError("give at least one price set")
            for number, (before, after) in enumerate(zip(prices, prices[1:]), start=1):
                if after.from_ <= before.from_:
                    raise ValueError(f"[{number}].from {after.from_} is not after [{number - 1}].from {before.from_}: "
                                     "each set starts on a later day than the one before")
        return prices

    def prices_on(self, day: date) -> Prices:
        """The price set in force on `day`: the one set, or the dated set with the latest `from` on or before it."""
        if isinstance(self.prices, Prices):
            return self.prices
        in_force = [prices for prices in self.prices if prices.from_ <= day]
        if not in_force:
            raise ConfigError(f"{self._place}.prices: no price set is in force on {day}; the first is from "
                              f"{self.prices[0].from_}")
        return in_force[-1]

    def price_changes(self, first: date, last: date) -> list[date]:
        """Days after `first`, up to `last`, on which another price set comes into force."""
        return [] if isinstance(self.prices, Prices) else [p.from_ for p in self.prices if first < p.from_ <= last]


class PeopleConfig(_Section):
    base: str = ""
    filter: str = "(objectClass=inetOrgPerson)"
    uid_attribute: str = "uid"
    name_attribute: str = "cn"
    mail_attribute: str = "mail"
    member_of_attribute: str = ""  # e.g. memberOf (Active Directory): a person's team DNs


class TeamsConfig(_Section):
    base: str = ""
    filter: str = "(objectClass=groupOfNames)"
    name_attribute: str = "cn"
    member_attribute: str = "member"
    lead_attribute: str = "owner"
    cost_center_attribute: str = ""  # e.g. departmentNumber: the team's cost centre on its monthly statement
    budget_attribute: str = ""  # a team's monthly budget in the directory; budgets.monthly overrides it


class DirectoryConfig(_Section):
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
            _check_ca_file(self.ca_file)
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


class NamespaceRules(_Section):
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


class EmailConfig(_Section):
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
            _check_ca_file(self.ca_file)
        return self

    @property
    def username(self) -> str | None:
        return self.secret("username")

    @property
    def password(self) -> str | None:
        return self.secret("password")


class MetricsConfig(_Section):
    """Where the job reports its own health; a CronJob's pod is gone before a scrape."""

    pushgateway: WebAddress = ""  # URL of a Prometheus Pushgateway; '' pushes nothing
    job: Annotated[str, Field(min_length=1)] = "billing"
    timeout: Duration = 10.0

    @field_validator("pushgateway")
    @classmethod
    def _escaped_password(cls, value: str) -> str:
        """A password with / ? or # unescaped makes its first part the port to a URL parser: the push would go
        nowhere every night, its error quoting that part. Refused without repeating the URL."""
        parts = urlsplit(value)
        if "@" in parts.path + parts.query + parts.fragment:
            raise ValueError("the URL has an @ after its host: percent-encode / ? # and @ in its password "
                             "(%2F %3F %23 %40)")
        return value


class WasteConfig(_Section):
    """What the reports call waste (billing stays request-based)."""

    enabled: bool = True  # measure waste at all (it costs Prometheus about what billing does)
    gpu_utilisation_below: Annotated[float, Field(gt=0, le=100)] = 5.0  # percent: a GPU held below this is idle


class WorkloadsConfig(_Section):
    """Costs below the namespace: per workload and cost label (docs/spec.md "Workloads and experiment labels")."""

    enabled: bool = True  # collect and keep costs per workload at all
    keep_days: Annotated[int, Field(ge=1)] | None = None  # days of workload rows kept; None: forever


# a Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters
LABEL_KEY = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def kube_label(name: str) -> str:
    """The Prometheus label kube-state-metrics exports the pod label `name` as in kube_pod_labels:
    `label_` and the name with each character other than a letter, digit or `_` made `_`
    (`example.com/project` -> `label_example_com_project`)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _cost_labels(names: list[str]) -> list[str]:
    """Kubernetes label keys, each once, that kube-state-metrics exports under different names."""
    for name in names:
        if not LABEL_KEY.fullmatch(name):
            raise ValueError(f"{name!r} is no Kubernetes label key (like experiment or example.com/project)")
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(kube_label(name), name)
        if other != name or names.count(name) > 1:
            raise ValueError(f"{other!r} and {name!r} are both exported as {kube_label(name)} by kube-state-metrics"
                             if other != name else f"{name!r} is listed twice")
    return names


def _gpu_fraction(name: str, value: object) -> float:
    """Physical GPUs one unit of a resource stands for: `1/7`, `0.5` or 1; exact until the final float."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name}: expected a fraction like 1/7 or a number, got {value!r}")
    try:
        fraction = Fraction(str(value).strip()) if isinstance(value, str) else Fraction(value)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"{name}: expected a fraction like 1/7 or a number, got {value!r}") from None
    if not 0 < fraction <= 1:
        # more than one GPU per unit is no sharing scheme any vendor has; it is a typo (17 for 1/7)
        raise ValueError(f"{name}: one unit stands for more than 0 and at most 1 physical GPU, got {value!r}")
    return float(fraction)


def _gpu_fractions(value: object) -> dict[str, float]:
    """The list form (each name a whole GPU) or the mapping form of gpu_resources."""
    if isinstance(value, list):
        if not all(isinstance(name, str) and name for name in value):
            raise ValueError("expected resource names like nvidia_com_gpu")
        value = {name: 1 for name in value}
    if not isinstance(value, dict):
        raise ValueError("expected a list of resource names or a mapping of resource name to GPUs per unit")
    if not value:
        raise ValueError("name at least one GPU resource")
    fractions = {str(name): _gpu_fraction(str(name), fraction) for name, fraction in value.items()}
    fractions.setdefault(DRA_GPU, 1.0)
    return fractions


# GPUs held through Dynamic Resource Allocation (docs/spec.md "GPUs through DRA"), in no request series: billed as
# this resource, named as kube-state-metrics would name NVIDIA's DRA driver (gpu.nvidia.com); always a GPU resource
DRA_GPU = "gpu_nvidia_com"


GpuFractions = Annotated[dict[str, float], BeforeValidator(_gpu_fractions)]


class BudgetsConfig(_Section):
    """What each team may spend per calendar month, and the shares of it that send an alert."""

    monthly: dict[str, Budget] = {}  # team -> amount in the currency
    alert_at: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = [0.8, 1.0]

    @field_validator("alert_at")
    @classmethod
    def _thresholds(cls, value: list[float]) -> list[float]:
        return sorted(set(value))


class WebConfig(_Section):
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


class McpConfig(_Section):
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


class AuditConfig(_Section):
    """The self-audit of every run (billing/collect/audit.py)."""

    enabled: bool = True
    pods: Annotated[int, Field(ge=1)] = 20  # running pods recomputed instant by instant per cluster-day


@dataclass(frozen=True)
class DirectoryName:
    """A team or person the config names, and the key that names it."""

    key: str  # budgets.monthly.robotics
    kind: Literal["team", "person"]
    name: str


class Config(_Section):
    timezone: str = "UTC"
    currency: str = "USD"
    step: Duration = 60.0
    database: Annotated[DatabaseUrl, Field(validate_default=True)] = "sqlite:///billing.db"
    output_dir: Annotated[ConfigPath, Field(validate_default=True)] = "out/reports"
    clusters: Annotated[list[ClusterConfig], Field(min_length=1)]
    # kube-state-metrics resource name -> physical GPUs one unit stands for (a list: 1 each)
    gpu_resources: Annotated[GpuFractions, Field(validate_default=True)] = {"nvidia_com_gpu": 1.0}
    gpu_replicas_label: str = ""  # node label of time-slicing replicas, e.g. label_nvidia_com_gpu_replicas
    requests: RequestRule = "pod"  # what a pod's request is, unless a cluster says otherwise
    bound_pending: BoundPendingRule = "show"  # what Pending pods bound to a node are, unless a cluster says otherwise
    directory: DirectoryConfig
    namespaces: NamespaceRules = NamespaceRules()
    email: EmailConfig = EmailConfig()
    metrics: MetricsConfig = MetricsConfig()
    waste: WasteConfig = WasteConfig()
    workloads: WorkloadsConfig = WorkloadsConfig()
    # pod labels costs are broken down by, as Kubernetes names them (experiment, example.com/project)
    cost_labels: Annotated[list[str], AfterValidator(_cost_labels)] = []
    budgets: BudgetsConfig = BudgetsConfig()
    web: WebConfig = WebConfig()
    mcp: McpConfig = McpConfig()
    reports_url: WebAddress = ""  # where people reach the reports or `billing serve`; emails link there
    audit: AuditConfig = AuditConfig()

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r} (expected an IANA name like Europe/Berlin)") from None
        return value

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Z]{3}", value):
            raise ValueError(f"expected a three-letter ISO 4217 code like USD, got {value!r}")
        return value

    @field_validator("step")
    @classmethod
    def _step(cls, value: float) -> float:
        if value != int(value) or 1800 % int(value) != 0:
            raise ValueError("step must be a whole number of seconds that divides 30m (e.g. 30s, 60s, 5m)")
        return value

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, clusters: list[ClusterConfig]) -> list[ClusterConfig]:
        names = [c.name for c in clusters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate cluster name {duplicates[0]!r}")
        return clusters

    @model_validator(mode="after")
    def _cluster_defaults(self) -> Config:
        """Each cluster reads the top-level replicas label, request rule and bound_pending unless it names its own."""
        for cluster in self.clusters:
            if cluster.gpu_replicas_label is None:
                cluster.gpu_replicas_label = self.gpu_replicas_label
            if cluster.requests is None:
                cluster.requests = self.requests
            if cluster.bound_pending is None:
                cluster.bound_pending = self.bound_pending
        return self

    @model_validator(mode="after")
    def _place_sections(self) -> Config:
        """Each section with secrets learns where it is, for the sentence naming one that cannot be read."""
        for number, cluster in enumerate(self.clusters):
            cluster._place = f"clusters[{number}]"
            cluster.prometheus._place = f"clusters[{number}].prometheus"
        self.directory._place, self.email._place, self.web._place = "directory", "email", "web"
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def directory_names(self) -> list[DirectoryName]:
        """Every team and person the config names, each with its key: the directory must hold them as spelled
        (billing/directory/names.py). `namespaces.unallocated_team` is billing's own team, in no directory."""
        names = [DirectoryName(f"clusters[{number}].kueue.queues.{queue}.team", "team", settings.team)
                 for number, cluster in enumerate(self.clusters) if cluster.kueue
                 for queue, settings in cluster.kueue.queues.items()]
        names += [DirectoryName(f"clusters[{number}].reserved_pools.teams.{pool}", "team", team)
                  for number, cluster in enumerate(self.clusters) if cluster.reserved_pools
                  for pool, team in cluster.reserved_pools.teams.items()]
        names += [DirectoryName(f"namespaces.overrides.{namespace}", "team", team)
                  for namespace, team in self.namespaces.overrides.items()]
        names += [DirectoryName(f"budgets.monthly.{team}", "team", team) for team in self.budgets.monthly]
        names += [DirectoryName(f"web.admins[{number}]", "person", uid) for number, uid in enumerate(self.web.admins)]
        return [name for name in names if not (name.kind == "team" and name.name == self.namespaces.unallocated_team)]

    def run_secrets(self) -> None:
        """Read every secret `billing run` uses (live stores, an LDAP directory, SMTP), before it asks anyone."""
        sections: list[_Section] = [c.prometheus for c in self.clusters if c.prometheus.url]
        if self.directory.url:
            sections.append(self.directory)
        if self.email.enabled and not self.email.outbox_dir:
            sections.append(self.email)
        read_secrets(*sections)


def _key(location: tuple) -> str:
    """`clusters[0].prices.gpu_hour` from pydantic's location tuple."""
    key = ""
    for part in location:
        if isinstance(part, int):
            key += f"[{part}]"
        elif part not in PRICE_FORMS and not str(part).startswith("function-"):
            key += ("." if key else "") + ("from" if part == "from_" else str(part))
    return key or "(top level)"


def _sentence(error: ErrorDetails) -> str:
    key = _key(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{key}: unknown key"
    if kind == "missing":
        return f"{key}: required key is missing"
    message = error["msg"].removeprefix("Value error, ")
    return f"{key}: {message}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice is an error instead of the last one winning."""


def _mapping_with_unique_keys(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    seen = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode):
            if key.value in seen:
                raise yaml.constructor.ConstructorError(problem=f"the key {key.value!r} appears twice",
                                                        problem_mark=key.start_mark)
            seen.add(key.value)
    return loader.construct_mapping(node)


def _timestamp_or_text(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> object:
    """A YAML date or time; one that looks like a date and is none (2026-02-30) stays text, for the key's own
    validation to name it (PyYAML raises a bare ValueError on it)."""
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return loader.construct_scalar(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_unique_keys)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)

# A billing config is a few kilobytes and a few levels deep. Far larger or deeper files are mistakes (or
# attacks): PyYAML would take minutes and gigabytes over 50 MB, and its recursion runs out at a few
# thousand levels; both are refused before the YAML is built.
LARGEST_CONFIG = 1 << 20  # bytes
DEEPEST_CONFIG = 50  # nested mappings and lists


def _refuse_deep_nesting(text: str, path: Path) -> None:
    """Count nesting on PyYAML's event stream, which (unlike building the document) does not recurse."""
    depth = 0
    for event in yaml.parse(text, Loader=_UniqueKeyLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > DEEPEST_CONFIG:
                raise ConfigError(f"config file {path} nests mappings and lists more than {DEEPEST_CONFIG} levels "
                                  f"deep (at line {event.start_mark.line + 1})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


_KINDS = {list: "a list", str: "a text", int: "a number", float: "a number", bool: "true or false"}


def config_path(explicit: str | None) -> Path:
    """--config, then $BILLING_CONFIG, then ./billing.yaml."""
    return Path(explicit or os.environ.get("BILLING_CONFIG") or "billing.yaml")


def load_config(path: Path) -> Config:
    """Read, validate and resolve secrets; raise ConfigError naming every bad key."""
    try:
        with path.open("rb") as file:
            content = file.read(LARGEST_CONFIG + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if len(content) > LARGEST_CONFIG:
        raise ConfigError(f"config file {path} is larger than {LARGEST_CONFIG // 1024} KiB; a billing config is a few kilobytes")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})"
        ) from None
    try:
        _refuse_deep_nesting(text, path)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise ConfigError(f"config file {path} is not valid YAML{line}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        raise ConfigError(f"config file {path} is empty")
    if not isinstance(data, dict):
        kind = _KINDS.get(type(data), type(data).__name__)
        raise ConfigError(f"config file {path} must hold a mapping of keys, not {kind}")
    try:
        return Config.model_validate(data, context={CONFIG_DIR: path.parent.absolute()})
    except ValidationError as exc:
        sentences = [_sentence(e) for e in exc.errors(include_input=False, include_url=False)]
        raise ConfigError(f"config file {path}: " + "; ".join(sentences)) from None
