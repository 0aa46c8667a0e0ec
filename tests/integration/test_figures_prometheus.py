"""Every figure a collector reads from the store passes one gate (billing/collect/figures.py, docs/spec.md "Figures
from the store"), fed NaN, +Inf, -Inf, a negative and an absurd value per family through a real Prometheus.

One Prometheus serves the whole module: each case is a cluster of its own in one world (selector cluster="<case>"),
one node of 8 H100s, one pod of team-robotics holding a GPU all day, and the case's one impossible figure. A figure
the bill needs refuses the day, naming the cluster, the day, the series, its labels, the value and the fix, and
nothing is written; Kueue's +Inf lending limit is how Kueue writes "unset" and bills; an impossible allocatable
figure where the bill needs no capacity (no pool, quota or unrequested share) bills the day, and says the capacity
is unknown and why.
"""

from __future__ import annotations

import html
import math
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import GPU_PRODUCT_LABEL, H100, Cluster, ClusterQueue, Container, Node, Pod, Quota, World
from fixtures.servers import require_program, start_prometheus, world_blocks
from tests.helpers.prometheus_jobs import write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
BEFORE, AFTER = D - 3600, D + 25 * 3600
GIB = 2**30
# the five impossible values, as the sentence shows them
VALUES = {"nan": (math.nan, "NaN"), "inf": (math.inf, "+Inf"), "minus-inf": (-math.inf, "-Inf"),
          "negative": (-1.0, "-1"), "absurd": (1e13, "1e+13")}


def pod(name: str, gpus: float = 1.0, phase: str = "Running", init: tuple[Container, ...] = (), cpu: float = 1.0,
        **more: object) -> Pod:
    return Pod("team-robotics", name, f"uid-{name}", "h100-1", BEFORE, ((BEFORE, phase),), AFTER,
               (*init, Container("main", cpu, GIB, gpus)), **more)  # type: ignore[arg-type]


def quotas(nominal: float = 8.0, usage: float = 1.0, lending_limit: float | None = None, role: str = "standalone",
           instance: str = "") -> tuple[ClusterQueue, ...]:
    return (ClusterQueue("robotics-cq", "research", (
        Quota("h100", "nvidia.com/gpu", ((BEFORE, nominal),), ((BEFORE, usage),), lending_limit),), role, instance),)


# two kueue-controller-manager replicas: the leader's 8 GPUs and a stale follower's 100; the same without replica_role
REPLICAS = (*quotas(role="leader", instance="10.244.2.9:8443"),
            *quotas(nominal=100.0, role="follower", instance="10.244.3.4:8443"))
NO_ROLES = (*quotas(role="", instance="10.244.2.9:8443"), *quotas(nominal=100.0, role="", instance="10.244.3.4:8443"))


def cluster(name: str, gpus: float = 8.0, pods: tuple[Pod, ...] = (), queues: tuple[ClusterQueue, ...] = (),
            scheduler: bool = False) -> Cluster:
    node = Node("h100-1", ((D - 86400, {GPU_PRODUCT_LABEL: H100}),), {"cpu": 64.0, "memory": 512.0 * GIB,
                                                                        "nvidia_com_gpu": gpus})
    return Cluster(name, (node,), (pod("train"), *pods), {"cluster": name}, kueue=queues, scheduler=scheduler)


# family -> how a cluster holds the impossible value `v`
FAMILIES = {
    "request": lambda name, v: cluster(name, pods=(pod("odd", gpus=v),)),
    "init": lambda name, v: cluster(name, pods=(pod("odd", init=(Container("stage", v, GIB, init=True),)),)),
    "pending": lambda name, v: cluster(name, pods=(pod("odd", gpus=v, phase="Pending"),)),
    # RuntimeClass overhead of a pod whose containers request no cpu: its request is the overhead
    "overhead": lambda name, v: cluster(name, pods=(pod("odd", cpu=0.0, overhead=(v, 0.0)),)),
    # kube-scheduler's figure of a pod with pod-level resources, which kube-state-metrics does not export
    "scheduler": lambda name, v: cluster(name, pods=(pod("odd", pod_resources=(v, GIB)),), scheduler=True),
    "allocatable": lambda name, v: cluster(name, gpus=v),
    "nominal": lambda name, v: cluster(name, queues=quotas(nominal=v)),
    "usage": lambda name, v: cluster(name, queues=quotas(usage=v)),
    "lending": lambda name, v: cluster(name, queues=quotas(lending_limit=v)),
}
CASES = [(family, case) for family in FAMILIES for case in VALUES]
WORLD = World(tuple(FAMILIES[family](f"{family}-{case}", VALUES[case][0]) for family, case in CASES)
              + (cluster("replicas", queues=REPLICAS), cluster("no-roles", queues=NO_ROLES)), BEFORE, AFTER)
