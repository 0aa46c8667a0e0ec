"""Waste against a real Prometheus: a GPU pod at 0% utilisation for half the day, CPU requested but unused.

A small hand-made cluster whose figures are worked out by hand below, and
checked against fixtures.reference as well.
"""

from dataclasses import replace
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.stores import store_of
from billing.collect.usage import collect_cluster
from billing.collect.waste import collect_waste, waste_by_namespace
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import GPU_PRODUCT_LABEL, H100, Cluster, Container, Controller, Node, Pod, World, replaced_exporter
from fixtures.reference import reference_waste
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
GIB = 2**30


def at(hour: float) -> float:
    return D + hour * 3600


def pod(namespace: str, name: str, start: float, end: float, container: Container, **fields) -> Pod:
    """Running from start to end (hours of the day), deleted half an hour later."""
    return Pod(namespace, name, f"uid-{name}", "gpu-1", at(start), ((at(start), "Running"), (at(end), "Succeeded")),
               at(end) + 1800, (container,), **fields)


WORLD = World(
    (Cluster("jaguar",
             (Node("gpu-1", ((D - 30 * 86400, {GPU_PRODUCT_LABEL: H100}),),
                   {"cpu": 64.0, "memory": 512.0 * GIB, "nvidia_com_gpu": 8.0}),),
             (
                 # 2 GPUs at 0% until noon, then 80%: 2 x 12 = 24 idle GPU-hours;
                 # requests 8 cores and uses 2 all day: (8 - 2) x 24 = 144 unused core-hours
                 pod("alice", "train", -1, 25, Container("main", 8.0, 64.0 * GIB, 2.0, cpu_used=2.0),
                     gpu_utilisation=((at(-1), 0.0), (at(12), 80.0))),
                 # uses more than it requests: nothing unused
                 pod("carol", "eval", -1, 25, Container("main", 1.0, GIB, cpu_used=3.0)),
                 # no usage series at all: its whole request, 2 cores x 6 h = 12 core-hours
                 pod("carol", "prep", 6, 12, Container("main", 2.0, GIB)),
                 # 4 cores requested, 1 used, Running 14:00-16:00: the hour 14:00-14:59 requests 240 core-minutes,
                 # its containers used 59 from 13:59 to 14:59 (the counter starts at 0 at 14:00); the hour 15:00
                 # 180 (240 less 60); the hour 16:00 requests nothing: 361 core-minutes
                 pod("dave", "short", 14, 16, Container("main", 4.0, GIB, cpu_used=1.0)),
             ),
             {"cluster": "jaguar"}),),
    D - 3600, D + 25 * 3600,
)
BY_HAND = {"alice": (24.0, 144.0), "carol": (0.0, 12.0), "dave": (0.0, 361 / 60)}


def cluster(url: str) -> ClusterConfig:
    return ClusterConfig(name="jaguar", prometheus={"url": url, "selector": 'cluster="jaguar"', "retries": 0},
                         prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})


@pytest.mark.parametrize("honor_labels", [True, False], ids=["plain-labels", "exported-labels"])
def test_idle_gpus_and_unused_cpu_by_hand_and_by_the_reference(store_server, honor_labels):
    """Also where DCGM, cAdvisor and kube-state-metrics were scraped with honor_labels: false."""
    prom = store_server(replace(WORLD, honor_labels=honor_labels))
    config = cluster(prom.url)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus)), 5.0)
    got = {r.namespace: (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    expected = reference_waste(WORLD, "jaguar", D, DAY.end.timestamp(), 60, below=5.0)
    assert got.keys() == expected.keys() == BY_HAND.keys()
    for namespace, measures in expected.items():
        assert measures == pytest.approx(BY_HAND[namespace], rel=1e-12), namespace
        assert got[namespace] == pytest.approx(measures, rel=1e-9), namespace


def test_kube_state_metrics_replaced_changes_no_waste(store_server):
    """kube-state-metrics replaced at 09:30 (a new instance): every pod's Running series has two copies in the
    09:00 hour, which count once per instant, so the waste is the one worked out by hand. Without merging them,
    that hour's unused CPU would count only the longer copy's 35 instants."""
    prom = store_server(replace(WORLD, exporters=replaced_exporter(D + 9.5 * 3600)))
    config = cluster(prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    usage = collect_cluster(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source))
    assert usage.copies
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), 5.0, usage=usage)
    got = {r.namespace: (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    assert got.keys() == BY_HAND.keys()
    for namespace, measures in BY_HAND.items():
        assert got[namespace] == pytest.approx(measures, rel=1e-9), namespace


def unused_cpu_of(store_server, alone: Pod) -> tuple[float, float]:
    """The pod's unused CPU core-hours alone in the world: (billing's, the reference's)."""
    [jaguar] = WORLD.clusters
    world = replace(WORLD, clusters=(replace(jaguar, pods=(alone,)),))
    config = cluster(store_server(world).url)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus)), 5.0)
    assert list(waste.namespace) == [alone.namespace]
    return waste.unused_cpu_core_hours[0], reference_waste(world, "jaguar", D, DAY.end.timestamp(), 60)[alone.namespace][1]


