"""Which store answers a cluster's queries, and how its query language must be spoken.

docs/spec.md defines the bill on raw samples with Prometheus 2.x instant semantics:
at t the value of a series is its latest sample in [t - 5 min, t]. A bare
selector means exactly that on a Prometheus 2.x engine (Prometheus 2, Thanos
Query, Mimir 2, Cortex). MetricsQL (VictoriaMetrics) guesses its lookback from
the scrape interval instead, so there the queries say it explicitly:
`last_over_time(x[5m+1ms])` over its half-open (t - d, t] windows, and
`tlast_over_time` for a sample's own timestamp. Prometheus 3 has half-open
windows too. Which one answers is read from `/api/v1/status/buildinfo`
(`engine_of`): the one store detection, which the run, the self-audit and
`billing check` share.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from billing.collect.figures import PODS, figure
from billing.collect.prometheus import PrometheusSource
from billing.config import DRA_GPU, ClusterConfig
from billing.days import BillingDay

log = logging.getLogger(__name__)

LOOKBACK_MS = 300_000  # Prometheus' default lookback delta for instant vectors


@dataclass(frozen=True)
class Engine:
    """The query engine behind a cluster's URL, as far as the bill depends on it."""

    name: str  # "Prometheus 2.42.0", "VictoriaMetrics", "Thanos Query 0.37.2", ...
    metricsql: bool  # VictoriaMetrics' MetricsQL rather than PromQL
    closed_lookback: bool  # a bare selector sees samples exactly 5 minutes old (PromQL 2.x)
    kind: str = "prometheus"  # prometheus, thanos, mimir, cortex, victoriametrics or unknown
    version: str = ""  # as the store reports it; '' where it reports none of its own

    def __str__(self) -> str:
        return self.name

    def latest(self, selector: str, before: int = 0) -> str:
        """The series' value at each instant with the lookback of docs/spec.md "Rule 1: sampling instants": its latest
        sample in [t - 5 min, t], and none once that is a staleness marker (docs/spec.md "Live stores: staleness and
        exporter restarts"). A bare selector on Prometheus 2; MetricsQL's `default_rollup` with the window said,
        the one rollup of VictoriaMetrics that keeps markers (`last_over_time`, like every range selector, skips
        them and would bill a deleted pod for 5 minutes more). `before`: the value `before` seconds earlier (a
        counter's step, docs/spec.md "Energy and carbon")."""
        offset = f" offset {before}s" if before else ""
        if self.closed_lookback:
            return selector + offset
        rollup = "default_rollup" if self.metricsql else "last_over_time"
        return f"{rollup}({selector}[{LOOKBACK_MS + 1}ms]{offset})"  # (t - 5 min - 1 ms, t] at ms precision

    def sample_time(self, selector: str) -> str:
        """The timestamp of the sample `latest` reads (none where `latest` has none)."""
        if self.metricsql:
            return f"tlast_over_time({selector}[{LOOKBACK_MS + 1}ms]) and {self.latest(selector)}"
        return f"timestamp({selector})"


PROMETHEUS_2 = Engine("Prometheus 2", metricsql=False, closed_lookback=True)
STORE_NAMES = {"prometheus": "Prometheus", "thanos": "Thanos Query", "mimir": "Grafana Mimir", "cortex": "Cortex",
               "victoriametrics": "VictoriaMetrics", "unknown": "an unknown store (asked as Prometheus 2)"}
VICTORIA_METRICS_HEADER = "X-Server-Hostname"  # every VictoriaMetrics answer has it


