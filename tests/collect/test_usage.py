import re
from datetime import date
from typing import NamedTuple
from zoneinfo import ZoneInfo

import pytest

from billing.collect.chunks import chunks, hours_of
from billing.collect.context import cluster_day
from billing.collect.figures import ImpossibleFigure
from billing.collect.prometheus import PrometheusError
from billing.collect.promql import quote
from billing.collect.stores import DEFAULT_STORE
from billing.collect.usage import GIB, UsageQueries, _chunk_usage, collect_cluster
from billing.config import ClusterConfig
from billing.days import billing_day

CLUSTER = ClusterConfig(
    name="jaguar",
    prometheus={"url": "http://prometheus:9090", "selector": 'cluster="jaguar"'},
    prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0},
)
DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
H100 = "NVIDIA-H100-80GB-HBM3"


def test_queries_carry_the_cluster_selector_and_quote_values():
    queries = UsageQueries(CLUSTER, ["nvidia_com_gpu", "amd.com/gpu"], chunks(DAY, 60)[0])
    assert queries.running() == 'kube_pod_status_phase{phase="Running", cluster="jaguar"}'
    assert 'resource=~"cpu|memory|nvidia_com_gpu|amd\\\\.com/gpu"' in queries.requests()
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    # an hour's instants 05:00 ... 05:59 at T = 05:59: a range of 1 h minus half a step picks exactly 60
    assert "[3570000ms:60000ms]" in queries.running_instants(3600, copies=False)
    # raw samples reach back one lookback (5 min) before the chunk's first instant (00:00 of its 6 hours)
    assert "[21870000ms]" in queries.requested()


RUNNING_INSTANTS = "max by (namespace, pod, uid, phase) (sum_over_time("  # a pod's Running (Pending) instants in each hour
REASON_SIGNALS = "label_replace(sum_over_time((kube_pod_init_container_status_running"  # counted per hour


class Pod(NamedTuple):
    """A pod as the fake store answers for it: its requests per resource, and the instants it ran in every hour."""

    uid: str
    namespace: str
    node: str
    requests: dict[str, float]
    per_hour: int
    priority_class: str = ""


class FakePrometheus:
    """Answers by the kind of query, for `pods` and the given answers; records what was asked."""

    def __init__(self, pods=(), models=(), resized=(), on_nodes=(), exact=(), covered=360):
        self.covered, self.pods = covered, list(pods)
        self.answers = {"models": list(models), "resized": list(resized), "on_nodes": list(on_nodes),
                        "exact": list(exact), "bound_pending": []}  # no pod Pending on a node
        self.asked: list[tuple[str, str]] = []

    def instant(self, query: str, at: float) -> list[dict]:
        kind = ("covered" if query.startswith("count_over_time(") else "resized" if "stddev_over_time(kube_pod_container" in query
                else "bound_pending" if 'phase="Pending"' in query
                else "models" if query.startswith("max by (node") else "on_nodes" if "node=~" in query
                else "pods" if query.startswith("count_values by (uid)") else "hours" if query.startswith(RUNNING_INSTANTS)
                else "pod_info" if query.startswith("group by (namespace, pod, uid, node") else "requested")
        self.asked.append((kind, query))
        if kind == "hours":  # asked hour by hour
            return [{"metric": {"uid": p.uid, "namespace": p.namespace, "pod": p.uid, "phase": "Running"},
                     "value": [at, str(p.per_hour)]} for p in self.pods]
        if kind == "pods":
            return [{"metric": {"uid": "u1", "highest": "1"}, "value": [at, "1"]}]
        if kind == "covered":
            return [{"metric": {}, "value": [at, str(self.covered)]}] if self.covered else []
        if kind == "pod_info":
            return [series(1, uid=p.uid, namespace=p.namespace, pod=p.uid, node=p.node, priority_class=p.priority_class)
                    for p in self.pods]
        if kind == "requested":
            return [series(value, uid=p.uid, namespace=p.namespace, pod=p.uid, resource=resource)
                    for p in self.pods for resource, value in p.requests.items()]
        return self.answers[kind]

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        if query.startswith(RUNNING_INSTANTS):  # at the end of every hour asked
            self.asked.append(("hours", query))
            return [{"metric": {"uid": p.uid, "namespace": p.namespace, "pod": p.uid, "phase": "Running"},
                     "values": [[t, str(p.per_hour)] for t in range(int(start), int(end) + 1, int(step))]}
                    for p in self.pods]
        self.asked.append(("exact", query))
        return self.answers["exact"] if start == DAY.start.timestamp() else []

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.asked]

    def queries(self, kind: str) -> list[str]:
        return [query for k, query in self.asked if k == kind]


