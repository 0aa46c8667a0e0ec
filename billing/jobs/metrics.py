"""The nightly job's own health, pushed to a Prometheus Pushgateway.

A CronJob's pod lives for minutes and is gone before Prometheus would scrape
it, so after a successful run the job pushes what it did to a Pushgateway,
which Prometheus scrapes instead. The alert in cronjob/alerts.yaml fires
when `billing_last_success_timestamp_seconds` grows older than 26 hours.

The ledger's costs per team for Grafana are not pushed: `billing serve`
answers them on /metrics (billing/publish/cost_metrics.py), read from the
ledger at each scrape. Pushed as well, a dashboard summing them would count
every cost twice (docs/deploy.md, "Costs in Grafana").

Only successes are pushed, and a push replaces the job's whole group (HTTP
PUT), so a cluster removed from the config disappears from the gateway too.

A failed push is logged as a warning and does not fail the run: by then the
ledger, reports and emails are done, and exit status 1 would make Kubernetes
retry the whole day for nothing. A push that keeps failing is still noticed,
since the success timestamp stops moving and the same alert fires.
"""

from __future__ import annotations

import http.client
import logging
import time
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
from prometheus_client.exposition import basic_auth_handler, default_handler

from billing.config import MetricsConfig
from billing.jobs.run import RunSummary
from billing.resources import per_resource

log = logging.getLogger(__name__)


def run_metrics(summary: RunSummary, currency: str, duration: float, finished: float) -> CollectorRegistry:
    """The metrics of one successful run, in a registry of their own (not the process-global one)."""
    registry = CollectorRegistry()
    Gauge(
        "billing_last_success_timestamp_seconds", "Unix time at which the last successful run finished.",
        registry=registry,
    ).set(finished)
    Gauge("billing_run_duration_seconds", "Wall time of the last successful run.", registry=registry).set(duration)
    Gauge(
        "billing_ledger_rows_written", "Ledger rows written for the billed day by the last successful run.",
        registry=registry,
    ).set(summary.rows)
    cost = Gauge(
        "billing_cluster_cost", "Cost of the billed day per cluster, in the configured currency.",
        ["cluster", "currency"], registry=registry,
    )
    for cluster, total in summary.cluster_costs.items():
        cost.labels(cluster, currency).set(total)
    hours = Gauge(
        "billing_cluster_resource_hours", "Resource-hours of the billed day per cluster, each in its unit "
        f"({', '.join(f'{name} {unit}' for name, unit in per_resource('unit').items())}).",
        ["cluster", "resource"], registry=registry,
    )
    for cluster, by_resource in summary.resource_hours.items():
        for resource, resource_hours in by_resource.items():
            hours.labels(cluster, resource).set(resource_hours)
    return registry


def push_run_metrics(config: MetricsConfig, summary: RunSummary, currency: str, duration: float) -> None:
    """Push a successful run's metrics; a gateway that fails is a warning, never a failed run."""
    registry = run_metrics(summary, currency, duration, finished=time.time())
    gateway, handler = _gateway(config.pushgateway)
    try:
        push_to_gateway(gateway, job=config.job, registry=registry, timeout=config.timeout, handler=handler)
    except (OSError, http.client.HTTPException) as exc:  # unreachable, refused, timed out, HTTP 4xx/5xx, garbled
        log.warning(
            "could not push run metrics to the Pushgateway at %s (%s); the run itself succeeded",
            gateway, exc, extra={"pushgateway": gateway},
        )
        return
    log.info("pushed run metrics to the Pushgateway at %s as job %s", gateway, config.job)


def _gateway(url: str) -> tuple[str, Callable]:
    """The URL without `user:password@`, and a handler sending those as HTTP basic auth.

    urllib would take them for part of the host name; a gateway behind basic
    auth is configured as `https://user:password@pushgateway.example.org`.
    """
    parts = urlsplit(url)
    if parts.username is None:
        return url, default_handler
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    username, password = unquote(parts.username), unquote(parts.password or "")

    def with_credentials(url: str, method: str, timeout: float | None, headers: list, data: bytes) -> Callable[[], None]:
        return basic_auth_handler(url, method, timeout, headers, data, username, password)

    return bare, with_credentials