def test_a_pod_scheduled_mid_hour_requests_once(store_server):
    """kube-state-metrics labels a pod's request series with its node, "" while unscheduled: a pod scheduled
    within an hour has two request series per container in it, and requests its cores once, not twice."""
    # created 10:00 and Pending, unscheduled until 10:20, Running 10:30-12:00; requests 4 cores, uses 1
    # from its creation on. The hour 10:00 requests 4 x 30 = 120 core-minutes, its counter grew by 59 from
    # 10:00 to 10:59 (it starts at 0 at 10:00): 61 unused; the hour 11:00 240 less 60; from 12:00 none
    queued = Pod("erin", "queued", "uid-queued", "gpu-1", at(10), ((at(10), "Pending"), (at(10.5), "Running"),
                                                                   (at(12), "Succeeded")),
                 at(12.5), (Container("main", 4.0, GIB, cpu_used=1.0),), scheduled=at(10 + 20 / 60))
    billed, reference = unused_cpu_of(store_server, queued)
    assert billed == pytest.approx((61 + 180) / 60, rel=1e-9)
    assert reference == pytest.approx((61 + 180) / 60, rel=1e-12)


def test_a_pod_resized_in_place_requests_each_hour_its_highest_of_that_hour(store_server):
    """Requests are read once per six hours for pods whose requests did not change, hour by hour for the others:
    a pod resized from 2 to 6 cores at 03:30 requests 2 in the hours before 03:00 and 6 from then on, not 6 all
    six hours (asked alone, and with usage's resized pods, as `billing run` asks)."""
    # Running all day, uses 1 core: hours 00 to 02 leave 2 - 1 unused, the hour 03:00 (its highest, 6) and
    # the 20 after it 6 - 1: 3 + 5 + 100 = 108 core-hours (with 6 all morning it would be 120)
    resized = pod("grace", "resized", -1, 25, Container("main", 2.0, GIB, cpu_used=1.0,
                                                        resizes=((at(3.5), 6.0, GIB, 0.0),)))
    billed, reference = unused_cpu_of(store_server, resized)
    assert billed == pytest.approx(108.0, rel=1e-9)
    assert reference == pytest.approx(108.0, rel=1e-12)
    [jaguar] = WORLD.clusters
    config = cluster(store_server(replace(WORLD, clusters=(replace(jaguar, pods=(resized,)),))).url)
    source = LivePrometheus("jaguar", config.prometheus)
    usage = collect_cluster(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source))
    assert usage.exact == {"uid-resized"}
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), 5.0, usage=usage)
    assert waste.unused_cpu_core_hours[0] == pytest.approx(108.0, rel=1e-9)


def test_usage_is_not_extrapolated_past_the_pods_life(store_server):
    """A pod deleted 10 s after a scrape: Prometheus' increase() would stretch its counter's growth by half a
    scrape interval past the last sample, 20 s after the pod was gone; the usage counted ends at that sample."""
    # created 10:00 and Running until deleted at 10:30:10; requests 4 cores and uses all 4. Its phase is
    # seen at the instants 10:00 ... 10:35 (the last sample, at 10:30, for the 5 minutes' lookback): 4 x 36
    # = 144 core-minutes requested; its counter's last sample, at 10:30, says 4 x 30 = 120 core-minutes
    # used (increase() would say 122, 4 cores until 10:30:30): 24 core-minutes unused
    gone = Pod("frank", "gone", "uid-gone", "gpu-1", at(10), ((at(10), "Running"),), at(10.5) + 10,
               (Container("main", 4.0, GIB, cpu_used=4.0),))
    billed, reference = unused_cpu_of(store_server, gone)
    assert billed == pytest.approx(24 / 60, rel=1e-9)
    assert reference == pytest.approx(24 / 60, rel=1e-12)


