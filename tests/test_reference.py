"""fixtures.reference on tiny hand-made worlds; every expected value is worked
out by hand in the comments (step 60 s, lookback 5 min unless said)."""

import datetime as dt
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from fixtures.ksm import A100, GPU_PRODUCT_LABEL, H100, Cluster, Container, Node, Pod, World
from fixtures.reference import (
    counter_growth,
    instant_query,
    instants,
    latest_sample,
    reference_allocatable,
    reference_usage,
)

DAY = datetime(2026, 11, 20, tzinfo=ZoneInfo("UTC")).timestamp()  # billing day D, 00:00 UTC
GIB = 2**30
INF = float("inf")


def at(hour: float, minute: float = 0, day: int = 0) -> float:
    """Unix time of D+day hour:minute UTC."""
    return DAY + day * 86400 + hour * 3600 + minute * 60


LONG_AGO = at(0, day=-30)
NODES = (
    Node("cpu-1", ((LONG_AGO, {}),), {"cpu": 64}),
    Node("gpu-h100", ((LONG_AGO, {GPU_PRODUCT_LABEL: H100}),), {"nvidia_com_gpu": 8}),
    Node("gpu-swap", ((LONG_AGO, {GPU_PRODUCT_LABEL: A100}), (at(12), {GPU_PRODUCT_LABEL: H100}))),
    Node("gpu-nolabel", ((LONG_AGO, {"label_kubernetes_io_os": "linux"}),)),
)


def pod(ns: str, name: str, *, created: float, phases, deleted: float = INF, containers=None,
        node: str = "cpu-1", uid: str | None = None, scheduled: float | None = None) -> Pod:
    return Pod(ns, name, uid or f"uid-{ns}-{name}", node, created, tuple(phases), deleted,
               tuple(containers or (Container("main", 1.0, 1 * GIB),)), scheduled=scheduled)


def world(*pods: Pod, gaps=(), start: float = at(0, day=-2), end: float = at(0, day=3)) -> World:
    return World((Cluster("jaguar", NODES, pods, {"cluster": "jaguar"}),), start, end, 60.0, gaps)


def usage(w: World, day_start: float = DAY, day_end: float = DAY + 86400, step: float = 60.0, **kw):
    return reference_usage(w, "jaguar", day_start, day_end, step, **kw)