def engine_of(buildinfo: dict, headers: Mapping[str, str] | None = None) -> Engine:
    """The engine from the `data` of a /api/v1/status/buildinfo answer and its headers.

    Prometheus reports its version with the Go version it was built with,
    whose major decides the lookback's older end; Thanos and Cortex share that
    shape with 0.x and 1.x versions (on Prometheus 2's engine); Mimir names
    itself (`application`). VictoriaMetrics sends an `X-Server-Hostname`
    header and a buildinfo without `goVersion` (empty in 1.79, an emulated
    Prometheus version later), so its own version is not known from it. A
    store without the page is asked as Prometheus 2."""
    info = buildinfo if isinstance(buildinfo, dict) else {}
    version = str(info.get("version", ""))
    major = version.split(".", 1)[0]
    if "mimir" in str(info.get("application", "")).lower():
        kind = "mimir"
    elif any(name.lower() == VICTORIA_METRICS_HEADER.lower() for name in headers or {}) or (
            info and "goVersion" not in info):
        kind, version = "victoriametrics", ""
    elif not version:
        kind = "unknown"
    else:
        kind = {"0": "thanos", "1": "cortex"}.get(major, "prometheus")
    name = " ".join(filter(None, [STORE_NAMES[kind], version]))
    if kind == "victoriametrics":
        return Engine(name, metricsql=True, closed_lookback=False, kind=kind)
    prometheus_3 = kind == "prometheus" and major.isdigit() and int(major) >= 3  # half-open windows
    return Engine(name, metricsql=False, closed_lookback=not prometheus_3, kind=kind, version=version)


LABELS = ("namespace", "pod", "container", "node")  # what a honor_labels: false scrape renames
FAMILIES = {  # metric family -> the metrics that show how it was scraped
    "kube-state-metrics": ("kube_pod_info", "kube_pod_container_resource_requests"),
    "DCGM": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    "cAdvisor": ("container_cpu_usage_seconds_total",),
    "kube-scheduler": ("kube_pod_resource_request",),
}
# renames_query's answers where kube-scheduler's figures are in the store, and where dcgm-exporter attributes GPUs
# held through DRA (docs/spec.md rule 3, "GPUs through DRA"); and its count of the pods kube-state-metrics lists
SCHEDULER_FOUND, DRA_FOUND, PODS_FOUND = "kube-scheduler/present", "DCGM/dra", "kube-state-metrics/pods"


@dataclass(frozen=True)
class FamilyLabels:
    """Under which names one metric family's series carry the exporter's namespace, pod, container, node.

    A scrape with `honor_labels: false` from a target that has labels of these
    names keeps the target's own (the exporter pod's) under the plain names and
    moves the exporter's to `exported_<name>`."""

    namespace: str = "namespace"
    pod: str = "pod"
    container: str = "container"
    node: str = "node"

    def renamed(self) -> dict[str, str]:
        """{plain name: name in the store} for each label the scrape moved."""
        return {label: getattr(self, label) for label in LABELS if getattr(self, label) != label}

    def plain_labels(self, labels: dict[str, str]) -> dict[str, str]:
        """A series' labels as `plain` leaves them, for samples read as they are stored (the self-audit)."""
        return {**labels, **{label: labels[stored] for label, stored in self.renamed().items() if labels.get(stored)}}

    def plain(self, expression: str, labels: Collection[str] = LABELS) -> str:
        """The expression's series with the exporter's labels under their plain names again, so that
        everything after it (grouping, joins, the caller) speaks of `namespace`, `pod`, ... A series
        without the stored label keeps its plain one (another scrape job of the same exporter may
        have honoured its labels). `labels`: those of the four the series carry at all (shorter text)."""
        for label, stored in self.renamed().items():
            if label not in labels:
                continue
            expression = f'label_replace({expression}, "{label}", "$1", "{stored}", "(.+)")'
        return expression


@dataclass(frozen=True)
class ScrapeLabels:
    """The label names of each metric family the bill reads, for one cluster."""

    kube_state_metrics: FamilyLabels = FamilyLabels()
    dcgm: FamilyLabels = FamilyLabels()
    cadvisor: FamilyLabels = FamilyLabels()
    scheduler: FamilyLabels = FamilyLabels()

    def of(self, family: str) -> FamilyLabels:
        return getattr(self, _ATTRIBUTES[family])


_ATTRIBUTES = {"kube-state-metrics": "kube_state_metrics", "DCGM": "dcgm", "cAdvisor": "cadvisor",
               "kube-scheduler": "scheduler"}


