"""detect_store on real servers: Prometheus 2.42 and VictoriaMetrics 1.79 from the Debian packages."""

from datetime import date
from zoneinfo import ZoneInfo

from billing.config import PrometheusConfig
from billing.days import billing_day
from billing.prometheus import LivePrometheus, detect_store
from fixtures.ksm import make_world
from tests.integration.servers import start_victoriametrics

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def source(url: str) -> LivePrometheus:
    return LivePrometheus("jaguar", PrometheusConfig(url=url, retries=0))


def test_a_real_prometheus_is_detected_with_its_version(prometheus_server):
    prom = prometheus_server(make_world(3, DAY.start.timestamp(), pods=5, nodes=2, day_seconds=3600, margin=600))
    store = detect_store(source(prom.url))
    assert store.kind == "prometheus" and store.version.startswith("2.42")
    assert str(store).startswith("Prometheus 2.42")


def test_a_real_victoriametrics_is_detected_and_takes_the_thanos_parameters(tmp_path):
    server = start_victoriametrics(tmp_path / "vm")
    try:
        vm = source(server.url)
        assert detect_store(vm).kind == "victoriametrics"
        # every query carries partial_response=false and dedup=true; VictoriaMetrics ignores them
        assert [s["value"][1] for s in vm.instant("vector(1)", DAY.start.timestamp())] == ["1"]
    finally:
        server.stop()
