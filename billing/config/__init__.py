"""The configuration file, one module per section of it. This package hands on every public name that
billing/config.py had, so `from billing.config import ClusterConfig` works whichever module a section lives in."""

from billing.config.account_invoices import AccountInvoicesConfig
from billing.config.accounts import AccountsConfig
from billing.config.clusters import (
    DRA_GPU,
    BoundPendingRule,
    ClusterConfig,
    GpuFractions,
    HeaderName,
    HeaderValue,
    LabelName,
    LabelNames,
    PrometheusConfig,
    RequestRule,
)
from billing.config.coldfront import ColdFrontConfig
from billing.config.credits import CreditsConfig, MonthlyCredit, Subsidy
from billing.config.directory import DirectoryConfig, NamespaceRules, PeopleConfig, TeamsConfig
from billing.config.email import EmailConfig
from billing.config.file import DEEPEST_CONFIG, LARGEST_CONFIG, Config, DirectoryName, config_path, load_config
from billing.config.prices import (
    HIGHEST_BUDGET,
    HIGHEST_PRICE,
    PRICE_FORMS,
    Budget,
    BudgetsConfig,
    CostRecovery,
    DatedPrices,
    Day,
    Price,
    Prices,
    PriceSets,
)
from billing.config.quotas import Kueue, KueueQueue, ReservedPools
from billing.config.run import LABEL_KEY, AuditConfig, MetricsConfig, WasteConfig, WorkloadsConfig, kube_label
from billing.config.section import (
    CONFIG_DIR,
    ConfigError,
    ConfigPath,
    DatabaseUrl,
    Duration,
    WebAddress,
    parse_duration,
    read_secrets,
    untrusted_certificate,
)
from billing.config.service_units import ServiceUnits
from billing.config.web import HOST_NAME, LOOPBACK_HOSTS, McpConfig, WebConfig

__all__ = [
    "CONFIG_DIR", "DEEPEST_CONFIG", "AccountInvoicesConfig", "AccountsConfig", "DRA_GPU", "HIGHEST_BUDGET", "HIGHEST_PRICE", "HOST_NAME", "LABEL_KEY",
    "LARGEST_CONFIG", "LOOPBACK_HOSTS", "PRICE_FORMS", "AuditConfig", "BoundPendingRule", "Budget", "BudgetsConfig",
    "ClusterConfig", "ColdFrontConfig", "Config", "ConfigError", "ConfigPath", "CostRecovery", "DatabaseUrl", "DatedPrices", "Day",
    "DirectoryConfig", "DirectoryName", "Duration", "EmailConfig", "GpuFractions", "HeaderName", "HeaderValue",
    "Kueue", "KueueQueue", "LabelName", "LabelNames", "McpConfig", "MetricsConfig", "NamespaceRules",
    "PeopleConfig", "Price", "PriceSets", "Prices", "PrometheusConfig", "RequestRule", "ReservedPools",
    "TeamsConfig", "WasteConfig", "WebAddress", "WebConfig", "WorkloadsConfig", "config_path", "kube_label",
    "load_config", "parse_duration", "read_secrets", "untrusted_certificate",
    # credits and subsidies, service units
    "CreditsConfig", "MonthlyCredit", "ServiceUnits", "Subsidy",
]