def assert_usage(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key


def test_latest_sample_includes_both_ends_of_the_lookback():
    samples = [(100.0, 1.0), (160.0, 2.0)]
    assert latest_sample(samples, 99.0) is None
    assert latest_sample(samples, 100.0) == (100.0, 1.0)
    assert latest_sample(samples, 159.0) == (100.0, 1.0)
    assert latest_sample(samples, 460.0) == (160.0, 2.0)  # exactly 300 s old: still seen (Prometheus 2.42)
    assert latest_sample(samples, 460.5) is None


def test_instants_cover_the_half_open_day():
    ts = instants(DAY, DAY + 86400, 60)
    assert len(ts) == 1440 and ts[0] == DAY and ts[-1] == DAY + 86400 - 60


def test_pod_running_two_hours():
    # Running 10:00-12:00 (Succeeded at 12:00): Running is 1 at instants
    # 10:00 ... 11:59 = 120 instants = 2 h (at 12:00 the newest sample is 0).
    # The scheduler reserves max(2 cores of main, 8 of init) = 8 cores and max(1, 16) = 16 GiB for the pod's
    # whole life: 8 x 2 h = 16 core-hours, 16 x 2 h = 32 GiB-hours. App containers alone (the older rule):
    # 2 cores x 2 h = 4 core-hours, 1 GiB x 2 h = 2 GiB-hours. The Pending/Succeeded time costs nothing.
    p = pod("alice", "train", created=at(9, 55), deleted=at(12, 30),
            phases=[(at(9, 55), "Pending"), (at(10), "Running"), (at(12), "Succeeded")],
            containers=[Container("init", 8.0, 16 * GIB, init=True), Container("main", 2.0, 1 * GIB)])
    assert_usage(usage(world(p)), {("alice", "cpu", ""): 16.0, ("alice", "memory", ""): 32.0})
    assert_usage(usage(world(p), requests="containers"), {("alice", "cpu", ""): 4.0, ("alice", "memory", ""): 2.0})


def test_a_native_sidecar_adds_to_the_app_containers():
    # App 1 core + a 0.5-core native sidecar (an init container with restartPolicy: Always), Running all day:
    # 1.5 cores x 24 h = 36 core-hours; app containers alone 24. Memory 1 GiB + 0.25 GiB: 30 GiB-hours.
    p = pod("alice", "serve", created=at(0, day=-1), phases=[(at(0, day=-1), "Running")],
            containers=[Container("istio-proxy", 0.5, 0.25 * GIB, sidecar=True), Container("main", 1.0, 1 * GIB)])
    assert_usage(usage(world(p)), {("alice", "cpu", ""): 36.0, ("alice", "memory", ""): 30.0})
    assert_usage(usage(world(p), requests="containers"), {("alice", "cpu", ""): 24.0, ("alice", "memory", ""): 24.0})


def test_init_containers_sidecars_and_overhead_as_the_scheduler_reserves_them():
    # App 1 core, a 4-core init container, a 0.5-core sidecar, a 0.25-core RuntimeClass overhead, Running all
    # day. kube-state-metrics does not export the order of init containers, so the sidecar counts as declared
    # first (as Istio injects it): the scheduler keeps max(1 + 0.5, 4 + 0.5) + 0.25 = 4.75 cores x 24 h =
    # 114 core-hours. Memory: app 2 GiB, init 1 GiB, sidecar 0.5 GiB, overhead 0.5 GiB: max(2 + 0.5, 1 + 0.5)
    # + 0.5 = 3 GiB x 24 h = 72 GiB-hours. App containers alone: 24 core-hours, 48 GiB-hours.
    p = Pod("alice", "kata", "uid-kata", "cpu-1", at(0, day=-1), ((at(0, day=-1), "Running"),), INF,
            (Container("fetch", 4.0, 1 * GIB, init=True), Container("log", 0.5, 0.5 * GIB, sidecar=True),
             Container("main", 1.0, 2 * GIB)), overhead=(0.25, 0.5 * GIB))
    assert_usage(usage(world(p)), {("alice", "cpu", ""): 114.0, ("alice", "memory", ""): 72.0})
    assert_usage(usage(world(p), requests="containers"), {("alice", "cpu", ""): 24.0, ("alice", "memory", ""): 48.0})


def test_step_of_five_minutes_gives_the_same_two_hours():
    # Instants 10:00, 10:05, ..., 11:55 = 24 instants x 5/60 h = 2 h -> 4 core-hours.
    p = pod("alice", "train", created=at(9, 55), deleted=at(12, 30),
            phases=[(at(9, 55), "Pending"), (at(10), "Running"), (at(12), "Succeeded")],
            containers=[Container("main", 2.0, 1 * GIB)])
    assert_usage(usage(world(p), step=300), {("alice", "cpu", ""): 4.0, ("alice", "memory", ""): 2.0})


def test_pod_crossing_midnight_counts_only_inside_the_day():
    # Running D-1 22:00 until D+1 02:00 on an H100 node with 1 core, 4 GiB, 1 GPU.
    # Day D: all 1,440 instants = 24 h -> 24 core-h, 96 GiB-h, 24 GPU-h (H100).
    # Day D-1: 22:00 ... 23:59 = 2 h; day D+1: 00:00 ... 01:59 = 2 h.
    p = pod("team-robotics", "sim", created=at(21, day=-1), deleted=at(3, day=1), node="gpu-h100",
            phases=[(at(21, day=-1), "Pending"), (at(22, day=-1), "Running"), (at(2, day=1), "Succeeded")],
            containers=[Container("main", 1.0, 4 * GIB, 1.0)])
    w = world(p)
    assert_usage(usage(w), {("team-robotics", "cpu", ""): 24.0, ("team-robotics", "memory", ""): 96.0,
                            ("team-robotics", "gpu", H100): 24.0})
    for day in (-1, 1):
        assert_usage(usage(w, at(0, day=day), at(0, day=day + 1)),
                     {("team-robotics", "cpu", ""): 2.0, ("team-robotics", "memory", ""): 8.0,
                      ("team-robotics", "gpu", H100): 2.0})


def test_pending_failed_and_unknown_cost_nothing():
    # One pod Pending all day; another Running 10:00-10:30, Unknown 10:30-11:00,
    # Running 11:00-11:30, then Failed: 30 + 30 min = 1 h of 1 core and 1 GiB.
    waiting = pod("bob", "waiting", created=at(1), phases=[(at(1), "Pending")])
    flaky = pod("bob", "flaky", created=at(10), deleted=at(13),
                phases=[(at(10), "Running"), (at(10, 30), "Unknown"), (at(11), "Running"), (at(11, 30), "Failed")])
    assert_usage(usage(world(waiting, flaky)), {("bob", "cpu", ""): 1.0, ("bob", "memory", ""): 1.0})


def test_deleted_while_running_counts_five_more_minutes():
    # Running from 10:00, deleted at 11:00 without a final phase: last samples
    # at 10:59 stay visible through 11:04 (exactly 5 min old, still included).
    # Instants 10:00 ... 11:04 = 65 -> 65/60 core-hours and GiB-hours.
    p = pod("carol", "notebook", created=at(10), deleted=at(11), phases=[(at(10), "Running")])
    assert_usage(usage(world(p)), {("carol", "cpu", ""): 65 / 60, ("carol", "memory", ""): 65 / 60})


def test_gpu_model_follows_a_node_label_change():
    # gpu-swap is A100 until 12:00 and H100 from 12:00. At 12:00-12:04 both
    # label series are visible; the newest sample (H100) wins.
    # 2 GPUs: A100 00:00-11:59 = 12 h -> 24 GPU-h; H100 12:00-23:59 -> 24 GPU-h.
    p = pod("dave", "big", created=at(0, day=-1), node="gpu-swap", phases=[(at(0, day=-1), "Running")],
            containers=[Container("main", 1.0, 1 * GIB, 2.0)])
    got = usage(world(p))
    assert got[("dave", "gpu", A100)] == pytest.approx(24.0)
    assert got[("dave", "gpu", H100)] == pytest.approx(24.0)


def test_node_without_gpu_label_gives_empty_model():
    # 1 GPU all day on a node without the product label: 24 GPU-h of model "".
    p = pod("erin", "x", created=at(0, day=-1), node="gpu-nolabel", phases=[(at(0, day=-1), "Running")],
            containers=[Container("main", 1.0, 1 * GIB, 1.0)])
    assert usage(world(p))[("erin", "gpu", "")] == pytest.approx(24.0)


def test_node_comes_from_pod_info_once_scheduled():
    # Created 08:00 with node "" until scheduled at 08:30 on gpu-h100; Running
    # 09:00-10:00 then Succeeded: 1 h of 1 GPU on H100. (The node="" request
    # series stopped at 08:29, out of the lookback by 09:00: no double count.)
    p = pod("erin", "wait", created=at(8), deleted=at(11), node="gpu-h100", scheduled=at(8, 30),
            phases=[(at(8), "Pending"), (at(9), "Running"), (at(10), "Succeeded")],
            containers=[Container("main", 1.0, 1 * GIB, 1.0)])
    assert_usage(usage(world(p)), {("erin", "cpu", ""): 1.0, ("erin", "memory", ""): 1.0,
                                   ("erin", "gpu", H100): 1.0})


def test_same_name_new_uid_counts_both_pods():
    # db-0 (uid a) Running until deleted at 12:00: instants 00:00 ... 12:04 =
    # 725; db-0 (uid b) created and Running at 12:00: 12:00 ... 23:59 = 720.
    # Joined on uid both count: 1,445 instants x 1 core = 1445/60 core-hours.
    old = pod("team-vision", "db-0", uid="a", created=at(0, day=-1), deleted=at(12),
              phases=[(at(0, day=-1), "Running")])
    new = pod("team-vision", "db-0", uid="b", created=at(12), phases=[(at(12), "Running")])
    assert usage(world(old, new))[("team-vision", "cpu", "")] == pytest.approx(1445 / 60)


def test_in_place_resize_changes_the_request():
    # 1 core until 06:00, then 3 cores: 6 h x 1 + 18 h x 3 = 60 core-hours.
    p = pod("frank", "svc", created=at(0, day=-1), phases=[(at(0, day=-1), "Running")],
            containers=[Container("main", 1.0, 1 * GIB, resizes=((at(6), 3.0, 1 * GIB, 0.0),))])
    assert usage(world(p))[("frank", "cpu", "")] == pytest.approx(60.0)


def test_scrape_gap_loses_what_the_lookback_cannot_bridge():
    # No scrapes 14:00-14:29. 14:00 ... 14:04 still see the 13:59 sample;
    # 14:05 ... 14:29 (25 instants) see nothing: (1440 - 25)/60 core-hours.
    p = pod("grace", "svc", created=at(0, day=-1), phases=[(at(0, day=-1), "Running")])
    got = usage(world(p, gaps=((at(14), at(14, 30)),)))
    assert got[("grace", "cpu", "")] == pytest.approx(1415 / 60)


@pytest.mark.parametrize("date, hours", [((2026, 3, 29), 23), ((2026, 10, 25), 25), ((2026, 11, 20), 24)])
def test_dst_day_in_berlin_has_23_or_25_hours(date, hours):
    # A pod Running throughout with 1 core costs as many core-hours as the
    # local day has hours: 23 when clocks go forward, 25 when they go back.
    berlin = ZoneInfo("Europe/Berlin")
    day = dt.date(*date)
    start = datetime.combine(day, dt.time(), tzinfo=berlin).timestamp()
    end = datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=berlin).timestamp()
    p = pod("heidi", "svc", created=start - 86400, phases=[(start - 86400, "Running")])
    w = World((Cluster("jaguar", NODES, (p,)),), start - 7200, end + 7200)
    assert usage(w, start, end)[("heidi", "cpu", "")] == pytest.approx(hours)