def test_replicated_series_are_counted_once(store_server):
    """An HA Prometheus pair's two copies of every series (prometheus_replica) neither halve the unused CPU
    (usage counted twice) nor double the idle GPUs."""
    [jaguar] = WORLD.clusters
    replicas = tuple(replace(jaguar, extra_labels={**jaguar.extra_labels, "prometheus_replica": name})
                     for name in ("prometheus-0", "prometheus-1"))
    prom = store_server(replace(WORLD, clusters=replicas))
    config = cluster(prom.url)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus)), 5.0)
    got = {r.namespace: (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    assert got.keys() == BY_HAND.keys()
    for namespace, measures in BY_HAND.items():
        assert got[namespace] == pytest.approx(measures, rel=1e-9), namespace


def owned_by(kind: str, name: str) -> dict[str, str]:
    return {"created_by_kind": kind, "created_by_name": name}


def with_workloads(world: World) -> World:
    """The world's pods under controllers, and alice's notebook: a bare pod holding a GPU at 1% from 00:00
    to 06:00 (its DCGM series lasts until it is deleted at 06:30), requesting a core and using half."""
    [jaguar] = world.clusters
    train, evaluation, prep, short = jaguar.pods
    notebook = pod("alice", "notebook", 0, 6, Container("main", 1.0, GIB, 1.0, cpu_used=0.5),
                   gpu_utilisation=((at(0), 1.0),))
    pods = (replace(train, **owned_by("ReplicaSet", "train-5d8f")), replace(evaluation, **owned_by("Job", "eval-1")),
            prep, replace(short, **owned_by("StatefulSet", "short")), notebook)
    controllers = (Controller("ReplicaSet", "alice", "train-5d8f", "Deployment", "train"),
                   Controller("Job", "carol", "eval-1", "CronJob", "evals"))
    return replace(world, clusters=(replace(jaguar, pods=pods, controllers=controllers),))


OWNED = with_workloads(WORLD)
WORKLOADS = {("alice", "train"): "Deployment/train", ("alice", "notebook"): "Pod/notebook",
             ("carol", "eval"): "CronJob/evals", ("carol", "prep"): "Pod/prep", ("dave", "short"): "StatefulSet/short"}
# the notebook: idle 00:00-05:59 and the 35 instants 06:00-06:34 at which its GPU's series is still seen;
# CPU: 60 core-minutes requested per hour, 29.5 used in the first (the counter starts at 00:00), 30 in the
# next five: 30.5 + 5 x 30 core-minutes unused
BY_WORKLOAD = {("alice", "Deployment/train"): BY_HAND["alice"], ("alice", "Pod/notebook"): (6 + 35 / 60, 180.5 / 60),
               ("carol", "CronJob/evals"): (0.0, 0.0), ("carol", "Pod/prep"): BY_HAND["carol"],
               ("dave", "StatefulSet/short"): BY_HAND["dave"]}


@pytest.mark.parametrize("honor_labels", [True, False], ids=["plain-labels", "exported-labels"])
def test_waste_per_workload_by_hand_and_by_the_reference(store_server, honor_labels):
    prom = store_server(replace(OWNED, honor_labels=honor_labels))
    config = cluster(prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), 5.0, by_workload=True)
    got = {(r.namespace, r.workload): (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    expected = reference_waste(OWNED, "jaguar", D, DAY.end.timestamp(), 60, workloads=WORKLOADS)
    assert got.keys() == expected.keys() == BY_WORKLOAD.keys()
    for key, measures in expected.items():
        assert measures == pytest.approx(BY_WORKLOAD[key], rel=1e-12), key
        assert got[key] == pytest.approx(measures, rel=1e-9), key
    # the namespace's waste is the sum over its workloads, and what the namespace queries measure
    by_namespace = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), 5.0)
    pd.testing.assert_frame_equal(waste_by_namespace(waste), by_namespace, rtol=1e-9)


def test_waste_per_workload_takes_the_controllers_usage_found(store_server):
    """The billing run's way: each pod's workload is the usage's (kube_pod_info and the owners not asked again),
    and gives the same waste."""
    prom = store_server(OWNED)
    config = cluster(prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    usage = collect_cluster(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), cost_labels=[])
    assert len(usage.pod_workloads) == 4  # one per 6-hour chunk
    asked: list[str] = []

    class Counting:
        def instant(self, query: str, at: float) -> list[dict]:
            asked.append(query)
            return source.instant(query, at)

        def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
            asked.append(query)
            return source.range(query, start, end, step)

        def buildinfo(self) -> tuple[dict, dict[str, str]]:
            return source.buildinfo()

    shared = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], Counting()), 5.0, by_workload=True, usage=usage)
    assert asked and not [query for query in asked if "kube_replicaset_owner" in query or "created_by_kind" in query]
    alone = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source), 5.0, by_workload=True)
    pd.testing.assert_frame_equal(shared, alone)
    assert dict(zip(zip(shared["namespace"], shared["workload"]), shared["idle_gpu_hours"])) == pytest.approx(
        {key: idle for key, (idle, _) in BY_WORKLOAD.items()}, rel=1e-9)


