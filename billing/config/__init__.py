"""The configuration file, one module per section of it; this package hands on the names the rest of billing uses,
so that `from billing.config import ClusterConfig` does not depend on which module a section lives in."""

from billing.config.file import (
    DRA_GPU,
    HIGHEST_BUDGET,
    BudgetsConfig,
    ClusterConfig,
    Config,
    ConfigError,
    CostRecovery,
    DatedPrices,
    DirectoryConfig,
    DirectoryName,
    EmailConfig,
    Kueue,
    LabelNames,
    McpConfig,
    MetricsConfig,
    NamespaceRules,
    Prices,
    PrometheusConfig,
    WebConfig,
    config_path,
    kube_label,
    load_config,
    parse_duration,
    read_secrets,
    untrusted_certificate,
)

__all__ = [
    "DRA_GPU", "HIGHEST_BUDGET", "BudgetsConfig", "ClusterConfig", "Config", "ConfigError", "CostRecovery",
    "DatedPrices", "DirectoryConfig", "DirectoryName", "EmailConfig", "Kueue", "LabelNames", "McpConfig",
    "MetricsConfig", "NamespaceRules", "Prices", "PrometheusConfig", "WebConfig", "config_path", "kube_label",
    "load_config", "parse_duration", "read_secrets", "untrusted_certificate",
]
