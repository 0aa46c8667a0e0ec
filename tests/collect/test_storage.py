"""Storage's arithmetic (docs/spec.md "Storage"): the store's bytes-instants to GiB-hours per namespace, storage class
and workload, and per class what the volumes held; and which queries a day asks. Worked out by hand."""

from collections import Counter
from datetime import date
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from billing import frames
from billing.collect.context import cluster_day
from billing.collect.storage import CLAIMED, LISTED, PROVISIONED, UNCLAIMED, ClaimSizes, collect_storage, storage_day
from billing.collect.stores import DEFAULT_STORE
from billing.config import ClusterConfig
from billing.days import billing_day

GIB = 2**30


def instants(figure: str, namespace: str, workload: str, storageclass: str, gib: float, count: int) -> list[tuple]:
    """`count` instants at which the store answered `gib` GiB for one key."""
    return [(figure, namespace, workload, storageclass, gib * GIB)] * count


def test_bytes_at_each_instant_are_gib_hours_per_namespace_and_class():
    """The spec's worked example at a 60 s step: ckpt 100 GiB for 720 instants and 150 GiB for 360 (resized at noon),
    scratch 512 GiB for 1,260; pv-1 Released for the last 360 instants."""
    rows = [*instants(LISTED, "", "", "", 2 / GIB, 1440),
            *instants(CLAIMED, "vision", "", "fast-nvme", 100, 720), *instants(CLAIMED, "vision", "", "fast-nvme", 150, 360),
            *instants(CLAIMED, "vision", "", "bulk", 512, 1260),
            *instants(PROVISIONED, "", "", "fast-nvme", 100, 720), *instants(PROVISIONED, "", "", "fast-nvme", 150, 720),
            *instants(PROVISIONED, "", "", "bulk", 512, 1260), *instants(UNCLAIMED, "", "", "fast-nvme", 150, 360)]
    day = storage_day(rows, 60, None)
    expected = pd.DataFrame({"namespace": ["vision", "vision"], "resource": ["storage", "storage"],
                             "gpu_model": ["bulk", "fast-nvme"], "priority_class": ["", ""], "pool": ["", ""],
                             "quantity": [10752.0, 2100.0]})
    pd.testing.assert_frame_equal(day.usage, expected, rtol=1e-12)
    assert day.workloads is None
    classes = day.classes.set_index("storageclass")
    assert list(day.classes.columns) == frames.STORAGE_CLASSES.columns
    assert classes.loc["fast-nvme"].tolist() == pytest.approx([3000.0, 2100.0, 900.0], rel=1e-12)
    assert classes.loc["bulk"].tolist() == pytest.approx([10752.0, 10752.0, 0.0], rel=1e-12)


def test_per_workload_the_rows_add_up_to_the_namespace():
    """ckpt mounted by a Deployment's pod for 360 instants of its 1,080 at 100 GiB: 600 its, 1,200 the namespace's
    own; storage carries no cost label values."""
    rows = [*instants(LISTED, "", "", "", 1 / GIB, 1080),
            *instants(CLAIMED, "vision", "Deployment/web", "fast-nvme", 100, 360),
            *instants(CLAIMED, "vision", frames.UNATTRIBUTED, "fast-nvme", 100, 720)]
    day = storage_day(rows, 60, ["experiment"])
    assert day.workloads is not None
    got = {(r.workload, r.labels): r.quantity for r in day.workloads.itertuples()}
    assert got == pytest.approx({("(no workload)", '{"experiment": ""}'): 1200.0,
                                 ("Deployment/web", '{"experiment": ""}'): 600.0}, rel=1e-12)
    assert day.usage["quantity"].tolist() == pytest.approx([1800.0], rel=1e-12)


def test_a_day_without_claims_has_no_storage():
    """No claim listed at any instant: no rows, whatever the volumes held (a cluster without claims bills as before)."""
    day = storage_day(instants(PROVISIONED, "", "", "bulk", 100, 60), 60, ["experiment"])
    assert day.usage.empty and day.classes.empty
    assert day.workloads is not None and day.workloads.empty
    assert list(day.usage.columns) == frames.USAGE.columns


