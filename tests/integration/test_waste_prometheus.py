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
from billing.config import ClusterConfig
from billing.days import billing_day
from billing.prometheus import LivePrometheus
from billing.waste import collect_waste
from fixtures.ksm import GPU_PRODUCT_LABEL, H100, Cluster, Container, Node, Pod, World
from fixtures.reference import reference_waste
from tests.html_tables import read_page
from tests.integration.test_job_prometheus import write_config

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
    waste = collect_waste(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus), below=5.0)
    got = {r.namespace: (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    expected = reference_waste(WORLD, "jaguar", D, DAY.end.timestamp(), 60, below=5.0)
    assert got.keys() == expected.keys() == BY_HAND.keys()
    for namespace, measures in expected.items():
        assert measures == pytest.approx(BY_HAND[namespace], rel=1e-12), namespace
        assert got[namespace] == pytest.approx(measures, rel=1e-9), namespace


def test_replicated_series_are_counted_once(store_server):
    """An HA Prometheus pair's two copies of every series (prometheus_replica) neither halve the unused CPU
    (usage counted twice) nor double the idle GPUs."""
    [jaguar] = WORLD.clusters
    replicas = tuple(replace(jaguar, extra_labels={**jaguar.extra_labels, "prometheus_replica": name})
                     for name in ("prometheus-0", "prometheus-1"))
    prom = store_server(replace(WORLD, clusters=replicas))
    config = cluster(prom.url)
    waste = collect_waste(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus), below=5.0)
    got = {r.namespace: (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    assert got.keys() == BY_HAND.keys()
    for namespace, measures in BY_HAND.items():
        assert got[namespace] == pytest.approx(measures, rel=1e-9), namespace


def test_a_cluster_without_the_metrics_measures_nothing(store_server):
    jaguar = WORLD.clusters[0]
    bare = replace(WORLD, clusters=(replace(jaguar, pods=(jaguar.pods[2],)),))  # carol's pod without cAdvisor
    prom = store_server(bare)
    config = cluster(prom.url)
    waste = collect_waste(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", config.prometheus), below=5.0)
    assert waste.empty  # neither DCGM nor cAdvisor: no waste is known, not all of the requests


def test_the_run_keeps_waste_per_team_and_person_and_the_team_page_shows_it(prometheus_server, tmp_path):
    prom = prometheus_server(WORLD)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": prom.url})
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output

    with create_engine(database).connect() as conn:
        waste = pd.read_sql("select * from waste", conn)
    got = {(r.namespace, r.team, r.owner): (r.idle_gpu_hours, r.unused_cpu_core_hours) for r in waste.itertuples()}
    # alice is on robotics, carol on nlp; dave is in no team of the directory
    expected = {("alice", "robotics", "alice"): BY_HAND["alice"], ("carol", "nlp", "carol"): BY_HAND["carol"],
                ("dave", "unallocated", "dave"): BY_HAND["dave"]}
    assert got.keys() == expected.keys()
    for key, measures in expected.items():
        assert got[key] == pytest.approx(measures, rel=1e-9), key

    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text())
    assert page.tables["team-waste"] == [["Person", "Idle GPU-hours", "Unused CPU"],
                                         ["alice", "24.00 GPU-h", "144.00 core-h"]]
    admin = read_page((tmp_path / "reports" / "2026-11-20" / "index.html").read_text())
    assert ["unallocated", "0.00 GPU-h", "6.02 core-h"] in admin.tables["waste"]


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
