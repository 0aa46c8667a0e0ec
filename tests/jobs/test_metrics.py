"""Pushing the run's health to a Pushgateway: a local HTTP server plays the gateway.

Expected values are written out by hand from the summary each test builds.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

import billing.cli
import billing.collect.day
import billing.jobs.run
from billing.collect.usage import ClusterUsage
from billing.config import ConfigError, MetricsConfig, load_config
from billing.directory.people import Directory
from billing.jobs.metrics import push_run_metrics
from billing.jobs.run import run_day
from tests.helpers.config import MINIMAL_CONFIG, stub_node_metrics
from tests.helpers.report_ledger import fill_ledger
from tests.helpers.run_summaries import samples, summary, usage, usages


class Gateway:
    """A Pushgateway stand-in on 127.0.0.1 that records each request and answers `status`."""

    def __init__(self, status: int = 200):
        self.requests: list[dict] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                gateway.requests.append(
                    {"method": "PUT", "path": self.path, "type": self.headers["Content-Type"], "body": body.decode()}
                )
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Gateway:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_push_sends_the_runs_metrics_to_the_gateway():
    with Gateway() as gateway:
        before = time.time()
        push_run_metrics(MetricsConfig(pushgateway=gateway.url, job="billing"), summary(), "USD", duration=93.5)
        after = time.time()

    assert len(gateway.requests) == 1
    request = gateway.requests[0]
    assert request["method"] == "PUT"  # replaces the job's group: a removed cluster leaves the gateway too
    assert request["path"] == "/metrics/job/billing"
    assert request["type"].startswith("text/plain")
    pushed = samples(request["body"])
    assert before <= pushed[("billing_last_success_timestamp_seconds",)] <= after
    assert pushed[("billing_run_duration_seconds",)] == 93.5
    assert pushed[("billing_ledger_rows_written",)] == 7
    assert pushed[("billing_cluster_cost", ("cluster", "jaguar"), ("currency", "USD"))] == 62.318
    assert pushed[("billing_cluster_cost", ("cluster", "ibis"), ("currency", "USD"))] == 0.52
    hours = {key[1][1] + "/" + key[2][1]: value for key, value in pushed.items() if key[0] == "billing_cluster_resource_hours"}
    assert hours == {  # every registered resource, storage too: none held on either cluster is 0 GiB-hours
        "jaguar/cpu": 100.0, "jaguar/memory": 512.0, "jaguar/gpu": 26.5, "jaguar/storage": 0.0,
        "ibis/cpu": 10.0, "ibis/memory": 40.0, "ibis/gpu": 0.0, "ibis/storage": 0.0,
    }


def test_the_job_name_comes_from_the_config():
    with Gateway() as gateway:
        push_run_metrics(MetricsConfig(pushgateway=gateway.url + "/", job="billing-staging"), summary(), "EUR", 1.0)
    assert gateway.requests[0]["path"] == "/metrics/job/billing-staging"
    assert ("billing_cluster_cost", ("cluster", "ibis"), ("currency", "EUR")) in samples(gateway.requests[0]["body"])


@pytest.mark.parametrize("status", [400, 500])
def test_a_gateway_that_refuses_is_a_warning(status, caplog):
    with Gateway(status) as gateway, caplog.at_level(logging.WARNING, logger="billing.jobs.metrics"):
        push_run_metrics(MetricsConfig(pushgateway=gateway.url), summary(), "USD", 1.0)
    assert len(gateway.requests) == 1
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert gateway.url in caplog.text and str(status) in caplog.text and "the run itself succeeded" in caplog.text


def test_an_unreachable_gateway_is_a_warning(caplog):
    with Gateway() as gateway:
        url = gateway.url  # the port is free again once the server is closed
    with caplog.at_level(logging.WARNING, logger="billing.jobs.metrics"):
        push_run_metrics(MetricsConfig(pushgateway=url, timeout=2), summary(), "USD", 1.0)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert url in caplog.text


@pytest.fixture
def config_file(write_config, tmp_path):
    """config_file(metrics, **changes): the unit tests' minimal config with a ledger of its own and `metrics:`."""

    def write(metrics: dict | None, **changes) -> Path:
        return write_config(
            database=f"sqlite:///{tmp_path / 'ledger.db'}", **({"metrics": metrics} if metrics else {}), **changes
        )

    return write