# The queries storage asks, against a fake store: a day whose claims hold one size all along is read from figures over
# each chunk (no per-instant join); a claim resized, recreated or shared goes to the exact path, asked by name.
N = 360  # instants in each of the day's four 6-hour chunks at a 60 s step
CLUSTER = ClusterConfig(name="jaguar", prometheus={"url": "http://prometheus:9090", "selector": ""},
                        prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
CKPT = {"namespace": "vision", "persistentvolumeclaim": "ckpt"}
DATA = {"namespace": "nlp", "persistentvolumeclaim": "data"}
WORKLOADS = {("vision", "web-0"): "StatefulSet/web", ("vision", "web-1"): "StatefulSet/web"}


def part(name: str, value: float, **labels: str) -> dict:
    return {"metric": {"figure": name, **labels}, "value": [0, str(value)]}


def facts(**changed: list[dict]) -> list[dict]:
    """`facts`' answer in each chunk: ckpt (fast-nvme, pv-ckpt of 100 GiB) and data (bulk, pv-data of 200 GiB) Bound at
    every instant, their volumes never Released; ckpt mounted by pod web-0 at 30 instants, never two pods at once."""
    parts = {
        "info": [part("info", N, **CKPT, storageclass="fast-nvme", volumename="pv-ckpt"),
                 part("info", N, **DATA, storageclass="bulk", volumename="pv-data")],
        "bound": [part("bound", N, **CKPT, phase="Bound"), part("bound", N, **DATA, phase="Bound")],
        "ever_bound": [part("ever_bound", 1, **CKPT, phase="Bound"), part("ever_bound", 1, **DATA, phase="Bound")],
        **{name: [part(name, value, persistentvolume="pv-ckpt"), part(name, other, persistentvolume="pv-data")]
           for name, value, other in (("visible", N, N), ("highest", 100 * GIB, 200 * GIB))},
        "class": [part("class", N, persistentvolume="pv-ckpt", storageclass="fast-nvme"),
                  part("class", N, persistentvolume="pv-data", storageclass="bulk")],
        "spread": [], "released": [],  # (the store keeps only the series that spread, or were Released or Available)
        "mounted": [part("mounted", 30, **CKPT, pod="web-0", uid="u0")],
        "peak": [part("peak", 1, **CKPT)],
    }
    return [series for name, answer in {**parts, **changed}.items() for series in answer]


class FakeStore:
    """Answers storage's queries by kind, the exact path's with ckpt's bytes (and another namespace's claim of its name,
    which a real store's namespace matcher leaves out) at each instant; records what was asked."""

    def __init__(self, answer: list[dict], mounted: tuple[dict, ...] = (), mounts: dict[str, int] | None = None):
        self.answer, self.mounted = answer, list(mounted)
        self.mounts = mounts or {}  # pod -> the first instants of each chunk at which it mounts ckpt
        self.asked: list[tuple[str, str]] = []

    def instant(self, query: str, at: float) -> list[dict]:
        kind = ("listed" if query.startswith("count(") else "facts" if '"figure", "info"' in query
                else "mounted" if query.startswith("sum_over_time(") else "unknown")
        self.asked.append((kind, query))
        return {"listed": [{"metric": {}, "value": [at, "2"]}], "facts": self.answer, "mounted": self.mounted,
                "unknown": []}[kind]

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        kind = ("provisioned" if '"figure", "provisioned"' in query
                else "mounts" if query.startswith("group by (namespace, persistentvolumeclaim, pod)") else "claimed")
        self.asked.append((kind, query))
        if kind == "mounts":
            return [{"metric": {**CKPT, "pod": pod}, "values": [[t, "1"] for t in range(int(start), int(end) + 1, int(step))][:n]}
                    for pod, n in self.mounts.items()]
        if kind == "provisioned":
            labels = {"figure": "provisioned", "storageclass": "fast-nvme"}
            return [{"metric": labels, "values": [[t, str(100 * GIB)] for t in range(int(start), int(end) + 1, int(step))]}]
        claims = ({**CKPT, "storageclass": "fast-nvme"}, {**CKPT, "namespace": "other", "storageclass": "fast-nvme"})
        return [{"metric": labels, "values": [[t, str(100 * GIB)] for t in range(int(start), int(end) + 1, int(step))]}
                for labels in claims]


def collected(store: FakeStore):
    context = cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], store, DEFAULT_STORE)
    return collect_storage(context, ["experiment"], [WORKLOADS] * len(context.chunks()))


