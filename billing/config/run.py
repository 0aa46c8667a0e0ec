"""What `billing run` does besides charging: pushing its own health, measuring waste, costs per workload and
cost label, and auditing itself."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from billing.config.section import Duration, Section, WebAddress


class MetricsConfig(Section):
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


class WasteConfig(Section):
    """What the reports call waste (billing stays request-based)."""

    enabled: bool = True  # measure waste at all (it costs Prometheus about what billing does)
    gpu_utilisation_below: Annotated[float, Field(gt=0, le=100)] = 5.0  # percent: a GPU held below this is idle


class WorkloadsConfig(Section):
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


def cost_label_keys(names: list[str]) -> list[str]:
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


class AuditConfig(Section):
    """The self-audit of every run (billing/collect/audit.py)."""

    enabled: bool = True
    pods: Annotated[int, Field(ge=1)] = 20  # running pods recomputed instant by instant per cluster-day
