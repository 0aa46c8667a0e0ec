import socket

import pytest
import requests
import responses

from billing.config import PrometheusConfig
from billing.prometheus import LivePrometheus, PrometheusError

URL = "http://prometheus.test:9090"
QUERY_URL = f"{URL}/api/v1/query"
OK = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2"]}]}}


def live(**config) -> LivePrometheus:
    return LivePrometheus("jaguar", PrometheusConfig(url=URL, retries=3, **config), backoff=0)


@responses.activate
def test_posts_with_the_bearer_token_and_returns_the_result(monkeypatch):
    monkeypatch.setenv("PROM_TOKEN", "t0ken")
    responses.post(QUERY_URL, json=OK)
    assert live(bearer_token_env="PROM_TOKEN").instant("up", 1000) == OK["data"]["result"]
    call = responses.calls[0]
    assert call.request.method == "POST"
    assert call.request.headers["Authorization"] == "Bearer t0ken"


@responses.activate
@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retries_transient_statuses(status):
    responses.post(QUERY_URL, status=status, json={"status": "error"})
    responses.post(QUERY_URL, json=OK)
    assert live().instant("up", 1000) == OK["data"]["result"]
    assert len(responses.calls) == 2


@responses.activate
def test_gives_up_after_the_retries_with_one_sentence():
    responses.post(QUERY_URL, status=503, json={"status": "error"})
    with pytest.raises(PrometheusError, match=f"Prometheus of cluster jaguar at {URL} kept failing after retries"):
        live().instant("up", 1000)
    assert len(responses.calls) == 4


@responses.activate
def test_a_bad_query_fails_at_once_and_names_the_query():
    responses.post(QUERY_URL, status=400, json={"status": "error", "error": "parse error"})
    with pytest.raises(PrometheusError, match=r"rejected the query sum\(broken.*400.*parse error"):
        live().instant("sum(broken", 1000)
    assert len(responses.calls) == 1


@responses.activate
def test_invalid_json_is_a_clear_error():
    responses.post(QUERY_URL, body="<html>proxy error</html>", status=200)
    with pytest.raises(PrometheusError, match="not a Prometheus JSON result"):
        live().instant("up", 1000)


@responses.activate
def test_a_timeout_is_a_clear_error():
    responses.post(QUERY_URL, body=requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(PrometheusError, match="did not answer within the 120 s timeout in 1 attempt"):
        LivePrometheus("jaguar", PrometheusConfig(url=URL, retries=0)).instant("up", 1000)


def test_an_unreachable_server_is_named():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    source = LivePrometheus("ibis", PrometheusConfig(url=f"http://127.0.0.1:{port}", retries=1), backoff=0)
    with pytest.raises(PrometheusError, match=f"cluster ibis at http://127.0.0.1:{port} is unreachable .*refused"):
        source.instant("up", 1000)




BUILDINFO_URL = f"{URL}/api/v1/status/buildinfo"


@responses.activate
def test_buildinfo_names_the_store_with_the_bearer_token(monkeypatch):
    monkeypatch.setenv("PROM_TOKEN", "t0ken")
    responses.get(BUILDINFO_URL, json={"status": "success", "data": {"version": "2.42.0"}})
    assert live(bearer_token_env="PROM_TOKEN").buildinfo() == {"version": "2.42.0"}
    assert responses.calls[0].request.headers["Authorization"] == "Bearer t0ken"


@responses.activate
def test_a_store_without_buildinfo_is_asked_as_prometheus_2(caplog):
    responses.get(BUILDINFO_URL, status=404, body="404 page not found")
    assert live().buildinfo() == {"version": "unknown"}
    assert "has no build information (HTTP 404: 404 page not found); querying it as Prometheus 2" in caplog.text


@responses.activate
def test_buildinfo_that_keeps_failing_is_one_sentence():
    responses.get(BUILDINFO_URL, status=503, json={"status": "error", "error": "overloaded"})
    with pytest.raises(PrometheusError, match=f"^Prometheus of cluster jaguar at {URL} kept failing after retries"):
        live().buildinfo()