def per_workload(day) -> dict:
    return {(r.namespace, r.workload, r.gpu_model): r.quantity for r in day.workloads.itertuples()}


def test_claims_of_one_size_all_day_are_read_without_a_join_at_each_instant():
    """Each chunk asks whether it has claims and `facts` (no join, no range query): ckpt 100 GiB x 1,440 instants =
    2,400 GiB-hours, web-0's 30 instants a chunk 200 of them; data 200 GiB all day 4,800."""
    store = FakeStore(facts())
    day = collected(store)
    assert Counter(kind for kind, _ in store.asked) == {"listed": 4, "facts": 4}
    assert not [query for _, query in store.asked if "group_left" in query or " * on " in query]
    assert per_workload(day) == pytest.approx({("vision", "StatefulSet/web", "fast-nvme"): 200.0,
                                               ("vision", "(no workload)", "fast-nvme"): 2200.0,
                                               ("nlp", "(no workload)", "bulk"): 4800.0}, rel=1e-12)
    classes = {r.storageclass: (r.provisioned, r.claimed, r.unclaimed) for r in day.classes.itertuples()}
    assert classes == pytest.approx({"fast-nvme": (2400.0, 2400.0, 0.0), "bulk": (4800.0, 4800.0, 0.0)}, rel=1e-12)
    # each chunk's claims' sizes, which waste's unused storage takes rather than asking again
    assert day.sizes == (ClaimSizes(held={("vision", "ckpt"): 100 * GIB, ("nlp", "data"): 200 * GIB}),) * 4


@pytest.mark.parametrize("changed", [
    # resized: its volume's capacity spread within the chunk
    {"spread": [part("spread", 1.5e9, persistentvolume="pv-ckpt")]},
    # deleted and created again under its name: two info series, another volume
    {"info": [part("info", 120, **CKPT, storageclass="fast-nvme", volumename="pv-ckpt"),
              part("info", 240, **CKPT, storageclass="fast-nvme", volumename="pv-ckpt-2"),
              part("info", N, **DATA, storageclass="bulk", volumename="pv-data")]},
    # Bound at some instants only (Pending at the others)
    {"bound": [part("bound", N - 1, **CKPT, phase="Bound"), part("bound", N, **DATA, phase="Bound")]},
    # a Bound value other than 0 or 1
    {"ever_bound": [part("ever_bound", 2, **CKPT, phase="Bound"), part("ever_bound", 1, **DATA, phase="Bound")]},
], ids=["resized", "recreated", "bound-at-some-instants", "odd-phase"])
def test_a_claim_the_factoring_gets_wrong_is_asked_instant_by_instant_by_name(changed):
    """ckpt alone goes to the exact path (one range query a chunk naming it, its namespace and volumes): its bytes at
    each instant, the other namespace's claim of its name left out; data stays factored."""
    store = FakeStore(facts(**changed))
    day = collected(store)
    exact = [query for kind, query in store.asked if kind == "claimed"]
    assert len(exact) == 4
    assert all('persistentvolumeclaim=~"ckpt"' in query and 'namespace=~"vision"' in query and "data" not in query
               for query in exact)
    # per instant, ckpt's mounted instants are the mounted query's (none here): all of it the namespace's own
    assert per_workload(day) == pytest.approx({("vision", "(no workload)", "fast-nvme"): 2400.0,
                                               ("nlp", "(no workload)", "bulk"): 4800.0}, rel=1e-12)
    # waste asks ckpt's size itself, by name and volume; data's is storage's
    volumes = ["pv-ckpt", "pv-ckpt-2"] if "info" in changed else ["pv-ckpt"]
    assert day.sizes == (ClaimSizes(held={("nlp", "data"): 200 * GIB}, unsure={("vision", "ckpt"): volumes}),) * 4


