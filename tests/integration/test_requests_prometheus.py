"""What the scheduler reserves, billed from a real Prometheus and VictoriaMetrics (docs/spec.md rule 3): native
sidecars, init containers and RuntimeClass overhead, each worked out by hand below and checked against
fixtures.reference as well; `requests: containers` keeps the older rule; `billing check` says what the rule adds
and which pods kube-state-metrics cannot tell billing about.

Before rule 3, the sidecar pod was billed 24 core-hours instead of 36 and the sandboxed one 24 instead of 114,
and the self-audit passed, because it shared the blind spot."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.collect.audit import audit_cluster
from billing.collect.capacity import collect_allocatable
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.usage import collect_cluster
from billing.collect.waste import collect_waste
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import A100, GPU_PRODUCT_LABEL, H100, Cluster, Container, Node, Pod, World
from fixtures.reference import reference_allocatable, reference_usage, reference_waste
from tests.helpers.prometheus_worlds import PRICES

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
GIB = 2**30


def at(hour: float) -> float:
    return D + hour * 3600


def pod(namespace: str, name: str, *containers: Container, start: float = -24, end: float = 48, **fields) -> Pod:
    """Running from `start` to `end` (hours of the day; all day by default), on the GPU node."""
    return Pod(namespace, name, f"uid-{name}", "gpu-1", at(start) - 120,
               ((at(start) - 120, "Pending"), (at(start), "Running"), (at(end), "Succeeded")), at(end) + 600,
               containers, **fields)


PODS = (
    # app 1 core, 1 GiB (using 0.2 cores) + an Istio sidecar 0.5 cores, 0.25 GiB (using 0.1): 1.5 cores x 24 h =
    # 36 core-hours, 1.25 GiB x 24 h = 30 GiB-hours; unused (1.5 - 0.3) x 24 = 28.8 core-hours.
    # App containers alone: 24 core-hours, 24 GiB-hours.
    pod("alice", "serve", Container("istio-proxy", 0.5, 0.25 * GIB, sidecar=True, cpu_used=0.1),
        Container("main", 1.0, 1 * GIB, cpu_used=0.2)),
    # a 4-core init container, a sidecar, app 1 core, a Kata overhead of 0.25 cores: max(1 + 0.5, 4 + 0.5) + 0.25
    # = 4.75 cores x 24 h = 114 core-hours; memory max(2 + 0.5, 1 + 0.5) + 0.5 = 3 GiB x 24 h = 72 GiB-hours.
    # App containers alone: 24 core-hours, 48 GiB-hours.
    pod("bob", "kata", Container("fetch", 4.0, 1 * GIB, init=True), Container("log", 0.5, 0.5 * GIB, sidecar=True),
        Container("main", 1.0, 2 * GIB), overhead=(0.25, 0.5 * GIB)),
    # no app requests at all, an init container of 2 cores, 8 GiB: 48 core-hours, 192 GiB-hours; alone: nothing
    pod("carol", "fetch", Container("prepare", 2.0, 8 * GIB, init=True), Container("main", 0.0, 0.0)),
    # a GPU pod whose init container asks more CPU, less memory: max(8, 16) = 16 cores x 24 h = 384 core-hours,
    # 64 GiB x 24 h = 1,536 GiB-hours, 24 H100-hours. Alone: 192 core-hours.
    pod("dave", "train", Container("unpack", 16.0, 16 * GIB, init=True), Container("main", 8.0, 64 * GIB, 1.0)),
    # app 2 cores + a 1-core sidecar, Running 12:00-18:00: 3 x 6 = 18 core-hours, (1 + 1) x 6 = 12 GiB-hours.
    # Alone: 12 core-hours, 6 GiB-hours.
    pod("erin", "notebook", Container("proxy", 1.0, 1 * GIB, sidecar=True), Container("main", 2.0, 1 * GIB),
        start=12, end=18),
)
NODES = (Node("gpu-1", ((D - 30 * 86400, {GPU_PRODUCT_LABEL: H100}),),
              {"cpu": 96.0, "memory": 1024.0 * GIB, "nvidia_com_gpu": 8.0}),)
WORLD = World((Cluster("jaguar", NODES, PODS, {"cluster": "jaguar"}),), D - 2 * 86400, D + 2 * 86400)

RESERVED = {("alice", "cpu"): 36.0, ("alice", "memory"): 30.0, ("bob", "cpu"): 114.0, ("bob", "memory"): 72.0,
            ("carol", "cpu"): 48.0, ("carol", "memory"): 192.0, ("dave", "cpu"): 384.0, ("dave", "memory"): 1536.0,
            ("dave", "gpu"): 24.0, ("erin", "cpu"): 18.0, ("erin", "memory"): 12.0}
CONTAINERS = {("alice", "cpu"): 24.0, ("alice", "memory"): 24.0, ("bob", "cpu"): 24.0, ("bob", "memory"): 48.0,
              ("dave", "cpu"): 192.0, ("dave", "memory"): 1536.0, ("dave", "gpu"): 24.0, ("erin", "cpu"): 12.0,
              ("erin", "memory"): 6.0}


def config(url: str, rule: str) -> ClusterConfig:
    return ClusterConfig(name="jaguar", prometheus={"url": url, "selector": 'cluster="jaguar"', "retries": 0},
                         prices=PRICES, requests=rule)


@pytest.mark.parametrize("rule, expected", [("pod", RESERVED), ("containers", CONTAINERS)])
def test_the_bill_is_what_the_scheduler_reserves_by_hand_and_by_the_reference(store_server, rule, expected):
    server = store_server(WORLD)
    cluster = config(server.url, rule)
    source = LivePrometheus("jaguar", cluster.prometheus)
    usage = collect_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source))
    got = usage.usage.groupby(["namespace", "resource"])["quantity"].sum().to_dict()
    assert got == pytest.approx(expected, rel=1e-9)
    reference = reference_usage(WORLD, "jaguar", D, DAY.end.timestamp(), 60, requests=rule)
    assert {(ns, resource): hours for (ns, resource, _), hours in reference.items()} == pytest.approx(expected, rel=1e-9)
    # the self-audit recomputes every pod by the same rule instant by instant, and agrees
    assert audit_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source), usage.running, usage.exact, 10).pods == len(PODS)


def test_unused_cpu_counts_the_sidecar_as_billing_does(store_server):
    server = store_server(WORLD)
    cluster = config(server.url, "pod")
    waste = collect_waste(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", cluster.prometheus)), 5.0)
    unused = waste.set_index("namespace")["unused_cpu_core_hours"].to_dict()
    assert unused["alice"] == pytest.approx(28.8, rel=1e-9)  # worked out above
    expected = reference_waste(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    assert unused == pytest.approx({namespace: measures[1] for namespace, measures in expected.items()}, rel=1e-9)


def check_line(prometheus_server, write_config, world: World, rule: str = "pod",
               dependency: str = "requests jaguar") -> str:
    server = prometheus_server(world)
    path = write_config(clusters=[{"name": "jaguar", "prometheus": {"url": server.url, "selector": 'cluster="jaguar"'},
                                   "prices": PRICES}], requests=rule)
    result = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", str(path)])
    return next(line for line in result.stdout.splitlines() if line[6:26].strip() == dependency)


def test_check_says_what_the_rule_adds_per_resource_and_term(prometheus_server, write_config):
    # cpu: 600 core-hours reserved against 252 for app containers alone (RESERVED and CONTAINERS above): +348,
    # of which init containers (bob 72 + carol 48 + dave 192 = 312), sidecars (alice 12 + bob 12 + erin 6 = 30)
    # and overhead (bob 6); the day's instants sampled every 5 minutes lose nothing on this world, whose
    # changes fall on whole hours.
    line = check_line(prometheus_server, write_config, WORLD)
    assert line.startswith("ok    requests jaguar"), line
    assert ("requests: pod; adds to app containers' requests on 2026-11-20: cpu +348.00 core-h (+138.1% of 252.00): "
            "init containers 312.00, sidecars 30.00, overhead 6.00") in line
    # memory: 1,842 GiB-hours against 1,614: +228: init containers (carol 192), sidecars (alice 6 + bob 12 + erin 6
    # = 24), overhead (bob 12)
    assert "memory +228.00 GiB-h (+14.1% of 1,614.00): init containers 192.00, sidecars 24.00, overhead 12.00" in line
    assert "nvidia_com_gpu" not in line  # nothing added
    line = check_line(prometheus_server, write_config, WORLD, rule="containers")
    assert "requests: containers; would add (requests: pod) to app containers' requests on 2026-11-20: cpu +348.00" in line


def test_check_warns_of_pods_kube_state_metrics_cannot_tell_billing_about(prometheus_server, write_config):
    """kube-state-metrics older than v2.11 (sidecars without restart_policy) and a pod with pod-level resources:
    each a warning with what it means for the bill."""
    [jaguar] = WORLD.clusters
    pod_level = pod("frank", "pod-level", Container("main", 0.0, 0.0), pod_resources=(2.0, 4 * GIB))
    world = replace(WORLD, clusters=(replace(jaguar, pods=(*jaguar.pods, pod_level), sidecar_label=False),))
    line = check_line(prometheus_server, write_config, world)
    assert line.startswith("WARN  requests jaguar"), line
    assert ("3 Running pods had init containers running (native sidecars) but no kube_pod_init_container_info "
            "carries restart_policy: kube-state-metrics is older than v2.11.0") in line
    assert ("1 Running pods are Burstable or Guaranteed without any container requesting cpu or memory: they set "
            "pod-level resources") in line


def test_check_fails_a_day_on_which_running_pods_held_resource_claims_and_dcgm_has_no_dra_labels(prometheus_server,
                                                                                                 write_config):
    """A pod holding a GPU through a ResourceClaim, and dcgm-exporter without --kubernetes-enable-dra: the GPU
    would be billed nothing, so the preflight fails, as the run it refuses would say."""
    [jaguar] = WORLD.clusters
    claiming = pod("grace", "dra", Container("main", 1.0, 1 * GIB), resource_claims=("gpu",))
    world = replace(WORLD, clusters=(replace(jaguar, pods=(*jaguar.pods, claiming)),))
    line = check_line(prometheus_server, write_config, world, dependency="series jaguar")
    assert line.startswith("FAIL  series jaguar"), line
    assert ("on 2026-11-20: DCGM_FI_DEV_GPU_UTIL with dra_* labels is missing (pods held resource claims "
            "(Dynamic Resource Allocation), and GPUs held that way are in no container's requests: they would be "
            "billed nothing; run dcgm-exporter with --kubernetes-enable-dra (Helm: kubernetesDRA.enabled=true))") in line
    assert "resource claims" not in check_line(prometheus_server, write_config, world)  # said once, where it fails


# kube-scheduler's /metrics/resources scraped too: its own figure per pod, which has what kube-state-metrics cannot
# show. bob declares his init container before his sidecar, so the scheduler reserves max(1 + 0.5, 4 + 0) + 0.25 =
# 4.25 cores (102 core-hours), not the 4.75 of "every sidecar first" (memory stays max(2.5, 1) + 0.5 = 3 GiB).
SCHEDULED_PODS = (
    # pod-level resources of 2 cores, 4 GiB over a helper asking 0.5 cores, 1 GiB (using 0.5 cores): 48 core-hours,
    # 96 GiB-hours; unused (2 - 0.5) x 24 = 36 core-hours. kube-state-metrics alone: 12 core-hours, 24 GiB-hours.
    pod("frank", "pod-level", Container("main", 0.0, 0.0), Container("helper", 0.5, 1 * GIB, cpu_used=0.5),
        pod_resources=(2.0, 4 * GIB)),
    # pod-level resources only (1 core, 2 GiB), Running 06:00-12:00: 6 core-hours, 12 GiB-hours; alone: nothing
    pod("heidi", "slim", Container("main", 0.0, 0.0), pod_resources=(1.0, 2 * GIB), start=6, end=12),
)
[JAGUAR] = WORLD.clusters
SCHEDULED_WORLD = replace(WORLD, clusters=(replace(JAGUAR, pods=(*PODS, *SCHEDULED_PODS), scheduler=True),))
BY_SCHEDULER = {**RESERVED, ("bob", "cpu"): 102.0, ("frank", "cpu"): 48.0, ("frank", "memory"): 96.0,
                ("heidi", "cpu"): 6.0, ("heidi", "memory"): 12.0}


@pytest.mark.parametrize("honor_labels", [True, False])
def test_kube_schedulers_own_figures_bill_pod_level_resources_and_the_declared_order(store_server, honor_labels):
    world = replace(SCHEDULED_WORLD, honor_labels=honor_labels)
    server = store_server(world)
    cluster = config(server.url, "pod")
    source = LivePrometheus("jaguar", cluster.prometheus)
    usage = collect_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source))
    got = usage.usage.groupby(["namespace", "resource"])["quantity"].sum().to_dict()
    assert got == pytest.approx(BY_SCHEDULER, rel=1e-9)
    reference = reference_usage(SCHEDULED_WORLD, "jaguar", D, DAY.end.timestamp(), 60)  # the exporters' own labels
    assert {(ns, resource): hours for (ns, resource, _), hours in reference.items()} == pytest.approx(BY_SCHEDULER,
                                                                                                      rel=1e-9)
    pods = len(PODS) + len(SCHEDULED_PODS)
    assert audit_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source), usage.running, usage.exact, 10).pods == pods
    waste = collect_waste(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source), 5.0)
    unused = waste.set_index("namespace")["unused_cpu_core_hours"].to_dict()
    assert unused["frank"] == pytest.approx(36.0, rel=1e-9)  # worked out above
    expected = reference_waste(SCHEDULED_WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    assert unused == pytest.approx({namespace: measures[1] for namespace, measures in expected.items()}, rel=1e-9)


def test_requests_containers_reads_no_scheduler_figure(store_server):
    server = store_server(SCHEDULED_WORLD)
    cluster = config(server.url, "containers")
    usage = collect_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], LivePrometheus("jaguar", cluster.prometheus)))
    got = usage.usage.groupby(["namespace", "resource"])["quantity"].sum().to_dict()
    assert got == pytest.approx({**CONTAINERS, ("frank", "cpu"): 12.0, ("frank", "memory"): 24.0}, rel=1e-9)


def test_check_says_what_the_schedulers_figures_change(prometheus_server, write_config):
    # cpu: app containers 252 + frank's helper 12 = 264; rule 3 on kube-state-metrics adds init containers 312,
    # sidecars 30, overhead 6 (612 in all); the scheduler's figures make it 642: bob -12, frank +36, heidi +6 = +30.
    # memory: app 1,614 + 24 = 1,638; rule 3 adds 192 + 24 + 12 (1,866); the scheduler's: frank +72, heidi +12 = +84.
    line = check_line(prometheus_server, write_config, SCHEDULED_WORLD)
    assert line.startswith("ok    requests jaguar"), line  # heidi's pod-level resources have the scheduler's figure
    assert ("requests: pod, kube-scheduler's figures where seen; adds to app containers' requests on 2026-11-20: "
            "cpu +378.00 core-h (+143.2% of 264.00): init containers 312.00, sidecars 30.00, overhead 6.00, "
            "kube-scheduler's own figures 30.00") in line
    assert ("memory +312.00 GiB-h (+19.0% of 1,638.00): init containers 192.00, sidecars 24.00, overhead 12.00, "
            "kube-scheduler's own figures 84.00") in line


# GPUs held through Dynamic Resource Allocation, on an A100 node whose GPUs no device plugin offers: no container
# requests one, dcgm-exporter (--kubernetes-enable-dra) attributes each to the pods holding it.
DRA_NODE = Node("gpu-2", ((D - 30 * 86400, {GPU_PRODUCT_LABEL: A100}),), {"cpu": 96.0, "memory": 1024.0 * GIB},
                dra_gpus=4)


def on_dra_node(namespace: str, name: str, gpus: tuple[int, ...], start: float = -24, end: float = 48,
                busy: float = 60.0) -> Pod:
    """1 core, 4 GiB, Running from `start` to `end` (hours of the day) from its creation, holding `gpus` through a
    claim, `busy` percent utilised."""
    return Pod(namespace, name, f"uid-{name}", "gpu-2", at(start), ((at(start), "Running"), (at(end), "Succeeded")),
               at(end) + 600, (Container("main", 1.0, 4 * GIB),), resource_claims=("gpu",), dra_gpus=gpus,
               gpu_utilisation=((at(start), busy),))


DRA_PODS = (
    on_dra_node("ivan", "pretrain", (0, 1)),  # two GPUs all day: 48 A100-hours, 60 % busy
    # GPU 2 shared: infer-a alone 00:00-12:00 and 18:00-24:00, with infer-b 12:00-18:00: 12 + 6 / 2 + 6 = 21
    # GPU-hours for judy, 6 / 2 = 3 for mallory. Loaded as blocks (no staleness markers), infer-b's attribution,
    # last scraped at 17:59, stays visible for the 5-minute lookback: infer-a holds half of it at the instants
    # 18:00-18:04 too, 21 - 5 x 0.5 / 60 GPU-hours
    # (the shared GPU is 2 % busy: idle for both, each its share)
    on_dra_node("judy", "infer-a", (2,), busy=2.0),
    on_dra_node("mallory", "infer-b", (2,), start=12, end=18, busy=2.0),
)
DRA_WORLD = replace(WORLD, clusters=(replace(JAGUAR, nodes=(*NODES, DRA_NODE), pods=(*PODS, *DRA_PODS)),))
WITH_DRA = {**RESERVED, ("ivan", "gpu"): 48.0, ("judy", "gpu"): 21.0 - 5 * 0.5 / 60, ("mallory", "gpu"): 3.0,
            ("ivan", "cpu"): 24.0, ("ivan", "memory"): 96.0, ("judy", "cpu"): 24.0, ("judy", "memory"): 96.0,
            ("mallory", "cpu"): 6.0, ("mallory", "memory"): 24.0}


@pytest.mark.parametrize("honor_labels", [True, False])
def test_gpus_held_through_dra_are_billed_from_dcgm_exporters_attribution(store_server, honor_labels):
    server = store_server(replace(DRA_WORLD, honor_labels=honor_labels))
    cluster = config(server.url, "pod")
    source = LivePrometheus("jaguar", cluster.prometheus)
    gpu_resources = {"nvidia_com_gpu": 1.0, "gpu_nvidia_com": 1.0}  # as the configuration always has it
    usage = collect_cluster(cluster_day(cluster, DAY, 60, gpu_resources, source))
    got = usage.usage.groupby(["namespace", "resource"])["quantity"].sum().to_dict()
    assert got == pytest.approx(WITH_DRA, rel=1e-9)
    models = usage.usage[usage.usage["resource"] == "gpu"].groupby("namespace")["gpu_model"].unique().to_dict()
    assert {namespace: list(found) for namespace, found in models.items()} == {
        "dave": [H100], "ivan": [A100], "judy": [A100], "mallory": [A100]}  # priced by the node's model
    reference = reference_usage(DRA_WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    assert {(ns, resource): hours for (ns, resource, _), hours in reference.items()} == pytest.approx(WITH_DRA, rel=1e-9)
    pods = len(PODS) + len(DRA_PODS)
    assert audit_cluster(cluster_day(cluster, DAY, 60, gpu_resources, source), usage.running, usage.exact, 10).pods == pods
    # capacity: the H100 node's 8 allocatable GPUs, the A100 node's 4 offered through DRA (GPU 3 held by no one),
    # all day: 192 and 96 GPU-hours
    capacity = collect_allocatable(cluster_day(cluster, DAY, 60, gpu_resources, source))
    gpus = capacity[capacity["resource"] == "gpu"].set_index("gpu_model")["allocatable"].to_dict()
    assert gpus == pytest.approx({H100: 192.0, A100: 96.0}, rel=1e-9)
    expected = reference_allocatable(DRA_WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    assert gpus == pytest.approx({model: hours for (resource, model), hours in expected.items() if resource == "gpu"},
                                 rel=1e-9)
    # idle GPU-hours split the shared GPU as the bill does: judy's 20.96 as above; mallory's 3, and half of the
    # five lookback instants after 18:00 at which her series is still seen (idle counts what is seen)
    waste = collect_waste(cluster_day(cluster, DAY, 60, gpu_resources, source), 5.0).set_index("namespace")
    idle = waste.loc[["ivan", "judy", "mallory"], "idle_gpu_hours"].to_dict()
    assert idle == pytest.approx({"ivan": 0.0, "judy": 21.0 - 5 * 0.5 / 60, "mallory": 3.0 + 5 * 0.5 / 60}, rel=1e-9)
    expected_idle = reference_waste(DRA_WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    assert idle == pytest.approx({namespace: measures[0] for namespace, measures in expected_idle.items()
                                  if namespace in idle}, rel=1e-9)


def test_check_says_what_gpus_held_through_dra_add(prometheus_server, write_config):
    line = check_line(prometheus_server, write_config, DRA_WORLD)
    assert line.startswith("ok    requests jaguar"), line  # the claims' GPUs are attributed: no warning
    # 48 + 20.96 + 3, worked out above; sampled every 5 minutes, the lookback's 18:00 instant costs infer-a 2.5 minutes
    assert "; gpu_nvidia_com +71.96 GPU-h: GPUs held through DRA 71.96" in line


def test_on_a_live_store_a_shared_gpu_ends_at_its_holders_marker(live_store):
    """Filled as a live Prometheus fills itself, infer-b's attribution ends at its staleness marker at 18:00:
    judy pays the whole GPU from then on, 21 GPU-hours as worked out above, with no lookback left over."""
    world = replace(DRA_WORLD, staleness=True)
    server = live_store(world)
    cluster = config(server.url, "pod")
    gpu_resources = {"nvidia_com_gpu": 1.0, "gpu_nvidia_com": 1.0}
    usage = collect_cluster(cluster_day(cluster, DAY, 60, gpu_resources, LivePrometheus("jaguar", cluster.prometheus)), cost_labels=[])
    got = usage.usage.groupby(["namespace", "resource"])["quantity"].sum().to_dict()
    assert got == pytest.approx({**WITH_DRA, ("judy", "gpu"): 21.0}, rel=1e-9)
    reference = reference_usage(world, "jaguar", D, DAY.end.timestamp(), 60)
    assert {(ns, resource): hours for (ns, resource, _), hours in reference.items()} == pytest.approx(got, rel=1e-9)
    # the breakdown by workload has them too: each pod without a controller is its own workload
    gpus = usage.workloads[usage.workloads["resource"] == "gpu"].set_index(["namespace", "workload"])["quantity"]
    assert gpus.to_dict() == pytest.approx({("dave", "Pod/train"): 24.0, ("ivan", "Pod/pretrain"): 48.0,
                                            ("judy", "Pod/infer-a"): 21.0, ("mallory", "Pod/infer-b"): 3.0}, rel=1e-9)
