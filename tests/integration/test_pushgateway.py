"""The run's metrics pushed to a real Prometheus Pushgateway and read back from it."""

from __future__ import annotations

import logging
import urllib.request
from datetime import date

from billing.config import MetricsConfig
from billing.jobs.metrics import push_run_metrics
from billing.jobs.run import RunSummary
from tests.helpers.run_summaries import samples, summary


def scraped(url: str) -> dict[tuple, float]:
    """billing's samples as Prometheus would scrape them from the gateway."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        return {k: v for k, v in samples(response.read().decode()).items() if k[0].startswith("billing_")}


def test_the_gateway_accepts_the_push_and_the_next_push_replaces_it(pushgateway_server, caplog):
    url = pushgateway_server.url
    with caplog.at_level(logging.INFO, logger="billing.jobs.metrics"):
        push_run_metrics(MetricsConfig(pushgateway=url), summary(), "USD", 93.5)
    assert [r.levelname for r in caplog.records] == ["INFO"]  # pushed, no warning
    first = scraped(url)
    # The gateway adds job and instance; Prometheus keeps them when it scrapes with honor_labels: true.
    assert first[("billing_run_duration_seconds", ("instance", ""), ("job", "billing"))] == 93.5
    assert first[("billing_ledger_rows_written", ("instance", ""), ("job", "billing"))] == 7
    ibis = ("billing_cluster_cost", ("cluster", "ibis"), ("currency", "USD"), ("instance", ""), ("job", "billing"))
    assert first[ibis] == 0.52

    # The next night ibis is no longer configured: its series leave the gateway too.
    jaguar_only = RunSummary(date(2026, 11, 21), 3, 10.0, {"jaguar": summary().resource_hours["jaguar"]},
                             {"jaguar": 10.0})
    push_run_metrics(MetricsConfig(pushgateway=url), jaguar_only, "USD", 50.0)
    second = scraped(url)
    assert ibis not in second
    assert {k[1][1] for k in second if k[0] == "billing_cluster_cost"} == {"jaguar"}
    assert second[("billing_ledger_rows_written", ("instance", ""), ("job", "billing"))] == 3