KUEUE = {"queues": {"robotics-cq": {"team": "robotics", "namespaces": ["team-robotics"]}}, "flavors": {"h100": H100}}
# what each family's sentence names: the series and labels the figure came with
SERIES = {
    "request": ("kube_pod_container_resource_requests", 'pod="odd"', 'resource="nvidia_com_gpu"'),
    "init": ("kube_pod_container_resource_requests", 'pod="odd"', 'resource="cpu"'),
    "pending": ("kube_pod_container_resource_requests", 'pod="odd"', 'resource="nvidia_com_gpu"'),
    "overhead": ("kube_pod_container_resource_requests", 'pod="odd"', 'resource="cpu"'),
    # read per namespace and node at each instant (the pod is evaluated instant by instant)
    "scheduler": ("kube_pod_container_resource_requests", 'namespace="team-robotics"', 'node="h100-1"',
                  'resource="cpu"'),
    "allocatable": ("kube_node_status_allocatable", 'node="h100-1"', 'resource="nvidia_com_gpu"'),
    "nominal": ("kueue_cluster_queue_nominal_quota", 'cluster_queue="robotics-cq"', 'resource="nvidia.com/gpu"'),
    "usage": ("kueue_cluster_queue_resource_usage", 'cluster_queue="robotics-cq"', 'resource="nvidia.com/gpu"'),
    "lending": ("kueue_cluster_queue_lending_limit", 'cluster_queue="robotics-cq"', 'resource="nvidia.com/gpu"'),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, tsdb_cache: Path):
    """One Prometheus for the module: every case reads its own cluster of it."""
    require_program("prometheus")
    require_program("promtool")
    blocks = world_blocks(WORLD, tsdb_cache)
    server = start_prometheus(blocks, tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


def night(tmp_path: Path, url: str, name: str, **keys: object) -> str:
    """The config of one case's cluster (prices of tests/helpers/prometheus_jobs.py's jaguar), with `keys` on it."""
    path = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": url})
    settings = yaml.safe_load(Path(path).read_text())
    settings["clusters"][0].update(name=name, **keys)
    settings["clusters"][0]["prometheus"]["selector"] = f'cluster="{name}"'
    Path(path).write_text(yaml.safe_dump(settings))
    return path


def ledger(tmp_path: Path, table: str = "chargeback") -> pd.DataFrame:
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        return pd.read_sql(f"select * from {table}", conn)  # noqa: S608 (a table of this test)


def keys_of(family: str) -> dict[str, object]:
    """What the case's cluster bills: Kueue's quotas, shared unrequested capacity (so that the bill needs the
    allocatable figures), or bound Pending pods shown."""
    if family in ("nominal", "usage", "lending"):
        return {"kueue": KUEUE}
    return {"allocatable": {"unrequested": "share"}, "pending": {"bound_pending": "show"}}.get(family, {})


# Kueue's +Inf lending limit is its "unset"; a NaN, negative or -Inf init container's request is not seen: rule 3's
# max(app containers, largest init container) is the app containers' request, which is billed (docs/spec.md)
REFUSED = [c for c in CASES if c != ("lending", "inf") and c not in [("init", "nan"), ("init", "minus-inf"),
                                                                     ("init", "negative")]]


@pytest.mark.parametrize(("family", "case"), REFUSED)
def test_an_impossible_figure_refuses_the_day_and_writes_nothing(store, tmp_path, family, case):
    name = f"{family}-{case}"
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", night(tmp_path, store.url, name,
                                                                                       **keys_of(family))])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    series, *labels = SERIES[family]
    assert f"cluster {name} on 2026-11-20: {series}{{" in said
    assert all(label in said for label in labels), said
    value, shown = VALUES[case]
    if family == "allocatable":  # summed over the 360 instants of a 6-hour chunk
        shown = f"{shown if math.isinf(value) or math.isnan(value) else f'{value * 360:g}'} summed over 360 instants"
    assert f"}} is {shown}, " in said
    assert "then run the day again; nothing was billed" in said
    assert not (tmp_path / "ledger.db").exists() or ledger(tmp_path).empty


def test_kueues_infinite_lending_limit_is_unset_and_bills(store, tmp_path):
    """Kueue writes an unset lending limit as +Inf (pkg/cache: math.Inf(1) where LendingLimit is nil): robotics
    pays its 8 GPUs' quota all day (8 x 24 x 2.40 = 460.80) and is credited its 1 GPU used within it (24 x 2.40)."""
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config",
                                       night(tmp_path, store.url, "lending-inf", kueue=KUEUE)])
    assert result.exit_code == 0, result.output
    rows = ledger(tmp_path)
    assert rows.groupby("resource")["cost"].sum().to_dict() == pytest.approx(
        {"quota-gpu": 460.8, "gpu": 57.6, "credit-gpu": -57.6, "cpu": 24 * 0.012, "memory": 24 * 0.0015})


