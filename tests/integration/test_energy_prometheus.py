"""Energy collected from a real Prometheus (docs/spec.md "Energy and carbon"): the spec's worked example as a world of
dcgm-exporter's and Kepler's counters (a GPU moving between pods within the day and reset mid-day, a time-sliced GPU
shared by two namespaces then held by none, Kepler's pods and node on one node, a node without Kepler), its kWh
worked out by hand below and by the reference (fixtures/reference.py, from the world's model of watts), and the
collector's figures held to both.

The world's blocks are written by promtool, so no staleness markers: a GPU's series of the pod that held it stay
visible for the 5-minute lookback after it moved, and the GPU's steps then split between the old pod and the new.
"""

from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.context import cluster_day
from billing.collect.energy import collect_energy
from billing.collect.prometheus import LivePrometheus
from billing.days import billing_day
from fixtures.energy import Energy, Gpu, KeplerNode, KeplerPod, Meter
from fixtures.ksm import Cluster, Container, Node, Pod, World
from fixtures.reference import reference_energy
from tests.helpers.prometheus_worlds import cluster

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
BEFORE, AFTER = D - 3600, D + 25 * 3600
KWH = 3.6e6  # joules


def at(hour: float) -> float:
    return D + hour * 3600


ENERGY = Energy(
    gpus=(
        # 300 W all day; vision/train-1 holds it until 10:00, then nlp/bert-2; reset at 13:59:30
        Gpu("GPU-a-0", "n1", Meter(((BEFORE, 300.0),), resets=(at(13) + 59 * 60 + 30,), since=5e6),
            ((BEFORE, (("vision", "train-1"),)), (at(10), (("nlp", "bert-2"),)))),
        # time-sliced: vision/viz-3 and speech/asr-1 at 200 W until noon, then held by none at 60 W
        Gpu("GPU-b-1", "n1", Meter(((BEFORE, 200.0), (at(12), 60.0))),
            ((BEFORE, (("vision", "viz-3"), ("speech", "asr-1"))), (at(12), ()))),
    ),
    pods=(KeplerPod("vision", "train-1", "n1", Meter(((BEFORE, 40.0),), end=at(10))),
          KeplerPod("nlp", "bert-2", "n1", Meter(((at(10), 40.0),), start=at(10)))),
    nodes=(KeplerNode("n1", Meter(((BEFORE, 150.0),))),),  # n2 runs no Kepler
)


def pod(namespace: str, name: str, node: str, start: float, end: float, gpus: float) -> Pod:
    return Pod(namespace, name, f"uid-{name}", node, start, ((start, "Running"),), end,
               (Container("main", 1.0, 2**30, gpus),))


PODS = (pod("vision", "train-1", "n1", BEFORE, at(10), 1), pod("nlp", "bert-2", "n1", at(10), AFTER, 1),
        pod("vision", "viz-3", "n1", BEFORE, at(12), 1), pod("speech", "asr-1", "n1", BEFORE, at(12), 1),
        pod("speech", "cpu-only", "n2", BEFORE, AFTER, 0))
NODES = tuple(Node(name, ((BEFORE, {}),), {"cpu": 64.0, "memory": 512.0 * 2**30, "nvidia_com_gpu": 2.0})
              for name in ("n1", "n2"))
WORLD = World((Cluster("lynx", NODES, PODS, {"cluster": "lynx"}, energy=ENERGY),), BEFORE, AFTER)

# By hand, in joules. GPU-a: 18,000 J a step; vision's steps end 00:00-09:59 (600), and 10:00-10:04 (its series'
# lookback) are split with nlp; nlp's the rest (835), less the 30 s before the reset (9,000 J)
GPU_A_VISION = 600 * 18_000 + 5 * 9_000
GPU_A_NLP = 835 * 18_000 + 5 * 9_000 - 9_000
# GPU-b: 12,000 J a step to 11:59, halved; the step ending 12:00 (still 200 W) and 12:01-12:04 (3,600 J) in thirds
# (the two pods' series in their lookback, the unlabelled one); the rest, 715 steps at 60 W, no pod's
GPU_B_EACH = 720 * 6_000 + 12_000 / 3 + 4 * 3_600 / 3
GPU_B_NONE = 12_000 / 3 + 4 * 3_600 / 3 + 715 * 3_600
# Kepler: train-1's steps end 00:00-09:59 (600 at 40 W); bert-2's from 10:01 (its first sample at 10:00 has no step
# before it) to 23:59 (839); n1 150 W all day; what n1's pods did not account for is unattributed
TRAIN, BERT, N1 = 600 * 2_400, 839 * 2_400, 1440 * 9_000
BY_HAND = {"vision": ((GPU_A_VISION + GPU_B_EACH) / KWH, TRAIN / KWH), "nlp": (GPU_A_NLP / KWH, BERT / KWH),
           "speech": (GPU_B_EACH / KWH, 0.0), "": (GPU_B_NONE / KWH, (N1 - TRAIN - BERT) / KWH)}


def figures(energy) -> dict:
    return {row.namespace: (row.gpu_kwh, row.cpu_kwh) for row in energy.itertuples()}


def assert_close(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for namespace, kwh in expected.items():
        assert got[namespace] == pytest.approx(kwh, rel=1e-9, abs=1e-12), namespace


def test_the_reference_gives_the_figures_worked_out_by_hand():
    assert_close(reference_energy(WORLD, "lynx", D, DAY.end.timestamp(), 60), BY_HAND)


def test_collected_energy_on_prometheus_is_the_reference(prometheus_server):
    server = prometheus_server(WORLD)
    config = cluster("lynx", server.url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    collected = collect_energy(context)
    assert_close(figures(collected.energy), reference_energy(WORLD, "lynx", D, DAY.end.timestamp(), 60))
    assert collected.nodes == {"n1"}
    assert context.asked == 1 + 1 + len(context.chunks())  # buildinfo, the store's labels, one query per chunk
