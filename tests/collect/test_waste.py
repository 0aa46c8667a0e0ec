"""billing.collect.waste without a server: which measures a day has, and how they are split over teams."""

import re
from datetime import date
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from billing import frames
from billing.collect.chunks import hours_of
from billing.collect.context import cluster_day
from billing.collect.figures import ImpossibleFigure
from billing.collect.storage import ClaimSizes
from billing.collect.stores import DEFAULT_STORE
from billing.collect.waste import MEASURES, _cpu_used, _requested, attribute_waste, collect_waste, waste_by_namespace
from billing.config import ClusterConfig
from billing.days import billing_day

CLUSTER = ClusterConfig(name="jaguar", prometheus={"url": "http://prometheus:9090"},
                        prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


class Answers:
    """DCGM in the first 6 hours of the day only, cAdvisor in none; 10 idle GPU-instants of alice per hour."""

    def __init__(self):
        self.asked: list[str] = []

    def instant(self, query: str, at: float) -> list[dict]:
        self.asked.append(query)
        first = at < DAY.start.timestamp() + 6 * 3600 and at % 3600 == 3540  # (answered at an hour's last instant)
        if "DCGM_FI_DEV_GPU_UTIL{" in query and first:
            return [{"metric": {"namespace": "alice", "measure": "idle_gpu"}, "value": [at, "10"]}]
        if "or vector(0)" in query:
            return [{"metric": {}, "value": [at, "0"]}]  # no cAdvisor: only the series that answers at every time
        return []  # no MIG instances

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        hours = [self.instant(query, t) for t in range(int(start), int(end) + 1, int(step))]
        return [{"metric": s["metric"], "values": [s["value"]]} for answer in hours for s in answer]


class MovingFrontend(Answers):
    """A query frontend that aligns a range query's times to its step (Thanos' default), moving them."""

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return super().range(query, start - start % step, end - end % step, step)


@pytest.mark.parametrize("source", [Answers(), MovingFrontend()], ids=["range-queries", "hour-by-hour"])
def test_a_measure_is_taken_only_where_its_metric_is(source):
    waste = collect_waste(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE), 5.0)
    # six hours with DCGM: 6 x 10 GPU-instants = 1 idle GPU-hour; no cAdvisor anywhere: not measured
    assert waste["namespace"].tolist() == ["alice"]
    assert waste["idle_gpu_hours"].tolist() == [pytest.approx(1.0)] and waste["unused_cpu_core_hours"].isna().all()
    # every hour asked once: at its last instant, in range queries of six hours, or hour by hour after one moved
    hourly = [q for q in source.asked if "DCGM_FI_DEV_GPU_UTIL{" in q and "< bool 5.0" in q]
    assert len(hourly) == 24
    assert not any("rate(container_cpu_usage_seconds_total" in q for q in source.asked)


def test_requested_cpu_is_usage_s_request_times_running_instants_and_a_resized_pod_s_own_per_hour():
    """What waste subtracts use from, per pod and hour, from usage's Running pod-hours (ClusterUsage.pod_hours)."""
    first, second, third = hours_of(DAY, 60)[:3]
    pod_hours = pd.DataFrame([
        ("u1", "alice", "a", first.last, 60.0, 2.0),  # 2 cores all hour: 120 core-instants
        ("u2", "alice", "a", first.last, 30.0, 1.0),  # a pod of the same name again (re-created): adds 30
        ("u3", "alice", "b", second.last, 60.0, 4.0),  # resized: the hour's own request, 0.5, not the chunk's 4
        ("u4", "bob", "c", first.last, 60.0, float("nan")),  # no CPU request: requested nothing
        ("u1", "alice", "a", third.last, 60.0, 2.0),  # an hour of another group
    ], columns=frames.POD_HOURS.columns)
    requested = _requested(pod_hours, [first, second], frozenset({"u3"}), [{}, {"u3": 0.5}])
    assert requested == [{("alice", "a"): 150.0}, {("alice", "b"): 30.0}]


class PodsOfControllers(Answers):
    """Four pods of alice idle on a GPU for the first 6 hours: p1 of a Deployment's ReplicaSet, p2 a name two
    Jobs' pods used (two uids), p3 without a controller (the usage's pod info names it `Pod/p3`), p4 unknown to
    kube-state-metrics. Their workloads are the usage's: its pod info, asked per chunk."""

    def instant(self, query: str, at: float) -> list[dict]:
        if query.startswith("group by (namespace, pod, uid, node, priority_class, workload)"):
            return [{"metric": {"namespace": "alice", "node": "gpu-1", **labels}, "value": [at, "1"]} for labels in (
                {"pod": "p1", "uid": "u1", "workload": "ReplicaSet/web-5d"},
                {"pod": "p2", "uid": "u2b", "workload": "Job/train-b"},
                {"pod": "p2", "uid": "u2a", "workload": "Job/train-a"},
                {"pod": "p3", "uid": "u3", "workload": "Pod/p3"})]
        if "kube_replicaset_owner" in query:
            return [{"metric": {"namespace": "alice", "workload": "ReplicaSet/web-5d", "top": "Deployment/web"},
                     "value": [at, "1"]}]
        return [{"metric": {**series["metric"], "pod": pod}, "value": series["value"]}
                for series in super().instant(query, at) for pod in ("p1", "p2", "p3", "p4")]


