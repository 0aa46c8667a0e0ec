"""The configuration file, one module per section of it; this package hands on the names the rest of billing uses,
so that `from billing.config import ClusterConfig` does not depend on which module a section lives in."""

from billing.config.clusters import DRA_GPU, ClusterConfig, LabelNames, PrometheusConfig
from billing.config.directory import DirectoryConfig, NamespaceRules
from billing.config.email import EmailConfig
from billing.config.file import Config, DirectoryName, config_path, load_config
from billing.config.prices import HIGHEST_BUDGET, BudgetsConfig, CostRecovery, DatedPrices, Prices
from billing.config.quotas import Kueue
from billing.config.run import MetricsConfig, kube_label
from billing.config.section import ConfigError, parse_duration, read_secrets, untrusted_certificate
from billing.config.web import McpConfig, WebConfig

__all__ = [
    "DRA_GPU", "HIGHEST_BUDGET", "BudgetsConfig", "ClusterConfig", "Config", "ConfigError", "CostRecovery",
    "DatedPrices", "DirectoryConfig", "DirectoryName", "EmailConfig", "Kueue", "LabelNames", "McpConfig",
    "MetricsConfig", "NamespaceRules", "Prices", "PrometheusConfig", "WebConfig", "config_path", "kube_label",
    "load_config", "parse_duration", "read_secrets", "untrusted_certificate",
]
