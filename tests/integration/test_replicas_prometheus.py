"""HA Prometheus pairs: every series twice, with different replica labels, never doubles a pod.

Thanos Query deduplicates replicas with `dedup=true`; Prometheus federation,
a remote-write store without deduplication or Thanos without
`--query.replica-label` leave both copies in the answer. The queries' `max
by` aggregations then must keep one: loaded into a real Prometheus, the
doubled world bills exactly what the reference computes on one copy.
"""

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

from billing.collect.capacity import collect_allocatable
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_allocatable, reference_usage
from tests.helpers.prometheus_worlds import assert_matches, cluster, collected

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def test_replicas_of_every_series_are_billed_once(prometheus_server):
    world = make_world(11, DAY.start.timestamp(), pods=120, clusters=("jaguar",), day_seconds=DAY.seconds)
    [jaguar] = world.clusters
    replicas = tuple(replace(jaguar, extra_labels={**jaguar.extra_labels, "prometheus_replica": name})
                     for name in ("prometheus-0", "prometheus-1"))
    prom = prometheus_server(replace(world, clusters=replicas))
    config = cluster("jaguar", prom.url)
    start, end = DAY.start.timestamp(), DAY.end.timestamp()

    assert_matches(collected(config, DAY), reference_usage(world, "jaguar", start, end, 60))
    source = LivePrometheus("jaguar", config.prometheus)
    allocatable = collect_allocatable(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source))
    got = allocatable.groupby(["resource", "gpu_model"])["allocatable"].sum().to_dict()
    assert_matches(got, reference_allocatable(world, "jaguar", start, end, 60))
    # both copies are really there
    copies = source.instant('count by (prometheus_replica) (kube_pod_info{cluster="jaguar"})', DAY.start.timestamp() + 43200)
    assert sorted(s["metric"]["prometheus_replica"] for s in copies) == ["prometheus-0", "prometheus-1"]

