import re
from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.capacity import CapacityQueries
from billing.collect.chunks import chunks
from billing.collect.prometheus import PrometheusError
from billing.collect.promql import NodeKind, Queries, fits, in_pieces, one_of
from billing.collect.stores import FamilyLabels, ScrapeLabels, Store, engine_of, renames_query
from billing.collect.usage import UsageQueries
from billing.collect.waste import WasteQueries
from billing.config import ClusterConfig
from billing.days import billing_day

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def test_a_utc_day_at_60s_is_four_six_hour_chunks():
    pieces = chunks(DAY, 60)
    assert [(c.end - c.start) / 3600 for c in pieces] == [6, 6, 6, 6]
    assert pieces[0].start == DAY.start.timestamp() and pieces[-1].end == DAY.end.timestamp()
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:]))


def test_a_25_hour_day_and_coarse_steps():
    autumn = billing_day(date(2026, 10, 25), ZoneInfo("Europe/Berlin"))
    assert [(c.end - c.start) / 3600 for c in chunks(autumn, 60)] == [6, 6, 6, 6, 1]
    assert [(c.end - c.start) / 3600 for c in chunks(autumn, 300)] == [25]
    assert [(c.end - c.start) / 3600 for c in chunks(DAY, 15)] == [1.5] * 16


@pytest.mark.parametrize("busiest, step, hours", [
    (0, 60, [6] * 4),
    (27_000, 60, [6] * 4),  # 9.7 M samples in six hours
    (48_000, 60, [3] * 8),  # 17.3 M in six hours, 11.5 M in four, 8.6 M in three
    (48_000, 30, [1] * 24),  # 120 instants an hour: 5.8 M in one hour, 11.5 M in two
    (100_000, 60, [1] * 24),  # 6 M in one hour, 12 M in two
    (1_000_000, 60, [1] * 24),  # too many even for an hour: one hour is the least
    (60_000, 300, [13, 11]),  # 12 instants an hour: 360 instants (30 hours) would be 21.6 M, thirteen hours 9.4 M
])
def test_chunks_are_whole_hours_fewer_where_the_busiest_hour_s_pods_hold_too_many_samples(busiest, step, hours):
    pieces = chunks(DAY, step, busiest)
    assert [(c.end - c.start) / 3600 for c in pieces] == hours
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:]))


def test_a_step_that_misses_local_midnight_is_refused():
    kathmandu = billing_day(date(2026, 1, 1), ZoneInfo("Asia/Kathmandu"))  # UTC+05:45
    assert len(chunks(kathmandu, 900)) == 24 * 4 // 360 + 1
    with pytest.raises(PrometheusError, match="not a multiple of the 1800s step"):
        chunks(kathmandu, 1800)


@pytest.mark.parametrize("values", [["u-1", "u-2"], ["n.1", "n-1"], ["x|y", "a(b)", "[c]*", "d+e?", "^f$", "g{2}", "h\\i"]])
def test_one_of_matches_exactly_its_values(values):
    pattern = re.compile(one_of(values))
    assert all(pattern.fullmatch(value) for value in values)
    near_misses = [v + "x" for v in values] + [v[:-1] for v in values] + ["u.1", "n11", "xy", "ab"]
    assert not any(pattern.fullmatch(miss) for miss in near_misses if miss not in values)


def test_one_of_leaves_hyphens_alone_so_prometheus_sees_a_plain_list():
    assert one_of(["0b4e-11", "n.1"]) == r"0b4e-11|n\.1"


def test_a_long_pod_list_is_asked_for_in_pieces_each_within_the_budget():
    uids = [f"{n:08x}-1111-4222-8333-444455556666" for n in range(1000)]
    queries = in_pieces(uids, lambda pods: f"sum(a{{{pods}}}) * on (uid) b{{{pods}}}")
    assert len(queries) > 1 and all(fits(q) for q in queries)
    named = [uid for q in queries for uid in re.search(r'uid=~"([^"]*)"', q).group(1).split("|")]
    assert sorted(named) == uids  # every pod exactly once
    # each piece is as full as the budget allows: one more pod would not fit
    first, second = queries[0], queries[1]
    one_more = second.split('"')[1].split("|")[0]
    assert not fits(first.replace('"}', f'|{one_more}"}}'))
    assert in_pieces(uids[:3], lambda pods: f"a{{{pods}}}") == [f'a{{uid=~"{"|".join(uids[:3])}"}}']


