"""The bill on a store filled as a live Prometheus fills it: staleness markers where the scrape loop writes them,
and kube-state-metrics replaced, run as an HA pair (steady and rolled) or resharded, loaded by remote write into
a real Prometheus 2.42 and a real VictoriaMetrics (docs/spec.md "Live stores: staleness and exporter restarts").

Before the copies of a pod were merged at each instant, the day with kube-state-metrics replaced at 09:00 was
billed 4.9% short on CPU (Prometheus; 4.3% on VictoriaMetrics), and the self-audit read raw samples, which skip
staleness markers, so it could not agree with a right bill."""

from __future__ import annotations

from dataclasses import replace

import pytest

from billing.collect.audit import audit_cluster
from billing.collect.capacity import collect_allocatable
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.stores import store_of
from billing.collect.usage import collect_cluster
from fixtures.ksm import Exporter, replaced_exporter
from fixtures.reference import reference_allocatable, reference_usage
from tests.helpers.prometheus_worlds import STORES, UTC_DAY, assert_matches, cluster, world_of

NINE = UTC_DAY.start.timestamp() + 9 * 3600
SCENARIOS = {
    "one-exporter": (Exporter(),),
    "replaced": replaced_exporter(NINE),
    "ha-pair": (Exporter("10.244.1.17:8080"), Exporter("10.244.2.9:8080", pod="kube-state-metrics-6f9c7d5b8-m4tlr")),
    "ha-pair-rolled": (Exporter("10.244.1.17:8080", end=NINE), Exporter("10.244.3.42:8080", start=NINE),
                       Exporter("10.244.2.9:8080", end=NINE + 180), Exporter("10.244.4.5:8080", start=NINE + 180)),
    "resharded": (Exporter("10.244.1.17:8080", end=NINE + 120),
                  Exporter("10.244.3.42:8080", start=NINE, shard=0, shards=2),
                  Exporter("10.244.3.43:8080", start=NINE, shard=1, shards=2)),
}
GAP = (UTC_DAY.start.timestamp() + 15 * 3600, UTC_DAY.start.timestamp() + 15 * 3600 + 600)  # scrapes failed


@pytest.fixture(scope="module")
def live_world():
    """120 pods whose series end at staleness markers (pods deleted while Running among them), with 10 minutes
    of failed scrapes at 15:00; kube-scheduler's figures are scraped too (a copy per exporter), and they differ
    from kube-state-metrics' where a pod declares an init container before its sidecar."""
    world = world_of(UTC_DAY, pods=120, clusters=("jaguar",))
    return replace(world, clusters=tuple(replace(c, scheduler=True) for c in world.clusters), staleness=True,
                   gaps=(GAP,))


# each scenario on both stores one after the other: the world they are sent is encoded once (remote_write.py)
@pytest.mark.parametrize("live_store", STORES, indirect=True)
@pytest.mark.parametrize("exporters", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_bill_capacity_and_audit_follow_markers_and_count_a_pod_once(live_store, live_world, exporters):
    world = replace(live_world, exporters=exporters)
    store_server = live_store(world)
    config = cluster("jaguar", store_server.url)
    source = LivePrometheus("jaguar", config.prometheus)
    context = cluster_day(config, UTC_DAY, 60, ["nvidia_com_gpu"], source)
    start, end = UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp()

    usage = collect_cluster(context)
    got = usage.usage.groupby(["namespace", "resource", "gpu_model"])["quantity"].sum().to_dict()
    assert_matches(got, reference_usage(world, "jaguar", start, end, 60))
    assert usage.copies is (len(exporters) > 1)

    allocatable = collect_allocatable(context)
    expected = {key: hours for key, hours in reference_allocatable(world, "jaguar", start, end, 60).items() if hours}
    assert allocatable.set_index(["resource", "gpu_model"])["allocatable"].to_dict() == pytest.approx(expected, rel=1e-9)

    audit = audit_cluster(context, usage.running, usage.exact, 40)
    assert audit.pods >= 40


def test_a_pod_deleted_while_running_ends_at_its_marker(live_store, live_world):
    """Without the marker an instant query would see the pod's last sample for five more minutes."""
    deleted = [pod for pod in live_world.clusters[0].pods
               if UTC_DAY.start.timestamp() < pod.deleted < UTC_DAY.end.timestamp() and pod.phases[-1][1] == "Running"]
    assert deleted  # the world has them
    store_server = live_store(live_world)
    config = cluster("jaguar", store_server.url)
    source = LivePrometheus("jaguar", config.prometheus)
    pod = deleted[0]
    last = max(t for t in range(int(pod.created), int(pod.deleted)) if t % 60 == 0)  # its last scrape
    store = store_of(source, config, UTC_DAY)
    running = store.engine.latest(f'kube_pod_status_phase{{uid="{pod.uid}", phase="Running"}}')
    assert source.instant(running, last)
    assert not source.instant(running, last + 60)  # the marker, one scrape later
