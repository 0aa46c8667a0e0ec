"""The configuration file as a whole: its top level (`Config`, which holds the sections) and how it is read.

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

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from billing.allocations import Allocation, overlapping_allocations, unknown_accounts
from billing.config.account_invoices import AccountInvoicesConfig
from billing.config.accounts import AccountsConfig
from billing.config.allocations import AllocationConfig
from billing.config.clusters import BoundPendingRule, ClusterConfig, GpuFractions, RequestRule
from billing.config.coldfront import ColdFrontConfig
from billing.config.credits import CreditsConfig
from billing.config.directory import DirectoryConfig, NamespaceRules
from billing.config.email import EmailConfig
from billing.config.prices import PRICE_FORMS, BudgetsConfig
from billing.config.run import AuditConfig, MetricsConfig, WasteConfig, WorkloadsConfig, cost_label_keys
from billing.config.section import (
    CONFIG_DIR,
    ConfigError,
    ConfigPath,
    DatabaseUrl,
    Duration,
    Section,
    WebAddress,
    read_secrets,
)
from billing.config.web import McpConfig, WebConfig


@dataclass(frozen=True)
class DirectoryName:
    """A team or person the config names, and the key that names it."""

    key: str  # budgets.monthly.robotics
    kind: Literal["team", "person"]
    name: str


class Config(Section):
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
    cost_labels: Annotated[list[str], AfterValidator(cost_label_keys)] = []
    budgets: BudgetsConfig = BudgetsConfig()
    credits: CreditsConfig = CreditsConfig()  # monthly credits and subsidies on the statements
    web: WebConfig = WebConfig()
    mcp: McpConfig = McpConfig()
    reports_url: WebAddress = ""  # where people reach the reports or `billing serve`; emails link there
    audit: AuditConfig = AuditConfig()
    accounts: AccountsConfig | None = None  # grants and departmental accounts charged (docs/spec.md "Accounts")
    coldfront: ColdFrontConfig | None = None  # accounts from ColdFront's allocations, usage written back to them
    account_invoices: AccountInvoicesConfig | None = None  # an invoice per account at `billing close`
    allocations: list[AllocationConfig] = []  # prepaid SU or money of an account (docs/spec.md "Allocations")

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
    def _invoices_of_accounts(self) -> Config:
        """Invoices are per account: without accounts there would be nothing to invoice, and nothing said."""
        if self.account_invoices is not None and self.accounts is None:
            raise ValueError("account_invoices needs an accounts section: the invoices are per account; add accounts, "
                             "or leave account_invoices out")
        return self

    @model_validator(mode="after")
    def _subsidised_clusters(self) -> Config:
        """A subsidy of a cluster that is not configured (or spelled otherwise) would silently subsidise nothing."""
        names = [cluster.name for cluster in self.clusters]
        for number, subsidy in enumerate(self.credits.subsidies):
            if subsidy.cluster and subsidy.cluster not in names:
                raise ValueError(f"credits.subsidies[{number}].cluster: no cluster is named {subsidy.cluster!r} "
                                 f"(the clusters are {', '.join(names)})")
        return self

    @model_validator(mode="after")
    def _accounts_named_elsewhere(self) -> Config:
        """Accounts the directory or ColdFront name are ids of accounts.names: without the section, none is charged."""
        given = [key for key, value in (("coldfront", self.coldfront),
                                        ("directory.teams.accounts_attribute", self.directory.teams.accounts_attribute),
                                        ("directory.people.accounts_attribute", self.directory.people.accounts_attribute))
                 if value]
        if given and self.accounts is None:
            raise ValueError(f"{given[0]}: needs an accounts section, whose names hold the accounts it names")
        return self

    @model_validator(mode="after")
    def _allocations_drawable(self) -> Config:
        """An allocation nothing could draw on (no accounts, an unknown account, SU no cluster weighs, another
        currency) or that shares nights with another of its account would be drawn wrongly without a word."""
        if not self.allocations:
            return self
        if self.accounts is None:
            raise ValueError("allocations are of accounts: configure the accounts section (accounts.names, "
                             "assignments) that says which charges go to each")
        weighed = any(prices.service_units is not None for cluster in self.clusters
                      for prices in (cluster.prices if isinstance(cluster.prices, list) else [cluster.prices]))
        for number, given in enumerate(self.allocations):
            if given.service_units is not None and not weighed:
                raise ValueError(f"allocations[{number}] is of service units, and no cluster's prices have "
                                 f"service_units: give the clusters' SU weights (prices.service_units), or give the "
                                 f"allocation as an amount of money")
            if given.currency not in ("", self.currency):
                raise ValueError(f"allocations[{number}].currency is {given.currency}, and charges are in "
                                 f"{self.currency}: give the amount in {self.currency}")
        held = self.prepaid_allocations()
        problems = unknown_accounts(held, self.accounts.names) or overlapping_allocations(held)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def prepaid_allocations(self) -> tuple[Allocation, ...]:
        """The allocations as typed values, each naming its key."""
        return tuple(given.allocation(self.currency, f"allocations[{number}]")
                     for number, given in enumerate(self.allocations))

    @model_validator(mode="after")
    def _place_sections(self) -> Config:
        """Each section with secrets learns where it is, for the sentence naming one that cannot be read."""
        for number, cluster in enumerate(self.clusters):
            cluster._place = f"clusters[{number}]"
            cluster.prometheus._place = f"clusters[{number}].prometheus"
        self.directory._place, self.email._place, self.web._place = "directory", "email", "web"
        if self.coldfront is not None:
            self.coldfront._place = "coldfront"
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
        names += [DirectoryName(f"credits.monthly[{number}].team", "team", credit.team)
                  for number, credit in enumerate(self.credits.monthly)]
        names += [DirectoryName(f"credits.subsidies[{number}].team", "team", subsidy.team)
                  for number, subsidy in enumerate(self.credits.subsidies) if subsidy.team]
        names += [DirectoryName(f"web.admins[{number}]", "person", uid) for number, uid in enumerate(self.web.admins)]
        names += [DirectoryName(f"accounts.assignments[{number}].{a.subject.kind}", a.subject.kind, a.subject.name)
                  for number, a in enumerate(self.accounts.assignments if self.accounts else [])
                  if a.subject.kind != "namespace"]
        return [name for name in names if not (name.kind == "team" and name.name == self.namespaces.unallocated_team)]

    def run_secrets(self) -> None:
        """Read every secret `billing run` uses (live stores, an LDAP directory, SMTP), before it asks anyone."""
        sections: list[Section] = [c.prometheus for c in self.clusters if c.prometheus.url]
        if self.directory.url:
            sections.append(self.directory)
        if self.email.enabled and not self.email.outbox_dir:
            sections.append(self.email)
        if self.coldfront is not None:
            sections.append(self.coldfront)
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