def test_only_configured_gpu_resources_count():
    # 1 amd_com_gpu all day: 24 GPU-h only when that resource name is configured.
    p = pod("ivan", "rocm", created=at(0, day=-1), node="gpu-nolabel", phases=[(at(0, day=-1), "Running")],
            containers=[Container("main", 1.0, 1 * GIB, 1.0, gpu_resource="amd_com_gpu")])
    assert ("ivan", "gpu", "") not in usage(world(p))
    assert usage(world(p), gpu_resources=("nvidia_com_gpu", "amd_com_gpu"))[("ivan", "gpu", "")] == pytest.approx(24)


def test_clusters_are_kept_apart():
    # Each cluster has one pod Running 10:00-12:00 with 1 core: 2 core-hours each, never mixed.
    def cluster(name: str, ns: str) -> Cluster:
        p = pod(ns, "x", created=at(10), deleted=at(13), phases=[(at(10), "Running"), (at(12), "Succeeded")])
        return Cluster(name, NODES, (p,), {"cluster": name})

    w = World((cluster("jaguar", "judy"), cluster("ibis", "ivan")), at(0, day=-1), at(0, day=2))
    assert usage(w)[("judy", "cpu", "")] == pytest.approx(2.0)
    assert reference_usage(w, "ibis", DAY, DAY + 86400, 60) == pytest.approx(
        {("ivan", "cpu", ""): 2.0, ("ivan", "memory", ""): 2.0})
    with pytest.raises(KeyError):
        reference_usage(w, "puma", DAY, DAY + 86400, 60)


