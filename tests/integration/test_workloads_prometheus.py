"""Workloads (top-level controllers) on a real Prometheus and a real VictoriaMetrics.

A hand-made cluster-day holds every owner chain SPEC.md's "Workloads and experiment labels" names; what
`Queries.workload_of` answers is checked against the chains as written down here.
"""

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.config import ClusterConfig
from billing.days import billing_day
from billing.prometheus import LivePrometheus
from billing.promql import Queries, chunks
from billing.stores import store_of
from fixtures.ksm import GIB, Cluster, Container, Controller, Node, Pod, World

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
    pod("quiet", "u-noseries", "", ""),  # no kube_pod_owner series at all
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
    "u-adopted": "Deployment/train", "u-moved": "Deployment/serve", "u-flip": "Deployment/new",
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
    answer = source.instant(Queries(config, ["nvidia_com_gpu"], chunk, store).workload_of(), chunk.last)
    got = [(s["metric"]["uid"], s["metric"]["workload"], s["metric"]["namespace"], float(s["value"][1]))
           for s in answer]
    assert sorted(uid for uid, *_ in got) == sorted(EXPECTED)  # one series per pod
    assert {uid: workload for uid, workload, *_ in got} == EXPECTED
    assert {uid: namespace for uid, _, namespace, _ in got} == {
        uid: {"u-ds": "kube-system", "u-other-ns": "bob"}.get(uid, "alice") for uid in EXPECTED}
    assert all(value == 1 for *_, value in got)