def test_of_kueue_replicas_the_leaders_figures_are_billed(store, tmp_path):
    """A stale follower reports 100 GPUs of quota: the leader's 8 are billed, 8 x 24 x 2.40 = 460.80 (the larger, as
    billed before, would be 100 x 24 x 2.40 = 5,760.00)."""
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config",
                                       night(tmp_path, store.url, "replicas", kueue=KUEUE)])
    assert result.exit_code == 0, result.output
    rows = ledger(tmp_path)
    assert rows.loc[rows["resource"] == "quota-gpu", "cost"].sum() == pytest.approx(460.8)


def test_kueue_replicas_that_disagree_without_a_role_refuse_the_day_with_both_figures(store, tmp_path):
    config = night(tmp_path, store.url, "no-roles", kueue=KUEUE)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert ('cluster no-roles: kueue-controller-manager replicas disagree on kueue_cluster_queue_nominal_quota'
            '{cohort="research", cluster_queue="robotics-cq", flavor="h100", resource="nvidia.com/gpu"} at '
            '2026-11-20T00:00:00+00:00: 8 from 10.244.2.9:8443 (no replica_role) and 100 from 10.244.3.4:8443 (no '
            "replica_role), and no replica_role says which is the leader's") in said
    assert not (tmp_path / "ledger.db").exists() or ledger(tmp_path).empty


@pytest.mark.parametrize("case", list(VALUES))
def test_an_impossible_allocatable_figure_the_bill_does_not_need_leaves_the_capacity_unknown(store, tmp_path, case,
                                                                                          caplog):
    """No pool, quota or shared unrequested capacity: the night bills (1 H100, 1 core, 1 GiB all day, at jaguar's
    2.40, 0.012 and 0.0015), writes no capacity for the cluster, and its log and the admins' page say why."""
    name = f"allocatable-{case}"
    with caplog.at_level("WARNING", logger="billing.collect.day"):
        result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", night(tmp_path, store.url, name)])
    assert result.exit_code == 0, result.output
    assert ledger(tmp_path)["cost"].sum() == pytest.approx(24 * (2.40 + 0.012 + 0.0015))
    assert ledger(tmp_path, "cluster_capacity").empty
    why = ledger(tmp_path, "cluster_days")["capacity_unknown"].tolist()
    assert len(why) == 1 and why[0].startswith('kube_node_status_allocatable{node="h100-1", resource="nvidia_com_gpu"} is ')
    assert why[0].endswith("; correct the node's status.allocatable or kube-state-metrics' export of it")
    assert any(f"cluster {name}: its capacity on 2026-11-20 is unknown: {why[0]}; its bill needs none" in record.getMessage()
               for record in caplog.records)
    page = html.unescape((tmp_path / "reports" / "2026-11-20" / "index.html").read_text())
    assert f"Capacity of cluster {name} unknown: {why[0]}" in page


def figures_line(tmp_path: Path, url: str, name: str, **keys: object) -> str:
    result = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", night(tmp_path, url, name, **keys)])
    return next(said for said in (" ".join(line.split()) for line in result.stdout.splitlines())
                if said.split()[1:3] == ["figures", name])


def test_check_fails_an_impossible_figure_the_bill_needs_and_warns_of_one_only_the_pages_show(store, tmp_path):
    needed = figures_line(tmp_path, store.url, "allocatable-nan", unrequested="share")
    assert needed.startswith('FAIL figures allocatable-nan cluster allocatable-nan on 2026-11-20: '
                             'kube_node_status_allocatable{node="h100-1", resource="nvidia_com_gpu"} is NaN '), needed
    shown = figures_line(tmp_path, store.url, "allocatable-nan")
    assert shown.startswith('WARN figures allocatable-nan on 2026-11-20 the capacity is unknown: '
                            'kube_node_status_allocatable{node="h100-1", resource="nvidia_com_gpu"} is NaN '), shown
    assert "the run bills the day without it" in shown
    quota = figures_line(tmp_path, store.url, "nominal-negative", kueue=KUEUE)
    assert quota.startswith('FAIL figures nominal-negative cluster nominal-negative on 2026-11-20: '
                            'kueue_cluster_queue_nominal_quota{'), quota
    # nominal quota, usage and the (unset) lending limit at each of the day's 1,440 instants: 4,320 figures
    good = figures_line(tmp_path, store.url, "replicas", kueue=KUEUE)
    assert good.startswith("ok figures replicas allocatable capacity and Kueue's quotas (4320 figures, one "
                           "replica's each) on 2026-11-20: every figure possible"), good


def test_check_names_both_figures_of_kueue_replicas_that_disagree(store, tmp_path):
    line = figures_line(tmp_path, store.url, "no-roles", kueue=KUEUE)
    assert line.startswith("FAIL figures no-roles cluster no-roles: kueue-controller-manager replicas disagree on "
                           "kueue_cluster_queue_nominal_quota{"), line
    assert "8 from 10.244.2.9:8443 (no replica_role) and 100 from 10.244.3.4:8443 (no replica_role)" in line