def renames_query(selector: str, engine: Engine = PROMETHEUS_2) -> str:
    """One query answering, per family and label, whether its series carry `exported_<label>`:
    a series {found="<family>/<label>"} for each such pair; and {found="kube-scheduler/present"} where
    kube-scheduler's figures are there at all, {found="DCGM/dra"} where dcgm-exporter labels GPUs held through DRA.
    And {found="kube-state-metrics/pods"}: how many pods kube-state-metrics lists (one `phase="Running"` series each,
    whatever their phase), from which the day's chunks are sized (chunks.chunks)."""
    extra = f", {selector.strip()}" if selector.strip() else ""
    branches = [
        f'label_replace(count({{__name__=~"{"|".join(metrics)}", exported_{label}!=""{extra}}}), '
        f'"found", "{family}/{label}", "", "")'
        for family, metrics in FAMILIES.items() for label in LABELS
    ]
    scheduler = f'label_replace(count({{__name__="{FAMILIES["kube-scheduler"][0]}"{extra}}}), "found", "{SCHEDULER_FOUND}", "", "")'
    dra = f'label_replace(count({{__name__="{FAMILIES["DCGM"][0]}", dra_driver_name!=""{extra}}}), "found", "{DRA_FOUND}", "", "")'
    pods = engine.latest(f'{{__name__="kube_pod_status_phase", phase="Running"{extra}}}')
    listed = f'label_replace(count({pods}), "found", "{PODS_FOUND}", "", "")'
    return "\nor ".join([*branches, scheduler, dra, listed])


def scrape_labels(found: list[dict], override: dict[str, str] | None = None) -> ScrapeLabels:
    """The label names per family from the answer of `renames_query` (a range query over the day);
    `override` (clusters[].label_names) applies to every family instead."""
    if override is not None:
        names = FamilyLabels(**override)
        return ScrapeLabels(names, names, names, names)
    moved: dict[str, dict[str, str]] = {family: {} for family in FAMILIES}
    for series in found:
        family, _, label = series["metric"].get("found", "").partition("/")
        if family in moved and label in LABELS:
            moved[family][label] = f"exported_{label}"
    return ScrapeLabels(**{_ATTRIBUTES[family]: FamilyLabels(**labels) for family, labels in moved.items()})


@dataclass(frozen=True)
class Store:
    """How to ask one cluster's store: its engine, and the label names its scrapes left."""

    engine: Engine
    labels: ScrapeLabels = ScrapeLabels()
    scheduler: bool = False  # kube-scheduler's kube_pod_resource_request is in the store (docs/spec.md rule 3)
    dra: bool = False  # dcgm-exporter attributes GPUs held through DRA (docs/spec.md "GPUs through DRA")
    busiest: int = 0  # the most pods kube-state-metrics listed at once, at the day's whole hours (copies counted)

    def renames(self) -> list[str]:
        """Per metric family whose labels are not where the exporter put them: where they are read from."""
        return [f"{family} labels read from {', '.join(self.labels.of(family).renamed().values())}"
                for family in FAMILIES if self.labels.of(family).renamed()]


def store_of(source: PrometheusSource, cluster: ClusterConfig, day: BillingDay) -> Store:
    """What a cluster's store is and how its series are labelled during the day, asked once per
    cluster and run; each renamed family is logged."""
    engine = engine_of(*source.buildinfo())
    log.info("cluster %s: the store is %s", cluster.name, engine)
    override = cluster.label_names.model_dump() if cluster.label_names else None
    found = source.range(renames_query(cluster.prometheus.selector, engine), day.start.timestamp(),
                         day.end.timestamp(), RENAMES_STEP)
    labels = scrape_labels(found, override)
    present = {series["metric"].get("found") for series in found}
    if SCHEDULER_FOUND in present:
        log.info("cluster %s: kube-scheduler's kube_pod_resource_request is scraped: its figures bill cpu and memory "
                 "where they are seen", cluster.name)
    if DRA_FOUND in present:
        log.info("cluster %s: dcgm-exporter attributes GPUs held through DRA: billed as %s", cluster.name, DRA_GPU)
    for family in FAMILIES:
        renamed = labels.of(family).renamed()
        if renamed:
            log.info("cluster %s: %s labels read from %s (%s)", cluster.name, family,
                     ", ".join(renamed.values()), "clusters[].label_names" if override is not None
                     else "a scrape with honor_labels: false renamed them")
    busiest = max((figure(value, PODS, series["metric"], cluster.name) for series in found if series["metric"].get("found") == PODS_FOUND
                   for _, value in series["values"]), default=0.0)
    return Store(engine, labels, SCHEDULER_FOUND in present, DRA_FOUND in present, int(busiest))


RENAMES_STEP = 3600  # how often over the day `store_of` looks for renamed labels
DEFAULT_STORE = Store(PROMETHEUS_2)