def test_instant_query_sees_series_like_prometheus():
    # Deleted at 11:00 (last sample 10:59): visible at 11:04, gone at 11:05.
    p = pod("carol", "notebook", created=at(10), deleted=at(11), phases=[(at(10), "Running")])
    w = world(p)
    seen = instant_query(w, "kube_pod_status_phase", at(11, 4), phase="Running")
    assert [(labels["pod"], value) for labels, value in seen] == [("notebook", 1.0)]
    assert instant_query(w, "kube_pod_status_phase", at(11, 5)) == []


def test_allocatable_per_resource_and_model():
    # A whole day of 1440 instants = 24 h. cpu-1: 64 cores -> 1536 core-h. gpu-h100: 8 H100 -> 192 GPU-h.
    # gpu-swap: 4 GPUs, A100 until 12:00, H100 after; at 12:00..12:05 both label sets are visible and the
    # newest (H100) wins, so A100 has instants 00:00..11:59 = 12 h -> 48, H100 12 h more -> 192 + 48.
    # gpu-nolabel: 2 GPUs without a model -> 48 GPU-h, and 512 GiB -> 12,288 GiB-h.
    nodes = (
        Node("cpu-1", ((LONG_AGO, {}),), {"cpu": 64, "pods": 110}),
        Node("gpu-h100", ((LONG_AGO, {GPU_PRODUCT_LABEL: H100}),), {"nvidia_com_gpu": 8}),
        Node("gpu-swap", ((LONG_AGO, {GPU_PRODUCT_LABEL: A100}), (at(12), {GPU_PRODUCT_LABEL: H100})),
             {"nvidia_com_gpu": 4}),
        Node("gpu-nolabel", ((LONG_AGO, {}),), {"nvidia_com_gpu": 2, "memory": 512 * GIB}),
    )
    w = World((Cluster("jaguar", nodes, (), {"cluster": "jaguar"}),), at(0, day=-1), at(0, day=2), 60.0)
    assert_usage(reference_allocatable(w, "jaguar", DAY, DAY + 86400, 60), {
        ("cpu", ""): 1536.0, ("gpu", H100): 240.0, ("gpu", A100): 48.0, ("gpu", ""): 48.0, ("memory", ""): 12288.0})
    # a gap in the scrapes from 06:00 to 08:00: the last sample before it is seen until 06:04, so the
    # instants 06:05 ... 07:59 (115) are missing: 64 cores x (1440 - 115) / 60 h
    gap = World(w.clusters, w.start, w.end, 60.0, ((at(6), at(8)),))
    assert reference_allocatable(gap, "jaguar", DAY, DAY + 86400, 60)[("cpu", "")] == pytest.approx(64 * 1325 / 60)