def test_every_query_without_pod_lists_fits_the_budget_on_the_wordiest_store():
    """VictoriaMetrics with every family's labels renamed and reserved pools: the longest texts billing writes."""
    cluster = ClusterConfig(name="jaguar", prometheus={"url": "http://x", "selector": 'cluster="jaguar"'},
                            prices={"cpu_core_hour": 1, "memory_gib_hour": 1, "gpu_hour": 1},
                            reserved_pools={"node_label": "label_pool", "teams": {"a100-pool": "vision"}},
                            gpu_replicas_label="label_nvidia_com_gpu_replicas",
                            vendor_model_labels=["label_amd_com_gpu_product_name"])
    renamed = FamilyLabels("exported_namespace", "exported_pod", "exported_container", "exported_node")
    store = Store(engine_of({}, {"X-Server-Hostname": "vm"}), ScrapeLabels(renamed, renamed, renamed))
    assert store.engine.metricsql
    chunk = chunks(DAY, 60)[0]
    gpus = {"nvidia_com_gpu": 1.0, "nvidia_com_mig_1g_10gb": 1 / 7, "nvidia_com_mig_3g_40gb": 3 / 7}
    usage, waste = UsageQueries(cluster, gpus, chunk, store), WasteQueries(cluster, gpus, chunk, store)
    moved = ["node-0001", "node-0002"]
    per_workload = WasteQueries(cluster, gpus, chunk, store, by_workload=True)
    breakdown = UsageQueries(cluster, gpus, chunk, store, cost_labels=["experiment", "project"])
    texts = [usage.requested(), usage.pod_info(), breakdown.pod_info(), usage.running_instants(3600, copies=True),
             usage.exact_pods(moved, copies=True), usage.exact("", moved),
             usage.models(), CapacityQueries(cluster, gpus, chunk, store).allocatable(moved),
             renames_query(cluster.prometheus.selector),
             usage.workload_of(), usage.parents(), *waste.measures(5.0), *per_workload.measures(5.0),
             waste.used_bytes()]
    assert all(fits(text) for text in texts)


def sharing_queries(**cluster) -> Queries:
    config = ClusterConfig(name="jaguar", prometheus={"url": "http://x"}, prices={"cpu_core_hour": 0,
                           "memory_gib_hour": 0, "gpu_hour": 1}, **cluster)
    return Queries(config, {"nvidia_com_gpu": 1.0, "nvidia_com_mig_1g_10gb": 1 / 7}, chunks(DAY, 60)[0])


def test_a_node_kind_carries_model_and_replicas_and_a_unit_its_physical_share():
    queries = sharing_queries(gpu_replicas_label="label_r", vendor_model_labels=["label_amd"])
    assert "label_r" in queries.node_keys and "label_amd" in queries.node_keys
    sliced = queries.node_kind({"label_nvidia_com_gpu_product": "L40S", "label_r": "4"})
    assert sliced == NodeKind("L40S", "", 4.0)
    assert queries.gpus_per_unit("nvidia_com_gpu", sliced) == 0.25
    assert queries.gpus_per_unit("nvidia_com_mig_1g_10gb", sliced) == pytest.approx(1 / 28)
    assert queries.gpus_per_unit("cpu", sliced) == 1.0  # replicas share GPUs, not cores
    assert queries.node_kind({"label_amd": "MI300X"}) == NodeKind("MI300X", "", 1.0)
    # a value that is no positive whole number bills each replica as a whole GPU (never less)
    assert queries.node_kind({"label_r": "0"}).replicas == queries.node_kind({"label_r": "two"}).replicas == 1.0


def test_without_a_replicas_label_nodes_are_not_divided():
    queries = sharing_queries()
    assert queries.node_kind({"label_nvidia_com_gpu_replicas": "4"}).replicas == 1.0
    assert "replicas" not in queries.node_keys
