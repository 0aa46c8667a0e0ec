import http.server
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qsl

import pytest
import requests
import responses

from billing.collect.prometheus import LivePrometheus, PrometheusError
from billing.collect.replay import ReplayPrometheus
from billing.collect.stores import engine_of
from billing.config import PrometheusConfig
from fixtures.servers import free_port
from tests.helpers.faults import trickling_server

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
def test_asks_for_answers_uncompressed_unless_the_configured_headers_say_otherwise():
    responses.post(QUERY_URL, json=OK)
    live().instant("up", 1000)
    live(headers={"accept-encoding": "gzip"}).instant("up", 1000)
    assert [call.request.headers["Accept-Encoding"] for call in responses.calls] == ["identity", "gzip"]


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
    with pytest.raises(PrometheusError) as failure:
        live(timeout="20s").instant("up", 1000)
    assert str(failure.value) == (
        f"Prometheus of cluster jaguar at {URL} kept failing after retries (too many 503 error responses): the server "
        "behind url is failing or overloaded; retries (3) sets how often a query is asked again, with backoff, and "
        "timeout (20 s) how long each attempt may take"
    )
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


def test_an_answer_still_arriving_at_the_timeout_is_a_timeout():
    """A server, or a proxy, that sends its answer a byte at a time is never silent for as long as one read from the
    socket may wait: the query's timeout bounds the whole answer (here 2 s of an answer that would take 40)."""
    answer = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}, "pad": "x" * 300})
    with trickling_server(answer.encode(), every=0.1, headers_at_once=True) as url:
        source = LivePrometheus("jaguar", PrometheusConfig(url=url, retries=2, timeout="2s"), backoff=0)
        started = time.monotonic()
        with pytest.raises(PrometheusError, match=r"at http://127.0.0.1:\d+ was still sending its answer when the 2 s "
                                                  r"timeout ran out \(query: up\); .* timeout allows it more$"):
            source.instant("up", 1000)
    assert time.monotonic() - started < 3


def test_an_unreachable_server_is_named():
    port = free_port()
    source = LivePrometheus("ibis", PrometheusConfig(url=f"http://127.0.0.1:{port}", retries=1), backoff=0)
    with pytest.raises(PrometheusError, match=f"cluster ibis at http://127.0.0.1:{port} is unreachable .*refused.*; "
                                              "the store is down or url is wrong$"):
        source.instant("up", 1000)


@responses.activate
def test_the_query_goes_in_a_form_body_asking_thanos_for_complete_deduplicated_answers():
    responses.post(QUERY_URL, json=OK)
    long_query = "sum(up{uid=~\"" + "|".join(f"{n:036d}" for n in range(500)) + "\"})"
    live().instant(long_query, 1000)
    request = responses.calls[0].request
    assert request.url == QUERY_URL  # nothing in the URL, whose length proxies limit to a few KB
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = dict(parse_qsl(request.body))
    assert form == {"query": long_query, "time": "1000", "partial_response": "false", "dedup": "true"}


@responses.activate
def test_range_queries_carry_start_end_and_step():
    responses.post(f"{URL}/api/v1/query_range", json={"status": "success", "data": {"resultType": "matrix", "result": []}})
    assert live().range("up", 0, 3600, 60) == []
    form = dict(parse_qsl(responses.calls[0].request.body))
    assert (form["start"], form["end"], form["step"], form["partial_response"]) == ("0", "3600", "60", "false")


@responses.activate
def test_equal_label_values_of_different_answers_are_one_object():
    """What a run keeps of a big cluster's answers (rows per namespace and resource) holds each value once."""
    def answer(pod: str) -> dict:
        labels = {"namespace": "".join(["ali", "ce"]), "pod": pod, "resource": "cpu"}  # strs built apart
        return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": labels, "value": [1, "2"]}]}}
    responses.post(QUERY_URL, json=answer("a-1"))
    responses.post(QUERY_URL, json=answer("b-2"))
    source = live()
    first, second = (source.instant("up", 1000)[0]["metric"] for _ in range(2))
    assert first["namespace"] == second["namespace"] == "alice" and first["pod"] != second["pod"]
    assert first["namespace"] is second["namespace"] and first["resource"] is second["resource"]



