"""A family the bill reads, deleted from a real Prometheus: `billing run` refuses the day naming the family, the
cluster and the fix, the ledger keeps the rows of the day's previous run, and `billing check` fails the day in the
same words (billing/collect/preflight.py). Before the preflight, a day without kube_pod_status_phase was billed
"0 ledger rows, total cost 0.00" at coverage 1.0, exit 0.

One world with every family (GPU pods, init containers, ReplicaSets and Jobs, a GPU held through DRA) is billed
once; each family is then deleted (the admin API's delete_series, as a relabelling drop or --metric-denylist
would leave it) in a Prometheus of its own over the same blocks."""

from __future__ import annotations

import shutil
import urllib.parse
import urllib.request
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
from billing.days import billing_day
from fixtures.ksm import A100, GPU_PRODUCT_LABEL, Container, Node, Pod, make_world
from fixtures.servers import start_prometheus, world_blocks

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
GIB = 2**30
ADMIN_API = ("--web.enable-admin-api",)
TABLES = ("chargeback", "completed_days", "cluster_days", "cluster_capacity", "waste", "gpu_holdings", "workload_costs")
REFUSED = "; nothing was billed and the ledger keeps the day as it was"
DROPPED = "and no --metric-denylist or metric_relabel_configs rule may drop it"
RENAMED = ("a kube-state-metrics older than 2.1.0 (upgrade it) or a metric_relabel_configs rule dropping the label "
           "(labeldrop)")


def dra_world():
    """A day of 40 pods, and an A100 node whose GPUs NVIDIA's DRA driver offers, one held all day by a pod's claim."""
    world = make_world(5, D, pods=40, nodes=4, clusters=("jaguar",), day_seconds=86400)
    [jaguar] = world.clusters
    node = Node("gpu-dra", ((D - 86400, {GPU_PRODUCT_LABEL: A100}),), {"cpu": 32.0, "memory": 256.0 * GIB}, dra_gpus=2)
    holder = Pod("ivan", "pretrain", "uid-pretrain", "gpu-dra", D - 3600, ((D - 3600, "Running"),), D + 2 * 86400,
                 (Container("main", 1.0, 4 * GIB),), resource_claims=("gpu",), dra_gpus=(0,))
    return replace(world, clusters=(replace(jaguar, nodes=(*jaguar.nodes, node), pods=(*jaguar.pods, holder)),))


WORLD = dra_world()

# family deleted -> what the preflight says is missing, and its fix, as worked out from the world: every family is
# needed there (pods ran, with init containers, GPUs and owners; a pod held a claim), and each is missing alone
MISSING = {
    "kube_pod_status_phase": ("kube_pod_status_phase with the uid label",
                              f"billing tells pods apart by uid: look for {RENAMED}, {DROPPED}"),
    "kube_pod_container_resource_requests": (
        "kube_pod_container_resource_requests",
        f"kube-state-metrics must export pods (its --resources must include pods), {DROPPED}"),
    "kube_pod_info": ("kube_pod_info with the node label",
                      f"a pod's node gives its GPU model and pool: look for {RENAMED}, {DROPPED}"),
    "kube_pod_init_container_resource_requests": (
        "kube_pod_init_container_resource_requests",
        f"what the scheduler reserves counts init containers' requests (requests: pod); {DROPPED}"),
    "kube_pod_init_container_info": (
        "kube_pod_init_container_info",
        f"it tells native sidecars from init containers (requests: pod); {DROPPED}"),
    "kube_node_status_allocatable": (
        "kube_node_status_allocatable",
        f"kube-state-metrics must export nodes (its --resources must include nodes), {DROPPED}"),
    "kube_node_labels": ("kube_node_labels", "the day's coverage is measured by it: kube-state-metrics must export "
                                             f"nodes (its --resources must include nodes), {DROPPED}"),
    "kube_replicaset_owner": ("kube_replicaset_owner",
                              "workloads are broken down: a Deployment's pods would count as their ReplicaSet's; "
                              f"kube-state-metrics' --resources must include replicasets, {DROPPED}"),
    "kube_job_owner": ("kube_job_owner", "workloads are broken down: a CronJob's pods would count as their Job's; "
                                         f"kube-state-metrics' --resources must include jobs, {DROPPED}"),
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL with dra_* labels",
                             "pods held resource claims (Dynamic Resource Allocation), and GPUs held that "
                             "way are in no container's requests: they would be billed nothing; run dcgm-exporter "
                             "with --kubernetes-enable-dra (Helm: kubernetesDRA.enabled=true)"),
}


