"""The integration fixtures themselves, against the real servers."""

import smtplib
import ssl
from dataclasses import replace
from datetime import datetime
from email.message import EmailMessage
from zoneinfo import ZoneInfo

import pytest
import requests

from fixtures.ksm import Node, make_world, scrape_times, series
from fixtures.reference import instant_query, reference_usage
from fixtures.remote_write import sample_count
from tests.helpers.directories import LDIF

DAY = datetime(2026, 11, 20, tzinfo=ZoneInfo("UTC")).timestamp()
HOURS = 4  # a short "day" keeps loading fast
GAP = (DAY + 3600, DAY + 3600 + 900)  # kube-state-metrics not scraped for 15 minutes
ODD_VALUE = 'a "quoted" \\ back\nslash'


def small_world():
    world = make_world(11, DAY, pods=40, nodes=4, day_seconds=HOURS * 3600, margin=1800, gaps=(GAP,))
    cluster = world.clusters[0]
    odd = Node("node-odd", ((DAY - 86400, {"label_note": ODD_VALUE}),), {"cpu": 2})
    return replace(world, clusters=(replace(cluster, nodes=cluster.nodes + (odd,)),))


WORLD = small_world()


def query(url: str, promql: str, t: float) -> list[dict]:
    response = requests.post(f"{url}/api/v1/query", data={"query": promql, "time": t}, timeout=30)
    response.raise_for_status()
    return response.json()["data"]["result"]


def by_labels(result: list[dict]) -> dict[frozenset, float]:
    return {frozenset((k, v) for k, v in r["metric"].items() if k != "__name__"): float(r["value"][1])
            for r in result}


def a_deleted_pod() -> tuple[str, float]:
    """uid and last scrape time of a pod deleted during the day (visible 300 s longer)."""
    pod = next(p for p in WORLD.clusters[0].pods if DAY + 1800 < p.deleted < DAY + HOURS * 3600 and p.created < DAY)
    return pod.uid, max(t for t in scrape_times(WORLD) if t < pod.deleted)


DELETED_UID, DELETED_LAST = a_deleted_pod()
INSTANTS = [DAY, DAY + 1800 + 30, GAP[0] + 240, GAP[0] + 600, DELETED_LAST + 300]


def test_prometheus_instant_queries_match_the_latest_sample_lookup(prometheus_server):
    prom = prometheus_server(WORLD)
    for t in INSTANTS:
        expected = {frozenset(labels.items()): value for labels, value in instant_query(WORLD, "kube_pod_status_phase", t)}
        assert by_labels(query(prom.url, "kube_pod_status_phase", t)) == expected, t
        requests_cpu = [v for _, v in instant_query(WORLD, "kube_pod_container_resource_requests", t, resource="cpu")]
        got = query(prom.url, 'sum(kube_pod_container_resource_requests{resource="cpu"})', t)
        if requests_cpu:
            assert float(got[0]["value"][1]) == pytest.approx(sum(requests_cpu)), t
        else:  # inside the gap, past the lookback: nothing at all
            assert got == [], t
    # Prometheus 2.42 still returns a sample exactly lookback (300 s) old, and no older.
    assert query(prom.url, f'kube_pod_info{{uid="{DELETED_UID}"}}', DELETED_LAST + 300)
    assert not query(prom.url, f'kube_pod_info{{uid="{DELETED_UID}"}}', DELETED_LAST + 300.001)
    # The oddest label value survives escaping, promtool and Prometheus.
    [odd] = query(prom.url, 'kube_node_labels{node="node-odd"}', DAY)
    assert odd["metric"]["label_note"] == ODD_VALUE and odd["metric"]["cluster"] == "jaguar"


def test_victoria_metrics_holds_the_same_samples_but_needs_its_lookback_said(victoria_metrics_server):
    """The blocks a Prometheus serves, loaded by vmctl: the same samples. A bare selector misses a pod
    that stopped a few minutes ago (MetricsQL's own lookback); last_over_time over 300,001 ms (its
    windows are open at the older end) is Prometheus 2's closed 5-minute lookback."""
    store = victoria_metrics_server(WORLD)
    assert requests.get(f"{store.url}/api/v1/status/buildinfo", timeout=30).json()["data"] == {}  # no version
    explicit = "last_over_time(kube_pod_status_phase[300001ms])"
    for t in INSTANTS:
        expected = {frozenset(labels.items()): value for labels, value in instant_query(WORLD, "kube_pod_status_phase", t)}
        assert by_labels(query(store.url, explicit, t)) == expected, t
    deleted = f'kube_pod_info{{uid="{DELETED_UID}"}}'
    assert not query(store.url, deleted, DELETED_LAST + 300)  # the defect: gone before 5 minutes are over
    assert query(store.url, f"last_over_time({deleted}[300001ms])", DELETED_LAST + 300)
    assert not query(store.url, f"last_over_time({deleted}[300001ms])", DELETED_LAST + 300.001)