def test_waste_per_workload_takes_each_pod_to_its_top_level_controller():
    waste = collect_waste(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], PodsOfControllers(), DEFAULT_STORE), 5.0, by_workload=True)
    assert dict(zip(waste["workload"], waste["idle_gpu_hours"])) == pytest.approx(
        {"Deployment/web": 1.0, "Job/train-a": 1.0, "Pod/p3": 1.0, "Pod/p4": 1.0})
    assert set(waste["namespace"]) == {"alice"}


def test_waste_per_workload_sums_to_the_namespace_and_keeps_what_was_not_measured():
    by_workload = pd.DataFrame([("alice", "Job/train-1", 2.0, None, None), ("alice", "Deployment/web", 1.5, None, None),
                                ("bob", "Pod/debug", None, 3.0, None)], columns=["namespace", "workload", *MEASURES])
    totals = waste_by_namespace(by_workload).set_index("namespace")
    assert totals.loc["alice", "idle_gpu_hours"] == 3.5 and pd.isna(totals.loc["alice", "unused_cpu_core_hours"])
    assert pd.isna(totals.loc["bob", "idle_gpu_hours"]) and totals.loc["bob", "unused_cpu_core_hours"] == 3.0


def test_waste_is_split_over_a_namespace_s_teams_like_its_cost():
    waste = pd.DataFrame([("jaguar", "bob", 4.0, 10.0, 8.0), ("jaguar", "team-nlp", None, 2.0, None)],
                         columns=["cluster", "namespace", *MEASURES])
    ownership = pd.DataFrame([("bob", "robotics", "bob", 0.5), ("bob", "vision", "bob", 0.5),
                              ("team-nlp", "nlp", None, 1.0)], columns=["namespace", "team", "owner", "share"])
    rows = attribute_waste(waste, ownership).set_index("team")
    assert rows.loc["robotics", MEASURES].tolist() == [2.0, 5.0, 4.0]
    assert rows.loc["vision", "owner"] == "bob"
    assert pd.isna(rows.loc["nlp", "idle_gpu_hours"]) and rows.loc["nlp", "unused_cpu_core_hours"] == 2.0


class ImpossibleIdleGpus(Answers):
    """DCGM's idle GPU-instants of alice answered as `value`: what a broken store or exporter may send."""

    def __init__(self, value: str):
        super().__init__()
        self.value = value

    def instant(self, query: str, at: float) -> list[dict]:
        answer = super().instant(query, at)
        return [{**s, "value": [at, self.value]} for s in answer] if "DCGM_FI_DEV_GPU_UTIL{" in query else answer


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-10"])
def test_an_impossible_idle_gpu_sample_is_refused(value):
    with pytest.raises(ImpossibleFigure, match=rf'cluster jaguar: DCGM_FI_DEV_GPU_UTIL{{measure="idle_gpu", '
                                               rf'namespace="alice"}} is {re.escape(value)}, which a count of instants'):
        collect_waste(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], ImpossibleIdleGpus(value), DEFAULT_STORE), 5.0)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_an_impossible_cpu_counter_is_refused(value):
    # by hand, a good counter: 50 core-seconds by the first hour's end, 80 by the second's: 30 used in the second
    run = {"namespace": "alice", "pod": "a", "container": "main", "id": "1", "cpu": "total"}
    assert _cpu_used([(run, [(0.0, "50"), (3600.0, "80")])], [0.0, 3600.0], "jaguar") == [{("alice", "a"): 30.0}]
    with pytest.raises(ImpossibleFigure, match=r'container_cpu_usage_seconds_total{container="main", cpu="total", '
                                               r'id="1", namespace="alice", pod="a"} is [-+NI]'):
        _cpu_used([(run, [(0.0, "50"), (3600.0, value)])], [0.0, 3600.0], "jaguar")


GIB = 2**30