def write_config(directory: Path, url: str, ledger: Path) -> str:
    (directory / "directory.ldif").write_text("dn: dc=example,dc=org\nobjectClass: domain\ndc: example\n")
    path = directory / "billing.yaml"
    path.write_text(yaml.safe_dump({
        "database": f"sqlite:///{ledger}",
        "output_dir": str(directory / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"url": url, "retries": 0, "selector": 'cluster="jaguar"'},
                      "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0}}],
        "directory": {"ldif": str(directory / "directory.ldif")},
        "workloads": {"enabled": True},
    }))
    return str(path)


def invoke(command: str, path: str):
    return CliRunner().invoke(main, [command, "--date", "2026-11-20", "--config", path])


def ledger_state(ledger: Path) -> dict[str, pd.DataFrame]:
    with create_engine(f"sqlite:///{ledger}").connect() as conn:
        return {table: pd.read_sql(f"select * from {table}", conn) for table in TABLES}


@pytest.fixture(scope="module")
def billed(tmp_path_factory, tsdb_cache) -> Path:
    """A ledger in which the whole world's day was billed: the rows every refused run must leave as they are."""
    work = tmp_path_factory.mktemp("billed")
    server = start_prometheus(world_blocks(WORLD, tsdb_cache), work / "prometheus")
    try:
        result = invoke("run", write_config(work, server.url, work / "ledger.db"))
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    return work / "ledger.db"


def delete_series(url: str, family: str) -> None:
    query = urllib.parse.urlencode({"match[]": f'{{__name__="{family}"}}'})
    request = urllib.request.Request(f"{url}/api/v1/admin/tsdb/delete_series?{query}", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 204


@pytest.mark.parametrize("family", list(MISSING))
def test_a_deleted_family_refuses_the_run_and_fails_the_check_in_the_same_words(prometheus_server, billed,
                                                                               tmp_path, family):
    ledger = tmp_path / "ledger.db"
    shutil.copy(billed, ledger)
    before = ledger_state(ledger)
    assert not before["chargeback"].empty
    server = prometheus_server(WORLD, extra_args=ADMIN_API)
    delete_series(server.url, family)
    path = write_config(tmp_path, server.url, ledger)

    refused = invoke("run", path)

    what, fix = MISSING[family]
    said = f"on 2026-11-20: {what} is missing ({fix})"
    assert refused.exit_code == 1
    assert refused.output == f"billing: cluster jaguar: {said}{REFUSED}\n"
    for table, frame in ledger_state(ledger).items():
        pd.testing.assert_frame_equal(frame, before[table], obj=table)
    assert not (tmp_path / "reports" / "2026-11-20").exists()

    checked = invoke("check", path)
    assert checked.exit_code == 1
    line = next(line for line in checked.stdout.splitlines() if line[6:26].strip() == "series jaguar")
    assert line.startswith("FAIL  ") and line[28:].rsplit(" (", 1)[0] == said, line


def test_a_day_on_which_nodes_but_no_pods_were_listed_passes_and_is_billed_as_zero(prometheus_server, tmp_path):
    """No pod family is needed where kube-state-metrics listed no pod: the day is zero, and complete."""
    server = prometheus_server(make_world(5, D, pods=0, clusters=("jaguar",)))
    path = write_config(tmp_path, server.url, tmp_path / "ledger.db")
    checked = invoke("check", path)
    line = next(line for line in checked.stdout.splitlines() if line[6:26].strip() == "series jaguar")
    assert line.startswith("ok    ") and "every series the bill needs has samples on 2026-11-20" in line
    result = invoke("run", path)
    assert result.exit_code == 0, result.output
    assert ledger_state(tmp_path / "ledger.db")["cluster_days"]["coverage"].tolist() == [1.0]
