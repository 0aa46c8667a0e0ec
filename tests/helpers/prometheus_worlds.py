"""Generated kube-state-metrics worlds loaded into a real store, collected, and compared with the reference."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import make_world

STORES = ("prometheus", "victoria-metrics")  # the two stores every test of the bill against the reference runs on
UTC_DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


PRICES = {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0}


def world_of(day, pods: int, clusters=("jaguar", "ibis")):
    """A random world plus, for certain, one in-place resize of a GPU pod at 13:07."""
    world = make_world(7, day.start.timestamp(), pods=pods, clusters=clusters, day_seconds=day.seconds)
    first = world.clusters[0]
    resize_at = day.start.timestamp() + 13 * 3600 + 7 * 60
    index, pod = next((i, p) for i, p in enumerate(first.pods)
                      if p.created < resize_at < p.deleted and any(c.gpu for c in p.containers))
    main = pod.containers[0]
    resized = replace(pod, containers=(replace(main, resizes=((resize_at, main.cpu * 3, main.memory / 2, main.gpu),)),
                                       *pod.containers[1:]))
    pods = first.pods[:index] + (resized,) + first.pods[index + 1:]
    return replace(world, clusters=(replace(first, pods=pods), *world.clusters[1:]))


def cluster(name: str, url: str) -> ClusterConfig:
    return ClusterConfig(name=name, prometheus={"url": url, "selector": f'cluster="{name}"', "retries": 0},
                         prices=PRICES)


def collected(config: ClusterConfig, day, step: int = 60, by_priority_class: bool = False) -> dict:
    source = LivePrometheus(config.name, config.prometheus)
    usage = collect_cluster(cluster_day(config, day, step, ["nvidia_com_gpu"], source)).usage
    keys = ["namespace", "resource", "gpu_model"] + (["priority_class"] if by_priority_class else [])
    return usage.groupby(keys)["quantity"].sum().to_dict()


def assert_matches(got: dict, expected: dict) -> None:
    expected = {k: v for k, v in expected.items() if v != 0}
    assert sorted(got) == sorted(expected)
    for key, quantity in expected.items():
        assert got[key] == pytest.approx(quantity, rel=1e-9), key


@pytest.fixture(scope="module")
def world():
    return world_of(UTC_DAY, pods=300)