def test_billing_run_pushes_after_a_successful_day(config_file, monkeypatch):
    days = []
    monkeypatch.setattr("billing.jobs.run.run_day", lambda config, day, require_coverage, summaries="send": days.append(day) or summary())
    with Gateway() as gateway:
        path = config_file({"pushgateway": gateway.url})
        result = CliRunner().invoke(billing.cli.main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert days == [date(2026, 11, 20)]
    assert [r["path"] for r in gateway.requests] == ["/metrics/job/billing"]
    assert samples(gateway.requests[0]["body"])[("billing_ledger_rows_written",)] == 7


def test_billing_run_pushes_its_health_and_no_costs(config_file, monkeypatch, tmp_path):
    """The ledger's costs reach Prometheus through serve's /metrics only: pushed as well, the dashboard counted each
    twice (issue 43)."""
    monkeypatch.setattr("billing.jobs.run.run_day", lambda *args, **kwargs: summary())
    with Gateway() as gateway:
        path = config_file({"pushgateway": gateway.url})
        fill_ledger(load_config(path).database)  # 2026-11-20 billed: there are costs to leave out
        result = CliRunner().invoke(billing.cli.main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert {key[0] for key in samples(gateway.requests[0]["body"])} == {
        "billing_last_success_timestamp_seconds", "billing_run_duration_seconds", "billing_ledger_rows_written",
        "billing_cluster_cost", "billing_cluster_resource_hours"}


def test_billing_run_with_an_unreachable_gateway_still_succeeds(config_file, monkeypatch):
    monkeypatch.setattr("billing.jobs.run.run_day", lambda config, day, require_coverage, summaries="send": summary())
    with Gateway() as gateway:
        url = gateway.url
    path = config_file({"pushgateway": url, "timeout": "2s"})
    result = CliRunner().invoke(billing.cli.main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 0, result.output


def test_a_failed_run_pushes_nothing(config_file, tmp_path):
    """An empty replay directory fails the first query: exit 1, and the gateway hears nothing."""
    with Gateway() as gateway:
        cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"replay": str(tmp_path)}}
        path = config_file({"pushgateway": gateway.url}, clusters=[cluster])
        result = CliRunner().invoke(billing.cli.main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 1
    assert gateway.requests == []


def test_without_a_metrics_section_nothing_is_pushed(config_file):
    config = load_config(config_file(None))
    assert config.metrics.pushgateway == ""
    assert config.metrics.job == "billing"


@pytest.mark.parametrize(
    "metrics, sentence",
    [
        ({"pushgateway": "pushgateway:9091"}, "metrics.pushgateway: expected an http:// or https:// URL"),
        # without a scheme no redaction can find the password: the sentence leaves it out itself
        ({"pushgateway": "pgw:S3CRET@pushgateway:9091"},
         "metrics.pushgateway: expected an http:// or https:// URL, got '\\*\\*\\*@pushgateway:9091'$"),
        ({"pushgateway": "http://pg:9091", "job": ""}, "metrics.job: String should have at least 1 character"),
        ({"pushgateway": "http://pg:9091", "jobname": "x"}, "metrics.jobname: unknown key"),
    ],
)
def test_bad_metrics_sections_name_the_key(config_file, metrics, sentence):
    with pytest.raises(ConfigError, match=sentence):
        load_config(config_file(metrics))


@pytest.mark.parametrize("password", ["Push/Pw-SECRET", "Push?Pw-SECRET", "Push#Pw-SECRET", "1234/SECRET"])
def test_a_pushgateway_password_with_an_unescaped_delimiter_is_refused_without_showing_it(config_file, password):
    """urllib would take `pgwuser:Push` for host and port and push nowhere, night after night, its error quoting
    the password's first part; so the run refuses the URL at once (exit 2) and names the key and the fix."""
    path = config_file({"pushgateway": f"http://pgwuser:{password}@127.0.0.1:9091"})
    result = CliRunner().invoke(billing.cli.main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "metrics.pushgateway: " in result.output and "percent-encode" in result.output
    assert "SECRET" not in result.output and "Push" not in result.output


def test_run_day_reports_the_cost_of_every_configured_cluster(config_file, monkeypatch):
    """The per-cluster totals come from the priced rows; a cluster that ran nothing reports 0."""
    jaguar = MINIMAL_CONFIG["clusters"][0]  # cpu 0.01, memory 0.002, gpu 1.0, H100 2.5
    config = load_config(config_file(None, clusters=[jaguar, {**jaguar, "name": "ibis"}, {**jaguar, "name": "idle"}]))
    collected = {c.cluster: c for c in usages()} | {"idle": ClusterUsage("idle", usage([]), 0, 8, 1.0)}
    monkeypatch.setattr(billing.jobs.run, "prometheus_source", lambda name, prometheus: name)
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *args: collected[context.cluster.name])
    stub_node_metrics(monkeypatch)
    monkeypatch.setattr(billing.jobs.run, "load_directory", lambda directory: Directory({}, {}))

    result = run_day(config, date(2026, 11, 20))

    # jaguar: 24 x 2.5 + 2.5 x 1.0 + 100 x 0.01 + 512 x 0.002 = 64.524 (every namespace unallocated)
    # ibis, same prices: 10 x 0.01 + 40 x 0.002 = 0.18
    assert result.cluster_costs == pytest.approx({"jaguar": 64.524, "ibis": 0.18, "idle": 0.0}, abs=1e-9)
    assert result.total_cost == pytest.approx(64.704, abs=1e-9)
    assert result.resource_hours == {  # what the pushed metrics say: each cluster's own, none of them none
        "jaguar": {"cpu": 100.0, "memory": 512.0, "gpu": 26.5, "storage": 0.0},
        "ibis": {"cpu": 10.0, "memory": 40.0, "gpu": 0.0, "storage": 0.0},
        "idle": {"cpu": 0.0, "memory": 0.0, "gpu": 0.0, "storage": 0.0},
    }