def series(value, **labels) -> dict:
    return {"metric": labels, "value": [0, str(value)]}


def test_fast_path_turns_instants_into_hours_and_nodes_into_models():
    source = FakePrometheus(
        pods=[
            # 2 cores for 120 instants a chunk (20 an hour) = 240 core-instants = 4 core-hours at a 60 s step
            Pod("u-a", "alice", "gpu-1", {"cpu": 2, "memory": 2 * GIB, "nvidia_com_gpu": 1}, per_hour=20),
            Pod("u-b", "bob", "cpu-1", {"nvidia_com_gpu": 1}, per_hour=10),
        ],
        models=[series(1, node="gpu-1", label_nvidia_com_gpu_product=H100), series(1, node="cpu-1")],
    )
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    usage = {(r.namespace, r.resource, r.gpu_model): r.quantity for r in result.usage.itertuples()}
    assert usage == {
        ("alice", "cpu", ""): pytest.approx(4 * 4),  # four chunks answer the same
        ("alice", "memory", ""): pytest.approx(4 * 4),
        ("alice", "gpu", H100): pytest.approx(4 * 2),
        ("bob", "gpu", ""): pytest.approx(4 * 1),
    }
    assert result.pods == 1
    assert "exact" not in source.kinds()
    # per chunk: models, Running pods, needs_exact, coverage, pods, requests, hours (no pod was Pending: nothing more)
    assert result.queries == 4 * 7
    assert result.coverage == 1.0
    # what waste takes: every pod's Running instants in each of the day's 24 hours, and its CPU request
    hours = result.pod_hours.groupby("uid").agg(hours=("hour", "nunique"), instants=("instants", "sum"), cpu=("cpu", "max"))
    assert hours.to_dict("index") == {"u-a": {"hours": 24, "instants": 24 * 20, "cpu": 2.0},
                                      "u-b": {"hours": 24, "instants": 24 * 10, "cpu": pytest.approx(float("nan"), nan_ok=True)}}


def test_a_store_that_moves_a_range_query_s_times_is_asked_for_running_instants_hour_by_hour():
    """A query frontend aligning a range query's times to its step (Thanos' default) would move every hour's end."""
    class Moving(FakePrometheus):
        def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
            return super().range(query, start - start % step, end - end % step, step)

    source = Moving(pods=[Pod("u-a", "alice", "n", {"cpu": 2}, per_hour=30)])
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    assert result.usage["quantity"].tolist() == [pytest.approx(24 * 30 * 2 / 60)]  # 2 cores, half of every hour
    assert source.kinds().count("hours") == 4 * (1 + 6)  # per chunk: the range query that moved, then its 6 hours
    # every question counts, the moved range query too: per chunk models, Running pods, needs_exact, coverage,
    # the range query and its 6 hours, pods, requests
    assert result.queries == len(source.asked) == 4 * (4 + 1 + 6 + 2)
    assert sorted(set(result.pod_hours["hour"])) == [hour.last for hour in hours_of(DAY, 60)]  # what waste looks up


@pytest.mark.parametrize("covered, coverage", [(300, 300 / 360), (0, 0.0)])
def test_coverage_is_the_share_of_instants_with_data(covered, coverage):
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], FakePrometheus(covered=covered), DEFAULT_STORE))
    assert result.coverage == pytest.approx(coverage)


def test_resized_pods_are_left_out_of_the_fast_path_and_evaluated_exactly():
    source = FakePrometheus(
        resized=[series(1, uid="u-2"), series(1, uid="u-1")],
        pods=[Pod("u-1", "alice", "n", {"cpu": 2}, per_hour=20), Pod("u-3", "alice", "n", {"cpu": 2}, per_hour=20)],
        exact=[{"metric": {"namespace": "alice", "resource": "cpu", "priority_class": "backfill"},
                "values": [[0, "2"], [60, "4"]]}],
    )
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    # one exact range query per chunk, restricted to the two pods
    assert len(source.queries("exact")) == 4
    assert all('uid=~"u-1|u-2"' in q for q in source.queries("exact"))
    # only the first chunk answers, with 2 + 4 core-instants of a backfill pod; u-3 alone takes the fast path,
    # 240 core-instants a chunk
    assert result.usage.to_dict("records") == [
        {"namespace": "alice", "resource": "cpu", "gpu_model": "", "priority_class": "", "pool": "",
         "quantity": pytest.approx(4 * 4)},
        {"namespace": "alice", "resource": "cpu", "gpu_model": "", "priority_class": "backfill", "pool": "",
         "quantity": pytest.approx(6 / 60)},
    ]


