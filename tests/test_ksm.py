"""fixtures.ksm: the series a world exports and their OpenMetrics text."""

import re
from collections import defaultdict
from dataclasses import replace

import pytest

from fixtures.ksm import (
    A100,
    GPU_PRODUCT_LABEL,
    H100,
    PHASES,
    Cluster,
    Container,
    Controller,
    Node,
    Pod,
    World,
    block_windows,
    make_world,
    pod_requests,
    scrape_times,
    series,
    write_openmetrics,
)

T0 = 1_795_132_800.0  # 2026-11-20 00:00 UTC, a multiple of 2 h
GIB = 2**30


def tiny_world(**world_kw) -> World:
    node = Node("n1", ((T0 - 86400, {GPU_PRODUCT_LABEL: A100}), (T0 + 600, {GPU_PRODUCT_LABEL: H100})),
                {"cpu": 8, "memory": 64 * GIB, "nvidia_com_gpu": 1})
    p = Pod("alice", "p", "u1", "n1", created=T0 + 60, deleted=T0 + 900, scheduled=T0 + 180,
            phases=((T0 + 60, "Pending"), (T0 + 300, "Running"), (T0 + 600, "Succeeded")),
            containers=(Container("init", 4, GIB, init=True), Container("main", 0.5, 2 * GIB, 1),
                        Container("side", 0.1, 0)))
    return World((Cluster("jaguar", (node,), (p,), {"cluster": "jaguar"}),), T0, T0 + 1200, **world_kw)


def by_key(world: World) -> dict:
    return {(name, tuple(sorted(labels.items()))): samples for name, labels, samples in series(world)}


def find(world: World, name: str, **match) -> list[tuple[dict, list]]:
    return [(labels, samples) for n, labels, samples in series(world)
            if n == name and all(labels.get(k) == v for k, v in match.items())]


def test_every_series_carries_ksm_and_cluster_labels():
    for _, labels, _ in series(tiny_world()):
        assert labels["job"] == "kube-state-metrics" and labels["instance"] == "ksm:8080"
        assert labels["cluster"] == "jaguar"


def test_phase_series_one_per_phase_over_the_pod_life():
    got = {labels["phase"]: samples for labels, samples in find(tiny_world(), "kube_pod_status_phase")}
    assert set(got) == set(PHASES)
    running = got["Running"]
    assert running[0] == (T0 + 60, 0) and running[-1] == (T0 + 840, 0)  # created inclusive, deleted exclusive
    assert [ts for ts, v in running if v == 1] == [T0 + 300, T0 + 360, T0 + 420, T0 + 480, T0 + 540]
    assert all(v == 0 for _, v in got["Unknown"])


def test_requests_only_for_positive_requests_and_init_containers_apart():
    w = tiny_world()
    main = {(lab["resource"], lab["node"]): s for lab, s in find(w, "kube_pod_container_resource_requests")}
    # side requests 0 memory -> no series; the node label is "" until scheduled at +180.
    assert set(main) == {("cpu", ""), ("cpu", "n1"), ("memory", ""), ("memory", "n1"),
                         ("nvidia_com_gpu", ""), ("nvidia_com_gpu", "n1")}
    assert [lab["container"] for lab, _ in find(w, "kube_pod_container_resource_requests", resource="memory")] \
        == ["main", "main"]
    assert find(w, "kube_pod_container_resource_requests", resource="memory", node="n1")[0][1][0] == (T0 + 180, 2 * GIB)
    units = {lab["resource"]: lab["unit"] for lab, _ in find(w, "kube_pod_container_resource_requests")}
    assert units == {"cpu": "core", "memory": "byte", "nvidia_com_gpu": "integer"}
    init = find(w, "kube_pod_init_container_resource_requests")
    assert {lab["container"] for lab, _ in init} == {"init"}


def test_pod_info_has_two_series_around_scheduling():
    info = find(tiny_world(), "kube_pod_info")
    assert [(lab["node"], s[0][0], s[-1][0]) for lab, s in info] == [("", T0 + 60, T0 + 120), ("n1", T0 + 180, T0 + 840)]
    assert info[0][0]["host_ip"] == "" and info[1][0]["host_ip"] != ""


