"""Workloads (top-level controllers) on a real Prometheus and a real VictoriaMetrics.

A hand-made cluster-day holds every owner chain docs/spec.md "Workloads and experiment labels" names; what
`Queries.workload_of` and `TopControllers` answer is checked against the chains as written down here.
"""

from dataclasses import replace
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from sqlalchemy import create_engine

from billing.charge.workloads import UNATTRIBUTED
from billing.collect.asking import TopControllers
from billing.collect.chunks import chunks
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.promql import Queries
from billing.collect.stores import store_of
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import GIB, Cluster, Container, Controller, Node, Pod, World, make_world
from fixtures.reference import reference_usage
from tests.helpers.prometheus_jobs import run, write_config
from tests.helpers.prometheus_worlds import UTC_DAY, world_of

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
T0 = DAY.start.timestamp()
NODE = Node("node-0", ((T0 - 86400, {"label_kubernetes_io_os": "linux"}),), {"cpu": 64.0, "memory": 256.0 * GIB})


def pod(name: str, uid: str, kind: str, owner: str, start_h: float = 1, end_h: float = 5,
        namespace: str = "alice", adopted: tuple | None = None) -> Pod:
    created, deleted = T0 + start_h * 3600, T0 + end_h * 3600
    return Pod(namespace, name, uid, "node-0", created, ((created, "Running"),), deleted,
               (Container("main", 1.0, GIB),), created_by_kind=kind, created_by_name=owner, adopted=adopted)


PODS = (
    # a Deployment rolled out at 03:00: its pods in two ReplicaSets
    pod("train-aaa-1", "u-rs1", "ReplicaSet", "train-aaa", 0, 3),
    pod("train-bbb-1", "u-rs2", "ReplicaSet", "train-bbb", 3, 6),
    pod("orphan-rs-1", "u-rs3", "ReplicaSet", "orphan-rs"),  # a ReplicaSet no Deployment controls
    pod("nightly-1-x", "u-cj", "Job", "nightly-1"),  # CronJob nightly -> Job nightly-1
    pod("once-x", "u-job", "Job", "once"),  # a Job of its own
    pod("db-0", "u-ss1", "StatefulSet", "db", 0, 2),  # re-created under its name with a new uid
    pod("db-0", "u-ss2", "StatefulSet", "db", 2, 6),
    pod("agent-x", "u-ds", "DaemonSet", "agent", namespace="kube-system"),
    pod("debug", "u-bare", "<none>", "<none>"),  # a bare pod
    pod("quiet", "u-noseries", "", ""),  # no controller labels on kube_pod_info, and no kube_pod_owner series
    # a bare pod adopted for its last hour: a controller wins over none, however short
    pod("late", "u-late", "<none>", "<none>", adopted=(T0 + 4 * 3600, "ReplicaSet", "train-bbb")),
    pod("train-aaa-1", "u-other-ns", "ReplicaSet", "train-aaa", namespace="bob"),  # same names, another namespace
    # adopted at 02:00 by a ReplicaSet whose selector matched it: its one controller
    pod("stray", "u-adopted", "<none>", "<none>", adopted=(T0 + 2 * 3600, "ReplicaSet", "train-bbb")),
    # orphaned by one Deployment's ReplicaSet at 02:00 and adopted by another's: the one it had longer wins
    pod("moved", "u-moved", "ReplicaSet", "train-aaa", adopted=(T0 + 2 * 3600, "ReplicaSet", "serve-ccc")),
    pod("flip-1", "u-flip", "ReplicaSet", "flip"),  # its ReplicaSet changed Deployment at 02:00: the newer one
)
CONTROLLERS = (
    Controller("ReplicaSet", "alice", "train-aaa", "Deployment", "train", T0 - 86400, T0 + 4 * 3600),
    Controller("ReplicaSet", "alice", "train-bbb", "Deployment", "train", T0 + 3 * 3600),
    Controller("ReplicaSet", "alice", "orphan-rs", "<none>", "<none>"),
    Controller("Job", "alice", "nightly-1", "CronJob", "nightly"),
    Controller("Job", "alice", "once", "<none>", "<none>"),
    Controller("ReplicaSet", "bob", "train-aaa", "<none>", "<none>"),
    Controller("ReplicaSet", "alice", "serve-ccc", "Deployment", "serve"),
    Controller("ReplicaSet", "alice", "flip", "Deployment", "old", T0 - 86400, T0 + 2 * 3600),
    Controller("ReplicaSet", "alice", "flip", "Deployment", "new", T0 + 2 * 3600),
)
EXPECTED = {
    "u-rs1": "Deployment/train", "u-rs2": "Deployment/train", "u-rs3": "ReplicaSet/orphan-rs",
    "u-cj": "CronJob/nightly", "u-job": "Job/once", "u-ss1": "StatefulSet/db", "u-ss2": "StatefulSet/db",
    "u-ds": "DaemonSet/agent", "u-bare": "Pod/debug", "u-noseries": "Pod/quiet", "u-other-ns": "ReplicaSet/train-aaa",
    "u-adopted": "Deployment/train", "u-late": "Deployment/train", "u-moved": "Deployment/serve", "u-flip": "Deployment/new",
}
WORLD = World((Cluster("jaguar", (NODE,), PODS, {"cluster": "jaguar"}, CONTROLLERS),), T0 - 3600, T0 + 7 * 3600)