def test_a_chunk_keeps_one_row_per_key_whatever_nodes_the_store_answered_for():
    """A big cluster's day is held a chunk at a time: rows of nodes with the same GPU model and pool are one row."""
    source = FakePrometheus(
        pods=[Pod(f"u-{n}", "alice", f"gpu-{n}", {"nvidia_com_gpu": 4 if n < 3 else 1}, per_hour=10) for n in (1, 2, 3)],
        models=[series(1, node=f"gpu-{n}", label_nvidia_com_gpu_product=H100) for n in (1, 2)]
        + [series(1, node="gpu-3", label_nvidia_com_gpu_product="A100")],
    )
    chunk = chunks(DAY, 60)[0]
    usage = _chunk_usage(source, UsageQueries(CLUSTER, ["nvidia_com_gpu"], chunk), chunk).usage
    assert sorted(zip(usage["gpu_model"], usage["quantity"], usage["held"])) == [("A100", 1.0, 1.0), (H100, 8.0, 8.0)]


def test_pods_on_a_relabelled_node_are_evaluated_exactly():
    source = FakePrometheus(models=[series(1, node="n.1", label_nvidia_com_gpu_product=m) for m in (H100, "A100")],
                            pods=[Pod("u-9", "alice", "n.1", {"nvidia_com_gpu": 1}, per_hour=60)],
                            on_nodes=[series(1, uid="u-9")])
    usage = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE)).usage
    assert all(r'node=~"n\\.1"' in q for q in source.queries("on_nodes"))
    assert all('uid=~"u-9"' in q for q in source.queries("exact"))
    assert usage.empty  # the pod's fast figure is left out; the exact path answers nothing here


def test_exact_results_take_the_model_per_instant_on_relabelled_nodes_and_the_nodes_model_elsewhere():
    source = FakePrometheus(
        models=[series(1, node="n.1", label_nvidia_com_gpu_product=m) for m in (H100, "A100")]
        + [series(1, node="m", label_nvidia_com_gpu_product="A100")],
        on_nodes=[series(1, uid="u-9")],
        exact=[{"metric": {"namespace": "alice", "node": "n.1", "resource": "nvidia_com_gpu",
                           "label_nvidia_com_gpu_product": H100}, "values": [[0, "60"]]},
               {"metric": {"namespace": "alice", "node": "n.1", "resource": "nvidia_com_gpu"}, "values": [[0, "120"]]},
               {"metric": {"namespace": "alice", "node": "m", "resource": "nvidia_com_gpu"}, "values": [[0, "180"]]}],
    )
    usage = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE)).usage
    assert {(r.gpu_model, r.quantity) for r in usage.itertuples()} == {(H100, 1.0), ("", 2.0), ("A100", 3.0)}


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_impossible_values_are_refused(value):
    source = FakePrometheus(pods=[Pod("u-1", "alice", "n", {"cpu": value}, per_hour=1)])
    with pytest.raises(ImpossibleFigure, match=rf'cluster jaguar: kube_pod_container_resource_requests{{namespace="alice", '
                                               rf'pod="u-1", resource="cpu", uid="u-1"}} is {re.escape(value)}, which a pod'):
        collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))