def test_counter_growth_in_an_hour_is_from_the_last_sample_before_it_to_its_last():
    # one CPU second per second from t = 0, sampled every minute until 30:00 (the container gone at 30:10)
    samples = [(60.0 * i, 60.0 * i) for i in range(31)]
    assert counter_growth(samples, 0.0, 600.0) == 600.0  # the sample at 0 is the start: 0 before it
    assert counter_growth(samples, 600.0, 1200.0) == 600.0  # from 10:00's sample to 20:00's
    assert counter_growth(samples, 1500.0, 2100.0) == 300.0  # to the last sample, not extrapolated past it
    assert counter_growth(samples, 2100.0, 2700.0) == 0.0  # no sample in the window: nothing
    # a counter first seen within the window (no sample in the window before) grew from 0
    started = [(t + 3630.0, v + 30.0) for t, v in samples[:5]]  # started at 3600, first seen at 3630
    assert counter_growth(started, 3600.0, 4200.0) == 270.0


def test_slices_count_their_fraction_and_replicas_divide():
    # mig: one 1g.10gb slice (1/7) all day -> 24/7 GPU-h of A100, and the node's 7 slices -> 24 GPU-h.
    # sliced: 4 replicas until 12:00 (the new label set wins from 12:00), then 2; one replica held all day:
    # 12 h x 1/4 + 12 h x 1/2 = 9 GPU-h; allocatable 8 replicas, then 4: 12 x 8/4 + 12 x 4/2 = 48.
    replicas = "label_nvidia_com_gpu_replicas"
    nodes = (
        Node("mig", ((LONG_AGO, {GPU_PRODUCT_LABEL: A100}),), {"nvidia_com_mig_1g_10gb": 7}),
        Node("sliced", ((LONG_AGO, {GPU_PRODUCT_LABEL: H100, replicas: "4"}),
                        (at(12), {GPU_PRODUCT_LABEL: H100, replicas: "2"})),
             {"nvidia_com_gpu": 8}, allocatable_changes=((at(12), {"nvidia_com_gpu": 4}),)),
    )
    always = at(0, day=-1)
    pods = (pod("alice", "slice", created=always, node="mig", phases=[(always, "Running")],
                containers=[Container("main", 1.0, 1 * GIB, 1.0, gpu_resource="nvidia_com_mig_1g_10gb")]),
            pod("bob", "replica", created=always, node="sliced", phases=[(always, "Running")],
                containers=[Container("main", 1.0, 1 * GIB, 1.0)]))
    w = World((Cluster("jaguar", nodes, pods, {"cluster": "jaguar"}),), at(0, day=-1), at(0, day=2), 60.0)
    fractions = {"nvidia_com_gpu": 1.0, "nvidia_com_mig_1g_10gb": 1 / 7}
    got = usage(w, gpu_resources=fractions, replicas_label=replicas)
    assert got[("alice", "gpu", A100)] == pytest.approx(24 / 7)
    assert got[("bob", "gpu", H100)] == pytest.approx(9)
    allocatable = reference_allocatable(w, "jaguar", DAY, DAY + 86400, 60, gpu_resources=fractions,
                                        replicas_label=replicas)
    assert allocatable == pytest.approx({("gpu", A100): 24.0, ("gpu", H100): 48.0})
    # without the replicas label every replica is a whole GPU
    assert usage(w, gpu_resources=fractions)[("bob", "gpu", H100)] == pytest.approx(24)


def test_other_vendors_model_labels_apply_where_the_nvidia_one_is_absent():
    amd = "label_amd_com_gpu_product_name"
    nodes = (Node("amd", ((LONG_AGO, {amd: "AMD-Instinct-MI300X"}),)),)
    always = at(0, day=-1)
    p = pod("ivan", "rocm", created=always, node="amd", phases=[(always, "Running")],
            containers=[Container("main", 1.0, 1 * GIB, 2.0, gpu_resource="amd_com_gpu")])
    w = World((Cluster("jaguar", nodes, (p,), {"cluster": "jaguar"}),), at(0, day=-1), at(0, day=2), 60.0)
    assert usage(w, gpu_resources=["amd_com_gpu"], vendor_model_labels=[amd])[("ivan", "gpu", "AMD-Instinct-MI300X")] \
        == pytest.approx(48)