class MountedClaims(Answers):
    """Kubelet's volume stats in the first 2 hours only, per claim and hour (at the hour's last instant): alice's
    `data` (10 GiB, storage's figure) seen at all 60 instants using 4 GiB; alice's `full` (1 GiB) seen at 30 using
    2 GiB, more than its size (filesystem overhead); bob's `cold` (5 GiB) has no used bytes (no pod mounts it);
    carol's `grown`, resized, so that storage's factoring knows no one size of it (CLAIM_SIZES), seen at all 60
    instants using 1 GiB, its hour's highest size 3 GiB in the first hour, 5 GiB in the second."""

    def __init__(self, used: str = str(60 * 4 * GIB)):
        super().__init__()
        self.used = used

    def instant(self, query: str, at: float) -> list[dict]:
        if "kubelet_volume_stats_used_bytes{" not in query and "kube_persistentvolumeclaim_info{" not in query:
            return super().instant(query, at)
        self.asked.append(query)
        hour = (at - DAY.start.timestamp()) // 3600
        if not (hour < 2 and at % 3600 == 3540):
            return []

        def part(namespace: str, claim: str, figure: str, value: float | str) -> dict:
            labels = {"namespace": namespace, "persistentvolumeclaim": claim, "figure": figure}
            return {"metric": labels, "value": [at, str(value)]}

        if "kube_persistentvolumeclaim_info{" in query:  # the sizes of the claims named
            return [part("carol", "grown", "size", (3 + 2 * hour) * GIB)] if '"grown"' in query else []
        return [part("alice", "data", "seen", 60), part("alice", "data", "used", self.used),
                part("alice", "full", "seen", 30), part("alice", "full", "used", 30 * 2 * GIB),
                part("carol", "grown", "seen", 60), part("carol", "grown", "used", 60 * GIB)]


# storage's figures of every chunk: the claims of one size, and the resized one with the volume it was bound to
CLAIM_SIZES = ClaimSizes(held={("alice", "data"): 10 * GIB, ("alice", "full"): GIB, ("bob", "cold"): 5 * GIB},
                         unsure={("carol", "grown"): ["pv-grown"]})


def mounted_claims(by_workload: bool = False, used: str = str(60 * 4 * GIB)) -> tuple[pd.DataFrame, list[str]]:
    """The day's waste of MountedClaims with storage's CLAIM_SIZES, and the queries it asked."""
    answers = MountedClaims(used)
    context = cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], answers, DEFAULT_STORE)
    waste = collect_waste(context, 5.0, by_workload, sizes=[CLAIM_SIZES] * len(context.chunks()))
    return waste, answers.asked


@pytest.mark.parametrize("by_workload", [False, True], ids=["per-namespace", "per-workload"])
def test_unused_storage_is_size_less_used_at_the_instants_kubelet_saw_the_claim(by_workload):
    waste, _ = mounted_claims(by_workload)
    keys = ["namespace", "workload"] if by_workload else ["namespace"]
    unused = waste[waste["unused_storage_gib_hours"] > 0].set_index(keys)["unused_storage_gib_hours"].to_dict()
    # data: (10 - 4) GiB x 60 instants x 60 s = 6 GiB-hours an hour, 2 hours: 12; full: used more than held, 0 (never
    # negative); cold: not mounted, not measured (bob has no row of it); grown: (3 - 1) + (5 - 1) GiB x 1 hour = 6;
    # per workload, the namespace's own
    alice, carol = (("alice", frames.UNATTRIBUTED), ("carol", frames.UNATTRIBUTED)) if by_workload else ("alice", "carol")
    assert unused == {alice: pytest.approx(12.0), carol: pytest.approx(6.0)}
    assert "bob" not in set(waste["namespace"])


def test_unused_storage_reads_sizes_only_of_claims_storage_knows_no_one_size_of():
    _, asked = mounted_claims()
    sized = [query for query in asked if "kube_persistentvolumeclaim_info{" in query]
    # the sizes are storage's: asked only in the two hours kubelet saw carol's resized claim, of it and its volume
    assert sized and all('persistentvolumeclaim=~"grown"' in query and 'persistentvolume=~"pv-grown"' in query
                         for query in sized)
    assert not any("kube_persistentvolume_capacity_bytes" in query for query in asked if query not in sized)


def test_unused_storage_is_not_measured_without_kubelet_s_volume_stats():
    waste = collect_waste(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], Answers(), DEFAULT_STORE), 5.0)
    assert waste["unused_storage_gib_hours"].isna().all()


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1", str(2.0**70)])
def test_an_impossible_used_bytes_sample_is_refused(value):
    with pytest.raises(ImpossibleFigure, match=r'cluster jaguar: kubelet_volume_stats_used_bytes\{figure="used", '
                                               r'namespace="alice", persistentvolumeclaim="data"\}'):
        mounted_claims(used=value)