def test_reserved_pools_come_from_node_labels_and_a_node_moved_between_pools_is_evaluated_exactly():
    pooled = ClusterConfig.model_validate(
        {**CLUSTER.model_dump(), "reserved_pools": {"node_label": "label_pool", "teams": {"p1": "robotics"}}})
    source = FakePrometheus(
        models=[series(1, node="a", label_nvidia_com_gpu_product=H100, label_pool="p1"),
                series(1, node="b", label_nvidia_com_gpu_product=H100, label_pool="nobody's"),  # not reserved
                series(1, node="c", label_pool="p1"), series(1, node="c")],  # c joined the pool
        pods=[Pod("u-a", "alice", "a", {"nvidia_com_gpu": 1}, per_hour=10),
              Pod("u-b", "bob", "b", {"nvidia_com_gpu": 1}, per_hour=10)],
        on_nodes=[series(1, uid="u-c")],
        exact=[{"metric": {"namespace": "carol", "node": "c", "resource": "cpu", "label_pool": "p1"},
                "values": [[0, "60"]]}])
    result = collect_cluster(cluster_day(pooled, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    usage = {(r.namespace, r.resource, r.gpu_model, r.pool): r.quantity for r in result.usage.itertuples()}
    # four chunks of 60 GPU-instants = 4 GPU-h each; carol's first exact chunk of 60 core-instants = 1 core-h
    assert usage == {("alice", "gpu", H100, "p1"): pytest.approx(4), ("bob", "gpu", H100, ""): pytest.approx(4),
                     ("carol", "cpu", "", "p1"): pytest.approx(1)}
    assert all(r'node=~"c"' in q for q in source.queries("on_nodes"))
    assert all("label_nvidia_com_gpu_product, label_pool" in q for q in source.queries("exact"))


def test_a_chunk_with_copies_merges_them_at_each_instant():
    """A pod two exporters reported Running (its value: 2 copies): the Running instants merge a pod's copies inside
    the subquery, and requests are compared across copies; a chunk without copies asks neither."""
    class Copied(FakePrometheus):
        def instant(self, query: str, at: float) -> list[dict]:
            if query.startswith("count_values by (uid)"):
                self.asked.append(("pods", query))
                return [{"metric": {"uid": "u1", "highest": "1"}, "value": [at, "2" if at < DAY.start.timestamp() + 6 * 3600 else "1"]}]
            return super().instant(query, at)

    source = Copied()
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    assert result.copies and result.pods == 1
    merged = "sum_over_time(max by (namespace, pod, uid, phase) (kube_pod_status_phase"
    assert [merged in query for query in source.queries("hours")] == [True, False, False, False]  # the first chunk only
    exact = [query for kind, query in source.asked  # needs_exact
             if kind != "bound_pending" and query.lstrip().startswith("group by (uid)")]
    assert ["max by (uid, container, resource)" in query for query in exact] == [True, False, False, False]


def test_too_many_cost_labels_for_any_store_s_query_length_fail_the_run_saying_so():
    labels = [f"example.com/cost-label-number-{n}" for n in range(200)]
    with pytest.raises(PrometheusError, match="with 200 cost labels is longer than the 12288 bytes .* list fewer cost_labels"):
        collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], FakePrometheus(), DEFAULT_STORE), cost_labels=labels)


def test_held_instants_come_from_the_running_pass_and_reasons_are_asked_instant_by_instant_where_a_container_waited():
    """A pod on a node, on no node at no sample, Pending 10 instants in the first hour of the first chunk and 5 in
    its second, ContainerCreating at 3 of them in the first: held 3 instants for that reason and 12 for none. Not
    asked when it was bound (its Pending instants are those); its reasons counted per hour in one query per chunk,
    and asked instant by instant in the first hour only, where an app container waited (which may be at an instant
    it was not Pending): the second hour's counts prove it had no reason."""
    start = int(DAY.start.timestamp())

    class Pending(FakePrometheus):
        def instant(self, query: str, at: float) -> list[dict]:
            if query.startswith("group by (uid) (max_over_time(kube_pod_info{node=\"\""):
                self.asked.append(("unbound", query))
                return []
            return super().instant(query, at)

        def range(self, query: str, start_: float, end: float, step: float) -> list[dict]:
            labels = {"uid": "u-a", "namespace": "alice", "pod": "u-a", "reason": "ContainerCreating"}
            if query.startswith(RUNNING_INSTANTS):
                answer = super().range(query, start_, end, step)
                if start_ == start + 3600 - 60:  # the first chunk's hours: Pending in its first two
                    answer.append({"metric": {"uid": "u-a", "namespace": "alice", "pod": "u-a", "phase": "Pending"},
                                   "values": [[start_, "10"], [start_ + 3600, "5"]]})
                return answer
            if query.startswith(REASON_SIGNALS):
                self.asked.append(("signals", query))
                return [{"metric": {**labels, "container": "main"}, "values": [[start_, "3"]]}] \
                    if start_ == start + 3600 - 60 else []
            if "kube_pod_container_status_waiting_reason" in query:
                self.asked.append(("reasons", query))
                return [{"metric": labels, "values": [[t, "1"] for t in (start_, start_ + 60, start_ + 120)]}] \
                    if start_ == start else []
            return super().range(query, start_, end, step)

    source = Pending(pods=[Pod("u-a", "alice", "n", {"cpu": 2}, per_hour=45)])
    result = collect_cluster(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], source, DEFAULT_STORE))
    held = result.bound_pending.groupby("reason")["quantity"].sum().to_dict()
    assert held == {"": pytest.approx(2 * 12 / 60), "ContainerCreating": pytest.approx(2 * 3 / 60)}
    assert source.kinds().count("unbound") == 1  # the first chunk's: no other had a pod Pending
    assert source.kinds().count("signals") == 1
    assert len(source.queries("reasons")) == 1 and "exact" not in source.kinds()
    assert all('kube_pod_status_phase{phase="Pending"' in query for query in source.queries("reasons"))
