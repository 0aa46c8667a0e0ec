"""The benchmark's factored floor asks a real Prometheus for what billing bills: per namespace and resource,
the reference's resource-hours (but for in-place resizes, which the floor ignores)."""

import pytest

from bench.collect_bench import CLUSTER, GPU_RESOURCES, PERIOD, STEP, floor_run, world_of
from fixtures.reference import reference_usage

GIB = 2**30


@pytest.mark.integration
def test_the_factored_floor_adds_up_to_the_reference(prometheus_server):
    world = world_of(300, energy=True)  # the read budget's world (test_read_budget.py): loaded once per session
    server = prometheus_server(world)
    figures, asked, hours = floor_run(server)
    assert figures.queries == len(asked) == 4 and figures.peak_samples > 0 and figures.prometheus_cpu > 0
    reference: dict[tuple[str, str], float] = {}
    for (namespace, resource, _), quantity in reference_usage(world, CLUSTER, PERIOD.start.timestamp(),
                                                              PERIOD.end.timestamp(), STEP, GPU_RESOURCES).items():
        key = (namespace, "nvidia_com_gpu" if resource == "gpu" else resource)
        reference[key] = reference.get(key, 0.0) + quantity * (GIB if resource == "memory" else 1.0)
    resized = {p.namespace for p in world.clusters[0].pods for c in p.containers if c.resizes}
    compared = {key for key in reference if key[0] not in resized}
    assert len(compared) > 10  # nearly every namespace: resized pods are rare
    assert {key for key in hours if key[0] not in resized} == compared
    for key in compared:
        assert hours[key] == pytest.approx(reference[key], rel=1e-9), key