@pytest.mark.parametrize("honor_labels", [True, False])
def test_every_pod_has_exactly_its_top_level_controller(store_server, honor_labels):
    server = store_server(replace(WORLD, honor_labels=honor_labels))
    config = ClusterConfig(name="jaguar", prometheus={"url": server.url, "selector": 'cluster="jaguar"', "retries": 0},
                           prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
    source = LivePrometheus("jaguar", config.prometheus)
    store = store_of(source, config, DAY)
    chunk = chunks(DAY, 60)[0]  # 00:00 to 06:00: every pod above lives in it
    queries = Queries(config, ["nvidia_com_gpu"], chunk, store)
    answer, tops = source.instant(queries.workload_of(), chunk.last), TopControllers(source, queries, chunk.last)
    got = [(s["metric"]["uid"], tops.workload(s["metric"]["namespace"], s["metric"]["workload"]),
            s["metric"]["namespace"], float(s["value"][1])) for s in answer]
    assert sorted(uid for uid, *_ in got) == sorted(EXPECTED)  # one series per pod
    assert {uid: workload for uid, workload, *_ in got} == EXPECTED
    assert {uid: namespace for uid, _, namespace, _ in got} == {
        uid: {"u-ds": "kube-system", "u-other-ns": "bob"}.get(uid, "alice") for uid in EXPECTED}
    assert all(value == 1 for *_, value in got)


COST_LABELS = ["experiment", "example.com/project"]


def usage_by_workload(config: ClusterConfig, world_day, gpus=("nvidia_com_gpu",)):
    source = LivePrometheus(config.name, config.prometheus)
    return collect_cluster(cluster_day(config, world_day, 60, list(gpus), source), cost_labels=COST_LABELS)


def test_workload_quantities_match_the_reference_by_owner_chain_and_add_up_to_the_namespaces(store_server):
    """A random day (Deployments rolled out over several ReplicaSets, CronJobs, re-created StatefulSet pods,
    DaemonSets, bare pods, pods without the labels) with a resized pod and a relabelled node (exact path)."""
    world = world_of(UTC_DAY, 300, clusters=("jaguar",))
    server = store_server(world)
    config = ClusterConfig(name="jaguar", prometheus={"url": server.url, "selector": 'cluster="jaguar"', "retries": 0},
                           prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
    collected = usage_by_workload(config, UTC_DAY)
    assert collected.exact  # the exact path was taken too
    keys = ["namespace", "resource", "gpu_model", "workload", "labels"]
    got = collected.workloads.groupby(keys)["quantity"].sum().to_dict()
    expected = {k: v for k, v in reference_usage(world, "jaguar", UTC_DAY.start.timestamp(), UTC_DAY.end.timestamp(),
                                                 60, cost_labels=COST_LABELS).items() if v}
    assert sorted(got) == sorted(expected)
    for key, quantity in expected.items():
        assert got[key] == pytest.approx(quantity, rel=1e-9), key
    workloads = {workload.split("/")[0] for _, _, _, workload, _ in got}
    assert {"Deployment", "ReplicaSet", "CronJob", "Job", "StatefulSet", "DaemonSet", "Pod"} <= workloads
    assert any('"experiment": ""' in labels for *_, labels in got)
    assert any('"example.com/project": "atlas"' in labels for *_, labels in got)
    # the namespace usage is the sum of its workloads', per every column it has
    columns = ["namespace", "resource", "gpu_model", "priority_class", "pool"]
    summed = collected.workloads.groupby(columns)["quantity"].sum()
    namespaces = collected.usage.set_index(columns)["quantity"]
    assert sorted(summed.index) == sorted(namespaces.index)
    for key, quantity in namespaces.items():
        assert summed[key] == pytest.approx(quantity, rel=1e-12), key


def test_re_parented_and_adopted_pods_are_billed_to_one_workload_each(store_server):
    server = store_server(WORLD)
    config = ClusterConfig(name="jaguar", prometheus={"url": server.url, "selector": 'cluster="jaguar"', "retries": 0},
                           prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
    collected = usage_by_workload(config, DAY)
    got = collected.workloads.groupby(["namespace", "resource", "workload"])["quantity"].sum().to_dict()
    # hand-worked: 1 core and 1 GiB while Running and for the 5 minutes a deleted pod's last sample stays visible
    linger = 5 / 60
    # Deployment/train: rs1 00:00-03:00, rs2 03:00-06:00, adopted and late 01:00-05:00 each
    assert got[("alice", "cpu", "Deployment/train")] == pytest.approx(3 + 3 + 4 + 4 + 4 * linger, rel=1e-9)
    assert got[("alice", "memory", "Deployment/serve")] == pytest.approx(4 + linger, rel=1e-9)  # moved, 01:00-05:00
    assert got[("alice", "cpu", "StatefulSet/db")] == pytest.approx(2 + 4 + 2 * linger, rel=1e-9)
    assert got[("alice", "cpu", "Pod/quiet")] == pytest.approx(4 + linger, rel=1e-9)
    assert sum(got.values()) == pytest.approx(2 * (56 + 15 * linger), rel=1e-9)  # 15 pods, 56 hours in all


def test_a_nights_workload_rows_add_up_to_its_ledger_and_match_the_reference(prometheus_server, tmp_path):
    """`billing run` with two cost labels, a person on two teams and a reserved-free day: every workload row
    comes from the reference's owner chains, and they sum to the chargeback rows exactly (1e-9)."""
    world = make_world(3, DAY.start.timestamp(), pods=200, clusters=("jaguar", "ibis"))
    jaguar, ibis = prometheus_server(world), prometheus_server(world)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    path = write_config(tmp_path, database, {"jaguar": jaguar.url, "ibis": ibis.url})
    config = yaml.safe_load(Path(path).read_text())
    config["cost_labels"] = COST_LABELS
    config["clusters"][1]["unrequested"] = "share"  # unrequested-* rows: parts of no workload
    Path(path).write_text(yaml.safe_dump(config))
    result = run(path)
    assert result.exit_code == 0, result.output
    with create_engine(database).connect() as conn:
        rows = pd.read_sql("select * from chargeback", conn)
        parts = pd.read_sql("select * from workload_costs", conn)
    keys = ["cluster", "namespace", "team", "resource", "gpu_model"]
    summed = parts.groupby(keys)[["quantity", "cost"]].sum()
    whole = rows.groupby(keys)[["quantity", "cost"]].sum()
    assert sorted(summed.index) == sorted(whole.index)
    for key in whole.index:
        for amount in ("quantity", "cost"):
            assert summed.loc[key, amount] == pytest.approx(whole.loc[key, amount], rel=1e-9), (key, amount)
    assert set(parts.loc[parts["resource"].str.startswith("unrequested-"), "workload"]) == {UNATTRIBUTED}
    assert not parts.duplicated(["cluster", "namespace", "team", "workload", "labels", "resource", "gpu_model"]).any()
    # the workloads' quantities, over all teams, are the reference's
    for cluster in ("jaguar", "ibis"):
        expected = {k: v for k, v in reference_usage(world, cluster, DAY.start.timestamp(), DAY.end.timestamp(), 60,
                                                     cost_labels=COST_LABELS).items() if v}
        mine = parts[(parts["cluster"] == cluster) & parts["resource"].isin(["cpu", "memory", "gpu"])]
        got = mine.groupby(["namespace", "resource", "gpu_model", "workload", "labels"])["quantity"].sum().to_dict()
        assert sorted(got) == sorted(expected)
        for key, quantity in expected.items():
            assert got[key] == pytest.approx(quantity, rel=1e-9), key