def test_a_claim_pods_share_is_shared_instant_by_instant_from_the_mounts_alone():
    """ckpt (100 GiB, Bound all day) mounted by web-0 and web-1 at once at the first 60 instants of each chunk, by
    web-0 alone at the next 30: no join is asked, only the mounts of ckpt at each instant (a range query naming it);
    web-0 holds 100 GiB x (60 / 2 + 30) instants a chunk, web-1 100 x 60 / 2: 400 and 200 GiB-hours a day, both
    StatefulSet/web's; the 270 instants a chunk no pod mounts it are the namespace's own, 1,800."""
    shared = facts(mounted=[part("mounted", 90, **CKPT, pod="web-0", uid="web-0"),
                            part("mounted", 60, **CKPT, pod="web-1", uid="web-1")],
                   peak=[part("peak", 2, **CKPT)])
    store = FakeStore(shared, mounts={"web-0": 90, "web-1": 60})
    day = collected(store)
    kinds = Counter(kind for kind, _ in store.asked)
    assert kinds == {"listed": 4, "facts": 4, "mounts": 4}
    assert all('persistentvolumeclaim=~"ckpt"' in query and 'namespace=~"vision"' in query
               for kind, query in store.asked if kind == "mounts")
    assert per_workload(day) == pytest.approx({("vision", "StatefulSet/web", "fast-nvme"): 600.0,
                                               ("vision", "(no workload)", "fast-nvme"): 1800.0,
                                               ("nlp", "(no workload)", "bulk"): 4800.0}, rel=1e-12)


def test_a_claim_pods_share_that_changed_size_is_asked_with_its_join():
    """ckpt resized within the chunk and mounted by two pods at once: its bytes at each instant and the pods' shares
    of them come from the exact path's joins, not from the mounts alone."""
    shared = facts(mounted=[part("mounted", 60, **CKPT, pod=pod, uid=pod) for pod in ("web-0", "web-1")],
                   peak=[part("peak", 2, **CKPT)], spread=[part("spread", 1.5e9, persistentvolume="pv-ckpt")])
    mounted = tuple({"metric": {**CKPT, "storageclass": "fast-nvme", "pod": pod}, "value": [0, str(50 * GIB * 60)]}
                    for pod in ("web-0", "web-1"))
    store = FakeStore(shared, mounted)
    collected(store)
    # (the resized volume's class figures too: provisioned)
    assert Counter(kind for kind, _ in store.asked) == {"listed": 4, "facts": 4, "claimed": 4, "mounted": 4,
                                                         "provisioned": 4}


def test_a_volume_released_in_the_chunk_is_asked_instant_by_instant():
    """pv-ckpt Released at some instants: its class's figures come from the exact per-class query, naming it alone."""
    released = facts(released=[part("released", 1, persistentvolume="pv-ckpt", phase="Released")])
    store = FakeStore(released)
    day = collected(store)
    exact = [query for kind, query in store.asked if kind == "provisioned"]
    assert len(exact) == 4 and all('persistentvolume=~"pv-ckpt"' in query and "pv-data" not in query for query in exact)
    classes = {r.storageclass: r.provisioned for r in day.classes.itertuples()}
    assert classes == pytest.approx({"fast-nvme": 2400.0, "bulk": 4800.0}, rel=1e-12)
