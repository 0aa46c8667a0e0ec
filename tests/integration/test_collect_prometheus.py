"""Collection against a real Prometheus and a real VictoriaMetrics, checked against fixtures.reference.

The reference evaluates docs/spec.md's arithmetic sample by sample on the same
generated series; the collection must agree to 1e-9 relative, through both
its fast (factored) query and its exact per-instant query.
"""

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.promql import uid_matcher
from billing.collect.stores import FamilyLabels, store_of
from billing.collect.usage import collect_cluster
from billing.config import LabelNames, PrometheusConfig
from billing.days import billing_day
from fixtures.ksm import make_world, write_openmetrics
from fixtures.reference import instant_query, reference_usage
from fixtures.servers import load_openmetrics, start_prometheus, start_victoria_metrics
from tests.helpers.prometheus_worlds import UTC_DAY, assert_matches, cluster, collected, world, world_of  # noqa: F401 (pytest fixtures)

BERLIN_AUTUMN = billing_day(date(2026, 10, 25), ZoneInfo("Europe/Berlin"))  # 25 hours


def test_two_clusters_in_one_prometheus_match_the_reference(store_server, world):
    prom = store_server(world)
    for name in ("jaguar", "ibis"):
        expected = reference_usage(world, name, UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 60)
        got = collected(cluster(name, prom.url), UTC_DAY)
        assert_matches(got, expected)
        # the world has what the fast query cannot factor: both paths are exercised
        assert any(k[1] == "gpu" and k[2] == "" for k in expected)  # a GPU node without the label
        by_class = reference_usage(world, name, UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 60,
                                   by_priority_class=True)
        assert {k[3] for k in by_class} == {"", "batch-low", "interactive"}
        assert_matches(collected(cluster(name, prom.url), UTC_DAY, by_priority_class=True), by_class)


def test_the_world_covers_the_edge_cases(world):
    jaguar = next(c for c in world.clusters if c.name == "jaguar")
    start, end = UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp()
    assert any(p.created < start < p.deleted for p in jaguar.pods)  # crossing midnight
    assert any(any(c.resizes for c in p.containers) for p in jaguar.pods)  # in-place resize
    assert any(len(n.labels) > 1 for n in jaguar.nodes)  # a node relabelled during the day
    assert any(len(p.containers) > 1 for p in jaguar.pods)  # multi-container / init containers
    phases = {phase for p in jaguar.pods for _, phase in p.phases}
    assert {"Pending", "Running", "Succeeded", "Failed"} <= phases
    assert end - start == 86400


def test_answers_are_asked_for_uncompressed_unless_the_headers_say_gzip(store_server, world):
    """A store compresses its answers for a client that accepts gzip, as requests does unless told otherwise: CPU
    the store spends on every answer of a night (docs/performance.md "The cost of a night"). Billing asks for them
    uncompressed; a store across a slow link can be asked for gzip through the configured headers."""
    prom = store_server(world)
    assert "Content-Encoding" not in LivePrometheus("jaguar", PrometheusConfig(url=prom.url)).buildinfo()[1]
    gzipped = LivePrometheus("jaguar", PrometheusConfig(url=prom.url, headers={"Accept-Encoding": "gzip"}))
    assert gzipped.buildinfo()[1].get("Content-Encoding") == "gzip"


