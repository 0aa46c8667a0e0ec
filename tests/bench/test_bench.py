"""bench.collect_bench: the series its worlds have, as real exporters label them, and its own arithmetic."""

import gzip
from collections import Counter

import pytest

from bench.cli_start import seconds_importing
from bench.collect_bench import PERIOD, busy_seconds, floor_query, peak_samples, run_measured, world_of
from bench.query_costs import Noting
from billing.collect.chunks import chunks
from billing.collect.context import cluster_day
from billing.collect.stores import DEFAULT_STORE
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from fixtures.ksm import PAUSE_CORES, PAUSE_IMAGE, series

DCGM_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}
POD_LABELS = {"namespace", "pod", "container"}
CADVISOR_LABELS = {"namespace", "pod", "container", "node", "cpu", "id", "image", "name"}


def test_a_childs_peak_memory_is_its_own_not_the_benchmarks(tmp_path):
    """The benchmark holds a whole generated world; a `billing run` it starts must not be measured as that big."""
    held = bytearray(400 * 2**20)
    held[::4096] = b"\1" * len(held[::4096])  # touched, so resident
    child = run_measured("json.tool", ["--help"], tmp_path / "child.log")
    assert 0 < child.rss_mb < 100 and "usage" in (tmp_path / "child.log").read_text()
    assert child.wall > 0 and child.cpu > 0


def test_each_query_is_put_down_to_the_line_of_billing_collect_that_asked_it():
    """Where Prometheus' time goes is summed per asking line: not the helpers that only pass a query on."""
    class Empty:
        def instant(self, query, at):
            return []

        def range(self, query, start, end, step):
            return []

    cluster = ClusterConfig(name="jaguar", prometheus={"url": "http://x"},
                            prices={"cpu_core_hour": 1, "memory_gib_hour": 1, "gpu_hour": 1})
    noting = Noting(Empty())
    collect_cluster(cluster_day(cluster, PERIOD, 60, ["nvidia_com_gpu"], noting, DEFAULT_STORE))
    askers = Counter(query.asker.split(" ", 1)[1] for query in noting.asked)
    assert askers["exact_pods = _uids(source.instant(queries.needs_exact(copies), at)) | odd"] == 4  # once per chunk
    assert any("queries.running_instants(" in line for line in askers)  # not asking's at_times, which passes it on
    assert all(query.asker.startswith(("usage:", "asking:")) for query in noting.asked)


def test_waiting_time_counts_overlapping_queries_once():
    # two queries overlap from 1 to 2 s, a third one is alone: 3 s + 1 s in flight
    assert busy_seconds([(1.0, 3.0), (0.0, 2.0), (5.0, 6.0)]) == 4.0
    assert busy_seconds([(0.0, 10.0), (2.0, 3.0)]) == 10.0
    assert busy_seconds([]) == 0.0


def test_peak_samples_are_read_from_plain_and_gzipped_answers():
    answer = b'{"status":"success","data":{"result":[],"stats":{"samples":{"totalQueryableSamples":9,"peakSamples":1234}}}}'
    assert peak_samples(answer, None) == 1234
    assert peak_samples(gzip.compress(answer), "gzip") == 1234
    assert peak_samples(b'{"status":"success","data":{"result":[]}}', None) == 0


@pytest.fixture(scope="module")
def small():
    """The benchmark's world at 300 pods (the 50,000-pod one has the same mix), with every series it exports."""
    world = world_of(300)
    return world, list(series(world))


def test_cadvisor_has_a_series_per_container_and_two_per_pod_like_the_kubelet(small):
    world, exported = small
    cluster = world.clusters[0]
    usage = [(labels, samples) for name, labels, samples in exported if name == "container_cpu_usage_seconds_total"]
    # every pod uses CPU: one counter per (non-init) container, plus the pod's cgroup ("") and sandbox ("POD")
    expected = Counter()
    for pod in cluster.pods:
        expected[(pod.namespace, pod.name)] = sum(not c.init for c in pod.containers) + 2
    assert Counter((labels["namespace"], labels["pod"]) for labels, _ in usage) == expected
    assert all(set(labels) >= CADVISOR_LABELS and labels["cpu"] == "total" for labels, _ in usage)
    pod = next(p for p in cluster.pods if sum(not c.init for c in p.containers) == 2)
    mine = {labels["container"]: (labels, dict(samples)) for labels, samples in usage if labels["pod"] == pod.name}
    assert set(mine) == {c.name for c in pod.containers if not c.init} | {"", "POD"}
    assert mine["POD"][0]["image"] == PAUSE_IMAGE and mine[""][0]["image"] == mine[""][0]["name"] == ""
    assert mine[""][0]["id"].endswith(f"pod{pod.uid.replace('-', '_')}.slice")  # the pod's cgroup
    assert mine["main"][0]["id"].startswith(mine[""][0]["id"] + "/cri-containerd-")  # a container inside it
    # the pod's cgroup counts all of it: its containers' CPU and the sandbox's
    t = max(mine[""][1])
    cores = sum(c.cpu_used for c in pod.containers if not c.init) + PAUSE_CORES
    assert mine[""][1][t] == pytest.approx(cores * (t - pod.created))
    assert mine[""][1][t] == pytest.approx(sum(samples[t] for _, samples in mine.values()) - mine[""][1][t])


def test_dcgm_has_a_series_per_held_gpu_with_its_pod_and_per_free_gpu_without(small):
    world, exported = small
    cluster = world.clusters[0]
    gpus = [labels for name, labels, _ in exported if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert all(set(labels) >= DCGM_LABELS for labels in gpus)
    held = [labels for labels in gpus if labels.get("pod")]
    expected = Counter({(p.namespace, p.name): int(sum(c.gpu for c in p.containers if not c.init))
                        for p in cluster.pods if any(c.gpu for c in p.containers)})
    assert Counter((labels["namespace"], labels["pod"]) for labels in held) == expected
    assert {labels["modelName"] for labels in held} <= {"NVIDIA H100 80GB HBM3", "NVIDIA A100 SXM4 80GB"}
    free = [labels for labels in gpus if not labels.get("pod")]
    assert not any(POD_LABELS & set(labels) for labels in free)
    gpu_nodes = [n for n in cluster.nodes if n.allocatable.get("nvidia_com_gpu")]
    assert len(free) == sum(int(n.allocatable["nvidia_com_gpu"]) for n in gpu_nodes) == 8 * len(gpu_nodes)


def test_the_floor_asks_each_6_hour_chunk_for_its_own_instants():
    queries = [floor_query(chunk) for chunk in chunks(PERIOD, 60)]
    assert len(queries) == 4
    # 360 instants a chunk (the subquery's window is half a step short of 6 h), the raw window adds the lookback
    assert all("[21570000ms:60000ms]" in q and "[21870000ms]" in q and 'cluster="jaguar"' in q for q in queries)


def test_the_time_spent_importing_counts_each_import_once():
    """Only the imports no other made are summed: their cumulative times hold their children's."""
    report = """import time: self [us] | cumulative | imported package
import time:       100 |        100 |   encodings.utf_8
import time:       500 |        600 | encodings
import time:      2000 |       9000 |     pandas.core
import time:      1000 |      12000 |   pandas
import time:      3000 |      15000 | billing.ledger.database
some other line on stderr
"""
    assert seconds_importing(report) == (600 + 15000) / 1e6