def test_prometheus_agrees_with_the_reference_over_the_day(prometheus_server):
    prom = prometheus_server(WORLD)
    expected = reference_usage(WORLD, "jaguar", DAY, DAY + HOURS * 3600, 60, requests="containers")  # as asked below
    for resource, scale in (("cpu", 1), ("memory", 2**-30)):
        promql = (f'sum by (namespace) (sum by (namespace, pod, uid) (kube_pod_container_resource_requests'
                  f'{{resource="{resource}"}}) * on (namespace, pod, uid) (kube_pod_status_phase{{phase="Running"}} == 1))')
        response = requests.post(f"{prom.url}/api/v1/query_range", timeout=30, data={
            "query": promql, "start": DAY, "end": DAY + HOURS * 3600 - 60, "step": 60})
        response.raise_for_status()
        got = {r["metric"]["namespace"]: sum(float(v) for _, v in r["values"]) * scale / 60
               for r in response.json()["data"]["result"]}
        want = {ns: q for (ns, r, _), q in expected.items() if r == resource}
        assert len(want) > 3 and got == pytest.approx(want, rel=1e-9)


def test_a_live_store_that_took_the_world_answers_its_sample_count(live_store):
    """The count VictoriaMetrics' flush waits for (a wait that never ends, or one that ends early, is a failed test
    or a flaky one): Prometheus takes remote write into its head at once, so its answer tests the count itself;
    VictoriaMetrics' answers it once the wait is over. Staleness markers are sent but not counted."""
    world = replace(WORLD, staleness=True)
    at, counts = sample_count(world)
    sent = sum(len(samples) for _, _, samples in series(world))
    assert 0 < sum(counts.values()) < sent  # the world's gap and ends put markers among the samples
    url = live_store(world).url
    assert {promql: float(query(url, promql, at)[0]["value"][1]) for promql in counts} == counts


def test_several_prometheus_servers_and_one_dies_half_way(prometheus_server):
    other_world = make_world(12, DAY, pods=5, nodes=4, day_seconds=3600, margin=600)
    first, second = prometheus_server(WORLD), prometheus_server(other_world)
    assert first.pid != second.pid and first.url != second.url
    count = "count(count by (uid) (kube_pod_info))"
    assert float(query(second.url, count, DAY + 1800)[0]["value"][1]) == len(
        {labels["uid"] for labels, _ in instant_query(other_world, "kube_pod_info", DAY + 1800)})
    first.kill()
    with pytest.raises(requests.ConnectionError):
        query(first.url, count, DAY)
    assert query(second.url, count, DAY + 1800)


def test_slapd_answers_searches_over_ldap_and_ldaps(slapd_server, test_ca):
    import ldap3

    server = slapd_server(LDIF, tls=test_ca)
    with ldap3.Connection(server.url, "cn=admin,dc=example,dc=org", "secret", auto_bind=True) as conn:
        conn.search("ou=people,dc=example,dc=org", "(objectClass=inetOrgPerson)", attributes=["uid", "mail"])
        assert sorted(e.uid.value for e in conn.entries) == ["alice", "bob", "carol"]
    tls = ldap3.Tls(ca_certs_file=str(test_ca.ca_cert), validate=ssl.CERT_REQUIRED)
    with ldap3.Connection(ldap3.Server(server.ldaps_url, tls=tls), auto_bind=True) as conn:
        conn.search("ou=teams,dc=example,dc=org", "(cn=robotics)", attributes=["member", "owner"])
        assert len(conn.entries[0].member.values) == 2


def test_slapd_sizelimit_needs_paged_search(slapd_server):
    import ldap3

    server = slapd_server(LDIF, sizelimit=2)
    with ldap3.Connection(server.url, auto_bind=True) as conn:  # anonymous: the rootdn has no limits
        conn.search("ou=people,dc=example,dc=org", "(uid=*)")
        assert conn.result["description"] == "sizeLimitExceeded"
        found = list(conn.extend.standard.paged_search("ou=people,dc=example,dc=org", "(uid=*)", paged_size=2,
                                                       generator=True))
        assert len([e for e in found if e["type"] == "searchResEntry"]) == 3


def test_postgres_accepts_queries_in_a_fresh_database(postgres_url):
    import sqlalchemy

    engine = sqlalchemy.create_engine(postgres_url)
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("select 1")).scalar() == 1
        assert conn.execute(sqlalchemy.text("select count(*) from pg_tables where schemaname = 'public'")).scalar() == 0
    engine.dispose()


def message(to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "billing@example.org", to, "Daily cost"
    msg.set_content("You spent 12.34 USD.")
    return msg


def test_smtp_receives_a_plain_message(smtp_server):
    server = smtp_server()
    with smtplib.SMTP(server.host, server.port, timeout=10) as client:
        client.send_message(message("alice@example.org"))
    [got] = server.messages
    assert (got.mail_from, got.rcpt_tos, got.login, got.tls) == (
        "billing@example.org", ["alice@example.org"], None, False)
    assert b"You spent 12.34 USD." in got.data


def test_smtp_starttls_and_auth(smtp_server, test_ca):
    server = smtp_server(tls=test_ca, auth=("billing", "s3cret"), auth_required=True)
    with smtplib.SMTP(server.host, server.port, timeout=10) as client:
        client.starttls(context=test_ca.client_context())
        with pytest.raises(smtplib.SMTPAuthenticationError):
            client.login("billing", "wrong")
        client.login("billing", "s3cret")
        client.send_message(message("bob@example.org"))
    [got] = server.messages
    assert (got.login, got.tls, got.rcpt_tos) == ("billing", True, ["bob@example.org"])