def test_a_busy_cluster_is_asked_in_hour_long_chunks_and_bills_the_same(store_server, world, caplog):
    """The store tells how many pods kube-state-metrics listed at once (its `phase="Running"` series at each whole
    hour, the reference's count). Where that many would make a 6-hour chunk's query hold too many samples, the day
    is asked in whole hours instead: the same bill."""
    prom = store_server(world)
    config = cluster("jaguar", prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    store = store_of(source, config, UTC_DAY)
    start, end = int(UTC_DAY.start.timestamp()), int(UTC_DAY.end.timestamp())
    listed = [len(instant_query(world, "kube_pod_status_phase", t, phase="Running", cluster="jaguar"))
              for t in range(start, end + 1, 3600)]
    assert store.busiest == max(listed) > min(listed) > 0
    busy = replace(store, busiest=10_000_000)  # 10 M pods at 60 instants an hour: one hour at a time at most
    with caplog.at_level("INFO", logger="billing.collect.usage"):
        usage = collect_cluster(cluster_day(config, UTC_DAY, 60, ["nvidia_com_gpu"], source, busy))
    assert "cluster jaguar: up to 10000000 pods listed at once: asked in 1-hour chunks" in caplog.text
    got = usage.usage.groupby(["namespace", "resource", "gpu_model"])["quantity"].sum().to_dict()
    assert_matches(got, reference_usage(world, "jaguar", start, end, 60))
    assert usage.queries > 24 * 4  # at least four queries per chunk


def test_a_25_hour_dst_day_in_berlin(store_server):
    world = world_of(BERLIN_AUTUMN, pods=120, clusters=("jaguar",))
    prom = store_server(world)
    expected = reference_usage(world, "jaguar", BERLIN_AUTUMN.start.timestamp(), BERLIN_AUTUMN.end.timestamp(), 60)
    assert_matches(collected(cluster("jaguar", prom.url), BERLIN_AUTUMN), expected)


def test_a_coarser_step(store_server, world):
    prom = store_server(world)
    expected = reference_usage(world, "ibis", UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 300)
    assert_matches(collected(cluster("ibis", prom.url), UTC_DAY, step=300), expected)


def test_a_day_without_data_is_zero_not_an_error(store_server, world):
    prom = store_server(world)
    empty_day = billing_day(date(2026, 11, 10), ZoneInfo("UTC"))
    assert collected(cluster("jaguar", prom.url), empty_day) == {}


def test_a_selector_matching_nothing_bills_nothing(store_server, world):
    prom = store_server(world)
    config = cluster("jaguar", prom.url).model_copy(
        update={"prometheus": PrometheusConfig(url=prom.url, selector='cluster="nope"', retries=0)})
    assert collected(config, UTC_DAY) == {}


@pytest.mark.parametrize("start_store", [start_prometheus, start_victoria_metrics])
def test_running_values_other_than_1_do_not_count(tmp_path, start_store):
    """docs/spec.md counts a pod only where its Running series is 1. A series that says 2 for six hours
    and -1 for the next six (not kube-state-metrics, but possible) must bill neither, although the
    fast query sums the series: such pods go down the exact path."""
    six, noon, eighteen = (UTC_DAY.start.timestamp() + h * 3600 for h in (6, 12, 18))
    world = world_of(UTC_DAY, pods=120, clusters=("jaguar",))
    jaguar = world.clusters[0]
    index, pod = next((i, p) for i, p in enumerate(jaguar.pods) if p.created < UTC_DAY.start.timestamp()
                      and p.deleted > UTC_DAY.end.timestamp() and p.phases[-1][1] == "Running")
    # The reference's view: not Running from 06:00 to 18:00 (Unknown instead) ...
    odd = replace(pod, phases=(*pod.phases, (six, "Unknown"), (eighteen, "Running")))
    world = replace(world, clusters=(replace(jaguar, pods=(*jaguar.pods[:index], odd, *jaguar.pods[index + 1:])),))
    # ... and Prometheus' view: the Running series is 2, then -1, where the reference sees 0.
    paths = write_openmetrics(world, tmp_path / "openmetrics")
    prefix = "kube_pod_status_phase{"
    for path in paths:
        lines = path.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith(prefix) and f'uid="{pod.uid}"' in line and 'phase="Running"' in line:
                labels, value, ts = line.rsplit(" ", 2)
                if six <= float(ts) < eighteen:
                    lines[i] = f"{labels} {2 if float(ts) < noon else -1} {ts}"
        path.write_text("".join(lines))
    load_openmetrics(paths, tmp_path / "tsdb")
    server = start_store(tmp_path / "tsdb", tmp_path / "store")
    try:
        expected = reference_usage(world, "jaguar", UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 60)
        assert_matches(collected(cluster("jaguar", server.url), UTC_DAY), expected)
    finally:
        server.stop()


def resized_at(world, at: float):
    """The world with the main container of every pod alive at `at` (unix time) resized in place then."""
    def resized(pod):
        if not pod.created < at < pod.deleted:
            return pod
        main = next(i for i, c in enumerate(pod.containers) if not c.init)
        container = pod.containers[main]
        change = replace(container, resizes=((at, container.cpu * 2, container.memory, container.gpu),))
        return replace(pod, containers=(*pod.containers[:main], change, *pod.containers[main + 1:]))
    return replace(world, clusters=tuple(replace(c, pods=tuple(map(resized, c.pods))) for c in world.clusters))


def test_a_day_of_many_resized_pods_stays_within_every_store_s_query_length(store_server):
    """Hundreds of pods resized in one chunk: naming them in one query would be longer than
    VictoriaMetrics' 16 KB -search.maxQueryLen (it refused such a day before). The bill is the same."""
    at = UTC_DAY.start.timestamp() + 15 * 3600
    world = resized_at(make_world(11, UTC_DAY.start.timestamp(), pods=1200, clusters=("jaguar",)), at)
    resized = [p.uid for p in world.clusters[0].pods if p.created < at < p.deleted]
    assert len(uid_matcher(frozenset(resized))) * 3 > 16384  # the list, as often as the queries name it
    prom = store_server(world)
    expected = reference_usage(world, "jaguar", UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 60)
    assert_matches(collected(cluster("jaguar", prom.url), UTC_DAY), expected)


def test_a_scrape_without_honor_labels_bills_the_same(store_server, world, caplog):
    """Scraped with honor_labels: false, kube-state-metrics' namespace, pod, container and node arrive
    as exported_*, and the plain names hold the exporter pod's own (namespace "monitoring"). The bill
    must not land on "monitoring": it is the reference's of the same world scraped plainly."""
    prom = store_server(replace(world, honor_labels=False))
    config = cluster("jaguar", prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    with caplog.at_level("INFO", logger="billing.collect.stores"):
        store = store_of(source, config, UTC_DAY)
    assert store.labels.kube_state_metrics == FamilyLabels("exported_namespace", "exported_pod", "exported_container",
                                                           "exported_node")
    assert store.labels.dcgm == store.labels.cadvisor == FamilyLabels()  # the world has neither
    [engine, *renames] = [r.getMessage() for r in caplog.records]
    assert engine in ("cluster jaguar: the store is VictoriaMetrics", "cluster jaguar: the store is Prometheus 2.42.0+ds")
    assert renames == [
        "cluster jaguar: kube-state-metrics labels read from exported_namespace, exported_pod, exported_container, "
        "exported_node (a scrape with honor_labels: false renamed them)"]
    for name in ("jaguar", "ibis"):
        expected = reference_usage(world, name, UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(), 60)
        assert_matches(collected(cluster(name, prom.url), UTC_DAY), expected)


def test_label_names_in_the_config_override_the_detection(store_server, world):
    """Told that the labels are plain, billing believes it: the exporter's own namespace gets the bill."""
    prom = store_server(replace(world, honor_labels=False))
    config = cluster("jaguar", prom.url).model_copy(update={"label_names": LabelNames()})
    got = collected(config, UTC_DAY)
    assert {namespace for namespace, _, _ in got} == {"monitoring"}
