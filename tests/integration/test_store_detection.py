"""stores.engine_of on real servers: Prometheus 2.42 and VictoriaMetrics 1.79 from the Debian packages."""

from datetime import date
from zoneinfo import ZoneInfo

from billing.collect.prometheus import LivePrometheus
from billing.collect.stores import engine_of
from billing.config import PrometheusConfig
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.servers import start_victoria_metrics

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def source(url: str) -> LivePrometheus:
    return LivePrometheus("jaguar", PrometheusConfig(url=url, retries=0))


def test_a_real_prometheus_is_detected_with_its_version(prometheus_server):
    prom = prometheus_server(make_world(3, DAY.start.timestamp(), pods=5, nodes=2, day_seconds=3600, margin=600))
    engine = engine_of(*source(prom.url).buildinfo())
    assert engine.kind == "prometheus" and engine.version.startswith("2.42")
    assert str(engine).startswith("Prometheus 2.42") and not engine.metricsql and engine.closed_lookback


def test_a_real_victoriametrics_is_detected_and_takes_the_thanos_parameters(tmp_path):
    server = start_victoria_metrics(None, tmp_path / "vm")
    try:
        vm = source(server.url)
        engine = engine_of(*vm.buildinfo())
        assert engine.kind == "victoriametrics" and engine.metricsql
        # every query carries partial_response=false and dedup=true; VictoriaMetrics ignores them
        assert [s["value"][1] for s in vm.instant("vector(1)", DAY.start.timestamp())] == ["1"]
    finally:
        server.stop()