def test_node_label_change_starts_a_new_series_and_stops_the_old():
    labels = find(tiny_world(), "kube_node_labels")
    assert [(lab[GPU_PRODUCT_LABEL], s[0][0], s[-1][0]) for lab, s in labels] == [
        (A100, T0, T0 + 540), (H100, T0 + 600, T0 + 1140)]


def test_gaps_skip_scrapes():
    w = tiny_world(gaps=((T0 + 300, T0 + 420),))
    assert scrape_times(w) == [T0 + i * 60 for i in range(20) if i not in (5, 6)]
    for _, _, samples in series(w):
        assert not {T0 + 300, T0 + 360} & {ts for ts, _ in samples}


def parse_openmetrics(paths) -> dict:
    """Tiny OpenMetrics reader for the subset write_openmetrics produces."""
    line_re = re.compile(r'^([a-zA-Z_]+)\{(.*)\} (\S+) (\S+)$')
    label_re = re.compile(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"')
    unescape = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
    out = defaultdict(list)
    for path in paths:
        text = path.read_text()
        assert text.endswith("# EOF\n") and text.count("# EOF") == 1
        families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
        assert len(families) == len(set(families)), "a family appears twice in one file"
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            name, labels, value, ts = line_re.match(line).groups()
            parsed = tuple(sorted((k, re.sub(r'\\[\\"n]', lambda m: unescape[m.group()], v))
                                  for k, v in label_re.findall(labels)))
            out[(name, parsed)].append((float(ts), float(value)))
    return out


def test_openmetrics_round_trips_and_splits_per_two_hours(tmp_path):
    node = Node("weird", ((T0 - 86400, {"label_note": 'say "hi"\\ \nbye'}),), {"cpu": 1.5})
    p = Pod("bob", "long", "u2", "weird", T0 - 3600, ((T0 - 3600, "Running"),), float("inf"),
            (Container("main", 0.25, 3 * GIB),))
    w = World((Cluster("c", (node,), (p,), {}),), T0 - 1800, T0 + 4 * 7200 + 30, scrape_interval=15.5)
    paths = write_openmetrics(w, tmp_path)
    # Windows: [T0-2h, T0), [T0, T0+2h) ... [T0+8h, T0+10h): 6 files.
    assert [p.name for p in paths] == [f"ksm-{int(T0) + k * 7200}.om" for k in range(-1, 5)]
    assert parse_openmetrics(paths) == by_key(w)
    for path in paths:
        window = int(path.stem.split("-")[1])
        assert all(window <= ts < window + 7200 for samples in parse_openmetrics([path]).values() for ts, _ in samples)


def test_openmetrics_of_some_windows_is_those_windows_of_the_whole(tmp_path):
    # a big world is written and loaded a window at a time: together the pieces are the whole, once
    w = make_world(3, T0, pods=8, utilisation=True)
    windows = block_windows(w)
    assert windows == sorted({int(t // 7200) for t in scrape_times(w)}) and len(windows) == 14
    whole = parse_openmetrics(write_openmetrics(w, tmp_path / "whole"))
    pieces = [write_openmetrics(w, tmp_path / f"w{n}", [window]) for n, window in enumerate(windows)]
    assert all(len(paths) == 1 and paths[0].name == f"ksm-{window * 7200}.om" for paths, window in zip(pieces, windows))
    assert parse_openmetrics([path for paths in pieces for path in paths]) == whole
    # one-hour windows (the 250,000-pod day's, for disk) are the same whole in twice as many files
    hours = block_windows(w, 3600)
    assert len(hours) == 26 and {hour // 2 for hour in hours} == set(windows)
    halves = [write_openmetrics(w, tmp_path / f"h{n}", [hour], 3600) for n, hour in enumerate(hours)]
    assert all(paths[0].name == f"ksm-{hour * 3600}.om" for paths, hour in zip(halves, hours))
    assert parse_openmetrics([path for paths in halves for path in paths]) == whole


def test_make_world_is_deterministic_and_sized():
    a, b = make_world(3, T0, pods=300), make_world(3, T0, pods=300)
    assert a == b
    assert a != make_world(4, T0, pods=300)
    assert len(a.clusters[0].pods) == 300
    assert len({(p.namespace, p.name, p.uid) for p in a.clusters[0].pods}) == 300


def test_make_world_has_the_interesting_cases():
    w = make_world(5, T0, pods=2000, clusters=("jaguar", "ibis"))
    assert [c.extra_labels for c in w.clusters] == [{"cluster": "jaguar"}, {"cluster": "ibis"}]
    pods = w.clusters[0].pods
    end = T0 + 86400
    phases = {ph for p in pods for _, ph in p.phases}
    assert phases == set(PHASES)
    assert any(p.created < T0 < p.deleted for p in pods) and any(p.created < end < p.deleted for p in pods)
    assert any(p.scheduled and p.scheduled > p.created for p in pods)
    assert any(c.init for p in pods for c in p.containers)
    assert any(sum(not c.init for c in p.containers) > 1 for p in pods)
    assert any(c.resizes for p in pods for c in p.containers)
    names = [(p.namespace, p.name) for p in pods]
    assert len(set(names)) < len(names)  # a StatefulSet pod re-created with a new uid
    assert {"alice", "team-robotics", "kube-system"} <= {p.namespace for p in pods}
    models = [labels.get(GPU_PRODUCT_LABEL) for n in w.clusters[0].nodes for _, labels in n.labels]
    assert {H100, A100, None} <= set(models)
    assert any(len(n.labels) > 1 for n in w.clusters[0].nodes)


@pytest.mark.parametrize("phases, error", [(((0, "Runing"),), "unknown phase"), ((), "no phases"),
                                           (((5, "Running"), (1, "Pending")), "not in time order")])
def test_bad_phases_are_rejected(phases, error):
    with pytest.raises(ValueError, match=error):
        Pod("a", "p", "u", "n", 0, phases, 10, ())


def test_a_scrape_without_honor_labels_renames_the_exporters_labels():
    world = tiny_world(honor_labels=False)
    requests = find(world, "kube_pod_container_resource_requests", exported_container="main", resource="cpu",
                    exported_node="n1")
    assert len(requests) == 1
    labels = requests[0][0]
    assert (labels["exported_namespace"], labels["exported_pod"], labels["exported_node"]) == ("alice", "p", "n1")
    assert (labels["namespace"], labels["container"]) == ("monitoring", "kube-state-metrics")  # the exporter's own
    phase = find(world, "kube_pod_status_phase", exported_pod="p", phase="Running")[0][0]
    assert "exported_node" not in phase and phase["node"] == "node-0000"  # it had no node: the target's is plain
    plain = {(name, len(samples)) for name, _, samples in series(tiny_world())}
    assert {(name, len(samples)) for name, _, samples in series(world)} == plain  # same samples, other labels


def test_allocatable_changes_and_dcgm_series_of_mig_instances():
    # 16 replicas until T0 + 600, then 8; a pod holding two 1g.10gb slices, idle (0%)
    node = Node("ts", ((T0 - 86400, {}),), {"nvidia_com_gpu_shared": 16}, allocatable_changes=((T0 + 600, {
        "nvidia_com_gpu_shared": 8}),))
    p = Pod("alice", "p", "u1", "ts", created=T0, deleted=T0 + 900, phases=((T0, "Running"),),
            containers=(Container("main", 1, GIB, 2, gpu_resource="nvidia_com_mig_1g_10gb"),),
            gpu_utilisation=((T0, 0.0),))
    w = World((Cluster("jaguar", (node,), (p,)),), T0, T0 + 1200)
    [(_, allocatable)] = find(w, "kube_node_status_allocatable")
    assert [v for _, v in allocatable] == [16] * 10 + [8] * 10
    instances = find(w, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert len(instances) == 2 and {labels["GPU_I_PROFILE"] for labels, _ in instances} == {"1g.10gb"}
    assert len({labels["GPU_I_ID"] for labels, _ in instances}) == 2
    assert all(v == 0.0 for _, samples in instances for _, v in samples)
    # no utilisation for MIG instances in GPU_UTIL: a 0 per instance, labelled as such; no whole-GPU series
    assert sorted(bool(labels.get("GPU_I_ID")) for labels, _ in find(w, "DCGM_FI_DEV_GPU_UTIL")) == [True, True]


def test_owners_labels_and_controllers_as_kube_state_metrics_exports_them():
    node = Node("n1", ((T0 - 86400, {}),), {"cpu": 8})
    running = ((T0, "Running"),)
    pods = (Pod("alice", "w-1", "u1", "n1", T0, running, T0 + 600, (), created_by_kind="Job", created_by_name="w",
                labels=(("experiment", "x1"), ("example.com/project", "p")), adopted=(T0 + 300, "ReplicaSet", "r")),
            Pod("alice", "bare", "u2", "n1", T0, running, T0 + 600, ()),
            Pod("alice", "silent", "u3", "n1", T0, running, T0 + 600, (), created_by_kind=""))
    controllers = (Controller("Job", "alice", "w", "CronJob", "nightly", T0, T0 + 600),
                   Controller("ReplicaSet", "alice", "r", "<none>", "<none>", T0, T0 + 600))
    world = World((Cluster("jaguar", (node,), pods, {}, controllers),), T0, T0 + 1200)
    owners = {(labels["uid"], labels["owner_kind"], labels["owner_name"], labels["owner_is_controller"]):
              [ts for ts, _ in samples] for labels, samples in find(world, "kube_pod_owner")}
    assert owners == {("u1", "Job", "w", "true"): [T0 + 60 * i for i in range(5)],
                      ("u1", "ReplicaSet", "r", "true"): [T0 + 60 * i for i in range(5, 10)],
                      ("u2", "<none>", "<none>", "<none>"): [T0 + 60 * i for i in range(10)]}  # u3: no series
    [(labels, _)] = find(world, "kube_pod_labels", uid="u1")
    assert labels["label_experiment"] == "x1" and labels["label_example_com_project"] == "p"
    assert "label_experiment" not in find(world, "kube_pod_labels", uid="u2")[0][0]
    [(job, _)] = find(world, "kube_job_owner")
    assert (job["job_name"], job["owner_kind"], job["owner_name"], job["owner_is_controller"]) == \
        ("w", "CronJob", "nightly", "true")
    [(replicaset, _)] = find(world, "kube_replicaset_owner")
    assert (replicaset["replicaset"], replicaset["owner_kind"], replicaset["owner_is_controller"]) == \
        ("r", "<none>", "<none>")


def test_kube_scheduler_reserves_in_declared_order_with_pod_level_resources_and_overhead():
    # By hand, Kubernetes' PodRequests: app 1 core; init "fetch" 4 cores declared before sidecar "log" 0.5:
    # max(1 + 0.5, 4 + 0, 0.5) = 4 cores, + 0.25 overhead = 4.25. Declared after the sidecar, "fetch" counts with
    # it: max(1.5, 4.5) + 0.25 = 4.75. Pod-level resources (2 cores) replace the containers' figure, not the overhead.
    fetch, log = Container("fetch", 4.0, GIB, init=True), Container("log", 0.5, GIB // 2, sidecar=True)
    main = Container("main", 1.0, 2 * GIB)
    p = Pod("bob", "kata", "u2", "n1", T0, ((T0, "Running"),), T0 + 600, (fetch, log, main), overhead=(0.25, 0.0))
    assert pod_requests(p, T0)[0] == 4.25
    assert pod_requests(replace(p, containers=(log, fetch, main)), T0)[0] == 4.75
    assert pod_requests(replace(p, pod_resources=(2.0, 0.0)), T0)[:2] == (2.25, 2.5 * GIB)  # memory: app + sidecar


def test_kube_schedulers_series_name_no_uid_and_end_with_the_pod_running():
    w = tiny_world()
    assert not find(w, "kube_pod_resource_request")  # only where the cluster has kube-scheduler scraped
    [cluster] = w.clusters
    scheduled = replace(w, clusters=(replace(cluster, scheduler=True),))
    cpu = find(scheduled, "kube_pod_resource_request", resource="cpu")
    # a series per node label ('' until scheduled at +180), none after the pod Succeeded at +600; max(0.5 + 0.1, 4)
    assert [(labels["node"], samples[0], samples[-1]) for labels, samples in cpu] == [
        ("", (T0 + 60, 4.0), (T0 + 120, 4.0)), ("n1", (T0 + 180, 4.0), (T0 + 540, 4.0))]
    assert "uid" not in cpu[0][0] and cpu[0][0]["unit"] == "cores"
    assert {labels["resource"] for labels, _ in find(scheduled, "kube_pod_resource_request")} == {
        "cpu", "memory", "nvidia.com/gpu"}