@responses.activate
def test_a_label_named_metric_is_a_label_like_any_other():
    """Labels are shared as the answer is parsed, per JSON object: an object whose `metric` is a string is a
    series' labels (an exporter's own label named so), not a series."""
    labels = {"metric": "gpu_util", "namespace": "alice"}
    responses.post(QUERY_URL, json={"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1, "2"]}]}})
    assert live().instant("up", 1000) == [{"metric": labels, "value": [1, "2"]}]


@responses.activate
def test_an_answer_that_is_not_utf8_is_a_clear_error():
    responses.post(QUERY_URL, body=b'{"status": "success", "data": {"result": [{"metric": {"pod": "\xff"}}]}}')
    with pytest.raises(PrometheusError, match="not a Prometheus JSON result"):
        live().instant("up", 1000)

BUILDINFO = f"{URL}/api/v1/status/buildinfo"


@responses.activate
@pytest.mark.parametrize(
    "data, headers, kind, version, name, metricsql, closed_lookback",
    [
        ({"version": "2.42.0+ds", "revision": "2.42.0+ds-5", "goVersion": "go1.19.8"}, {}, "prometheus", "2.42.0+ds",
         "Prometheus 2.42.0+ds", False, True),
        ({"version": "3.1.0", "revision": "x", "goVersion": "go1.23.4"}, {}, "prometheus", "3.1.0", "Prometheus 3.1.0",
         False, False),
        ({"version": "0.37.2", "revision": "x", "branch": "HEAD", "goVersion": "go1.23.1"}, {}, "thanos", "0.37.2",
         "Thanos Query 0.37.2", False, True),
        ({"application": "Grafana Mimir", "version": "2.14.0", "goVersion": "go1.22.8", "features": {}}, {}, "mimir",
         "2.14.0", "Grafana Mimir 2.14.0", False, True),
        ({}, {"X-Server-Hostname": "vm"}, "victoriametrics", "", "VictoriaMetrics", True, False),  # what 1.79 answers
        ({"version": "2.24.0"}, {}, "victoriametrics", "", "VictoriaMetrics", True, False),  # later: emulates 2.24
    ],
    ids=["prometheus-2", "prometheus-3", "thanos", "mimir", "victoriametrics-1.79", "victoriametrics-later"],
)
def test_the_store_is_detected_from_its_buildinfo(data, headers, kind, version, name, metricsql, closed_lookback):
    responses.get(BUILDINFO, json={"status": "success", "data": data}, headers=headers)
    engine = engine_of(*live().buildinfo())
    assert (engine.kind, engine.version, str(engine)) == (kind, version, name)
    assert (engine.metricsql, engine.closed_lookback) == (metricsql, closed_lookback)


@responses.activate
def test_buildinfo_is_asked_with_the_bearer_token(monkeypatch):
    monkeypatch.setenv("PROM_TOKEN", "t0ken")
    responses.get(BUILDINFO, json={"status": "success", "data": {"version": "2.42.0", "goVersion": "go1.19.8"}})
    assert live(bearer_token_env="PROM_TOKEN").buildinfo()[0] == {"version": "2.42.0", "goVersion": "go1.19.8"}
    assert responses.calls[0].request.headers["Authorization"] == "Bearer t0ken"


@responses.activate
def test_a_store_without_buildinfo_is_unknown_and_asked_as_prometheus_2(caplog):
    responses.get(BUILDINFO, status=404, body="404 page not found")
    engine = engine_of(*live().buildinfo())
    assert str(engine) == "an unknown store (asked as Prometheus 2)"
    assert (engine.metricsql, engine.closed_lookback) == (False, True)
    assert "has no build information (HTTP 404: 404 page not found); querying it as Prometheus 2" in caplog.text


@responses.activate
def test_buildinfo_that_keeps_failing_is_one_sentence():
    """Not a guess: the queries' wording depends on which store it is."""
    responses.get(BUILDINFO, status=503, json={"status": "error", "error": "overloaded"})
    with pytest.raises(PrometheusError, match=f"^Prometheus of cluster jaguar at {URL} kept failing after retries"):
        live().buildinfo()


@pytest.mark.parametrize("status, body, headers", [
    (401, "<html><head><title>401 Authorization Required</title></head><body><center><h1>401 Authorization Required"
          "</h1></center><hr><center>nginx</center></body></html>", {"Content-Type": "text/html"}),
    (403, "<!DOCTYPE html>\n<html><body>Forbidden<script>x()</script></body></html>", {}),
])
@responses.activate
def test_a_refused_credential_names_the_keys_that_send_it_never_the_page(monkeypatch, status, body, headers):
    monkeypatch.setenv("PROM_TOKEN", "t0ken")
    responses.post(QUERY_URL, status=status, body=body, headers=headers)
    config = PrometheusConfig(url=URL, bearer_token_env="PROM_TOKEN", headers={"X-Scope-OrgID": "lab-a"})
    config._place = "clusters[2].prometheus"
    with pytest.raises(PrometheusError) as error:
        LivePrometheus("heron", config).instant("up", 0)
    shown = "HTTP 401: 401 Authorization Required" if status == 401 else "HTTP 403: Forbidden"
    assert str(error.value) == (
        f"Prometheus of cluster heron at {URL} refused access ({shown}): check the credentials this cluster sends "
        "(clusters[2].prometheus.bearer_token_env PROM_TOKEN; clusters[2].prometheus.headers X-Scope-OrgID)")


@responses.activate
def test_a_store_refusing_a_cluster_without_credentials_names_every_key_that_could_send_one():
    """Mimir's answer without a tenant is a short text: quoted, on one line."""
    responses.get(BUILDINFO, status=401, body="no org id\n", headers={"Content-Type": "text/plain"})
    with pytest.raises(PrometheusError) as error:
        live().buildinfo()
    assert str(error.value) == (
        f"Prometheus of cluster jaguar at {URL} refused access (HTTP 401: no org id): this cluster sends none; set "
        "bearer_token_env or _file, basic_auth_user and basic_auth_password_env or _file, headers (an API key, a "
        "tenant's X-Scope-OrgID), or cert_file and key_file")


@responses.activate
def test_a_404_says_the_url_misses_the_path_to_the_api():
    responses.post(QUERY_URL, status=404, body="404 page not found", headers={"Content-Type": "text/plain"})
    with pytest.raises(PrometheusError) as error:
        live().instant("up", 0)
    assert str(error.value) == (
        f"Prometheus of cluster jaguar at {URL} has no Prometheus API there (HTTP 404: 404 page not found): url "
        "must be the address /api/v1 follows, with any path prefix (Mimir's /prometheus, a proxy's or "
        "--web.route-prefix)")


def answer_ok(handler: http.server.BaseHTTPRequestHandler) -> None:
    """A test store's answer to any query: Prometheus' JSON for an empty success."""
    body = json.dumps(OK).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class RecordingStore:
    """A real HTTP server that redirects queries (307, which keeps the POST) to `then` where that is set, and answers
    every other request, keeping the headers of each."""

    def __init__(self):
        self.asked: list[dict[str, str]] = []
        self.then = ""
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                if store.then and self.path == "/api/v1/query":
                    self.send_response(307)
                    self.send_header("Location", store.then)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                store.asked.append(dict(self.headers))
                answer_ok(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.parametrize("elsewhere", [True, False])
def test_the_stores_own_headers_do_not_follow_a_redirect_to_another_host(tmp_path, elsewhere):
    """An API key in `headers` went on to whatever host the store redirected to, where requests drops the basic
    auth's Authorization header; on a redirect within the store both go on."""
    store, other = RecordingStore(), RecordingStore()
    store.then = f"http://localhost:{other.port}/api/v1/query" if elsewhere else "/moved/api/v1/query"
    (tmp_path / "password").write_text("s3cret")
    config = PrometheusConfig(url=f"http://127.0.0.1:{store.port}", headers={"X-Api-Key": "k3y"},
                              basic_auth_user="billing", basic_auth_password_file=str(tmp_path / "password"))
    assert LivePrometheus("jaguar", config).instant("up", 0) == OK["data"]["result"]
    [asked] = other.asked if elsewhere else store.asked
    credentials = {"x-api-key", "authorization"} & {name.lower() for name in asked}
    assert credentials == (set() if elsewhere else {"x-api-key", "authorization"})


def test_recorded_answers_name_the_store_they_were_recorded_from(tmp_path):
    assert str(engine_of(*ReplayPrometheus("jaguar", tmp_path).buildinfo())) == "Prometheus 2.42.0"


class SlowStore:
    """A real HTTP server answering every query after 50 ms, counting the queries it holds at once."""

    def __init__(self):
        self.now = self.most = 0
        self.lock = threading.Lock()
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                with store.lock:
                    store.now += 1
                    store.most = max(store.most, store.now)
                time.sleep(0.05)
                with store.lock:
                    store.now -= 1
                answer_ok(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.parametrize("limit", [1, 3])
def test_queries_in_flight_are_capped_per_store_across_sources(limit):
    """Two sources of one store (two days of a backfill) and eight threads: never more than the limit at once."""
    store = SlowStore()
    try:
        # the limit holds per store URL for the whole process, and an earlier test may have asked a server on
        # this port with another limit: a path of its own makes this store's URL new
        config = PrometheusConfig(url=f"{store.url}/{uuid.uuid4().hex}", max_queries_in_flight=limit)
        sources = [LivePrometheus("jaguar", config), LivePrometheus("jaguar", config)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda n: sources[n % 2].instant("up", n), range(16)))
        assert answers == [OK["data"]["result"]] * 16
        assert store.most == limit
    finally:
        store.server.shutdown()