def test_a_busy_cluster_s_waste_asked_hour_by_hour_is_the_same(store_server):
    """Where the store lists so many pods at once that six hours of them would be too many samples for one query,
    waste is asked an hour at a time, and its pods' workloads in hour-long chunks: the same figures by hand."""
    prom = store_server(OWNED)
    config = cluster(prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    busy = replace(store_of(source, config, DAY), busiest=10_000_000)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], source, busy), 5.0, by_workload=True)
    got = {(r.namespace, r.workload): (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    assert got.keys() == BY_WORKLOAD.keys()
    for key, measures in BY_WORKLOAD.items():
        assert got[key] == pytest.approx(measures, rel=1e-9), key


def test_a_cluster_without_the_metrics_measures_nothing(store_server):
    jaguar = WORLD.clusters[0]
    bare = replace(WORLD, clusters=(replace(jaguar, pods=(jaguar.pods[2],)),))  # carol's pod without cAdvisor
    prom = store_server(bare)
    config = cluster(prom.url)
    waste = collect_waste(cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus)), 5.0)
    assert waste.empty  # neither DCGM nor cAdvisor: no waste is known, not all of the requests


def run_day(url: str, tmp_path: Path, *tables: str) -> list[pd.DataFrame]:
    """`billing run` of the day against the store at `url`; the ledger's tables asked for."""
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": url})
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    with create_engine(database).connect() as conn:
        return [pd.read_sql(f"select * from {table}", conn) for table in tables]


def test_the_run_keeps_waste_per_team_and_person_and_the_team_page_shows_it(prometheus_server, tmp_path):
    [waste] = run_day(prometheus_server(WORLD).url, tmp_path, "waste")
    got = {(r.namespace, r.team, r.owner): (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    # alice is on robotics, carol on nlp; dave is in no team of the directory
    expected = {("alice", "robotics", "alice"): BY_HAND["alice"], ("carol", "nlp", "carol"): BY_HAND["carol"],
                ("dave", "unallocated", "dave"): BY_HAND["dave"]}
    assert got.keys() == expected.keys()
    for key, measures in expected.items():
        assert got[key] == pytest.approx(measures, rel=1e-9), key

    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text())
    # no claims in this world: storage not measured, a dash
    assert page.tables["team-waste"] == [["Person", "GPU-h held unused", "CPU requested unused", "Storage claimed unused"],
                                         ["Alice Example alice", "24.00 GPU-h", "144.00 core-h", "–"]]
    admin = read_page((tmp_path / "reports" / "2026-11-20" / "index.html").read_text())
    assert ["unallocated", "0.00 GPU-h", "6.02 core-h", "–"] in admin.tables["waste"]


def test_the_run_keeps_waste_per_workload_adding_up_to_the_namespace(prometheus_server, tmp_path):
    workloads, namespaces = run_day(prometheus_server(OWNED).url, tmp_path, "workload_waste", "waste")
    got = {(r.namespace, r.team, r.workload): (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in workloads.itertuples()}
    teams = {"alice": "robotics", "carol": "nlp", "dave": "unallocated"}
    assert got.keys() == {(namespace, teams[namespace], workload) for namespace, workload in BY_WORKLOAD}
    for (namespace, workload), measures in BY_WORKLOAD.items():
        assert got[(namespace, teams[namespace], workload)] == pytest.approx(measures, rel=1e-9), workload
    keys = ["namespace", "team", "owner"]
    summed = workloads.groupby(keys)[["idle_gpu_hours", "unused_cpu_core_hours"]].sum().sort_index()
    pd.testing.assert_frame_equal(summed, namespaces.set_index(keys)[summed.columns].sort_index(), rtol=1e-12)


def test_waste_can_be_switched_off(prometheus_server, tmp_path):
    prom = prometheus_server(WORLD)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": prom.url})
    settings = yaml.safe_load(Path(config).read_text())
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump({**settings, "waste": {"enabled": False}}))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    with create_engine(database).connect() as conn:
        assert pd.read_sql("select count(*) as n from waste", conn)["n"][0] == 0
        assert pd.read_sql("select count(*) as n from chargeback", conn)["n"][0] > 0
