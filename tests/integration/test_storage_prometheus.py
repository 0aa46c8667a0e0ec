"""Storage collected from a real store (docs/spec.md "Storage"): a day of claims and volumes of two classes, backfilled
into Prometheus and VictoriaMetrics and written to them live (remote write, staleness markers, kube-state-metrics
replaced), its GiB-hours worked out by hand below and by the reference (fixtures/reference.py); a volume whose
capacity is impossible, refused; claims without their volumes' capacity, refused by the preflight.

Every series is scraped each minute on the instants, with no staleness markers (blocks written by promtool), so a
deleted object's last samples stay visible for the 5-minute lookback: 5 instants more.
"""

from dataclasses import replace
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from billing.cli import main
from billing.collect.context import cluster_day
from billing.collect.day import collect_day
from billing.collect.preflight import MissingSeries, preflight, refuse_missing
from billing.collect.prometheus import LivePrometheus
from billing.collect.storage import collect_storage
from billing.collect.usage import collect_cluster
from billing.collect.waste import collect_waste
from billing.config import ClusterConfig, load_config
from billing.days import billing_day
from billing.errors import RunFailed
from billing.jobs.check import storage
from fixtures.ksm import Cluster, Container, Controller, Node, Pod, Volume, VolumeClaim, World, replaced_exporter
from fixtures.reference import reference_storage
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import write_config
from tests.helpers.prometheus_worlds import PRICES, cluster

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
BEFORE, AFTER = D - 3600, D + 25 * 3600
GIB = 2**30
LOOKBACK = 5 / 60  # hours: the 5 instants a deleted object's last samples stay visible
FAST, BULK = "fast-nvme", "bulk"


def at(hour: float) -> float:
    return D + hour * 3600


def pod(namespace: str, name: str, start: float, end: float, claims: tuple[str, ...], kind: str, owner: str,
        node: str = "node-1") -> Pod:
    return Pod(namespace, name, f"uid-{name}", node, start, ((start, "Running"),), end,
               (Container("main", 1.0, 0.0, 0.0),), created_by_kind=kind, created_by_name=owner, volume_claims=claims)


VOLUMES = (
    # resized from 100 to 150 GiB at noon; its claim deleted at 18:00, the volume kept (Retain): Released
    Volume("pv-ckpt", FAST, ((BEFORE, 100 * GIB), (at(12), 150 * GIB)), ((BEFORE, "Bound"), (at(18), "Released"))),
    # provisioned at 03:00, when its claim, Pending until then, is bound: 512 GiB for a request of 500
    Volume("pv-scratch", BULK, ((at(3), 512 * GIB),), ((at(3), "Bound"),)),
    Volume("pv-trainer-0", BULK, ((BEFORE, 200 * GIB),), ((BEFORE, "Bound"),)),
    Volume("pv-trainer-1", BULK, ((BEFORE, 200 * GIB),), ((BEFORE, "Bound"),)),
    # the first and second volume of a claim deleted at 08:00 and created again under its name (Delete policy)
    Volume("pv-cache-a", FAST, ((BEFORE, 64 * GIB),), ((BEFORE, "Bound"),), deleted=at(8)),
    Volume("pv-cache-b", FAST, ((at(8.25), 100 * GIB),), ((at(8.25), "Bound"),)),
    Volume("pv-spare", BULK, ((BEFORE, 1000 * GIB),), ((BEFORE, "Available"),)),  # nobody's claim
    Volume("pv-datasets", BULK, ((BEFORE, 1000 * GIB),), ((BEFORE, "Bound"),)),
)
CLAIMS = (
    # its filesystem using 40 GiB, which the kubelet reports while the web pod mounts it (unused storage)
    VolumeClaim("vision", "ckpt", FAST, 100 * GIB, ((BEFORE, "Bound"),), ((BEFORE, "pv-ckpt"),), deleted=at(18),
                used=40 * GIB),
    VolumeClaim("vision", "scratch", BULK, 500 * GIB, ((BEFORE, "Pending"), (at(3), "Bound")),
                ((BEFORE, ""), (at(3), "pv-scratch"))),
    VolumeClaim("nlp", "data-trainer-0", BULK, 200 * GIB, ((BEFORE, "Bound"),), ((BEFORE, "pv-trainer-0"),),
                used=50 * GIB),
    VolumeClaim("nlp", "data-trainer-1", BULK, 200 * GIB, ((BEFORE, "Bound"),), ((BEFORE, "pv-trainer-1"),)),
    # bound to a volume of which no series is there (kube-state-metrics filtered, say): billed its request
    VolumeClaim("vision", "legacy", BULK, 10 * GIB, ((BEFORE, "Bound"),), ((BEFORE, "pv-legacy"),)),
    VolumeClaim("nlp", "cache", FAST, 64 * GIB, ((BEFORE, "Bound"), (at(8), "Pending"), (at(8.25), "Bound")),
                ((BEFORE, "pv-cache-a"), (at(8), ""), (at(8.25), "pv-cache-b"))),
    # mounted by two pods of a Deployment all day and, 12:00 to 18:00, a pod of another one too (a shared dataset), on
    # another node, whose kubelet reports its used bytes too
    VolumeClaim("vision", "datasets", BULK, 1000 * GIB, ((BEFORE, "Bound"),), ((BEFORE, "pv-datasets"),),
                used=600 * GIB),
)
PODS = (
    pod("nlp", "trainer-0", BEFORE, AFTER, ("data-trainer-0",), "StatefulSet", "trainer"),
    pod("nlp", "trainer-1", BEFORE, AFTER, ("data-trainer-1",), "StatefulSet", "trainer"),
    pod("vision", "web-5d8f-x7k2p", at(6), at(12), ("ckpt",), "ReplicaSet", "web-5d8f"),  # 06:00 to 12:04 seen
    pod("vision", "web-5d8f-a1b2c", BEFORE, AFTER, ("datasets",), "ReplicaSet", "web-5d8f"),
    pod("vision", "web-5d8f-d3e4f", BEFORE, AFTER, ("datasets",), "ReplicaSet", "web-5d8f"),
    pod("vision", "api-7c9d-q8w2r", at(12), at(18), ("datasets",), "ReplicaSet", "api-7c9d", "node-2"),  # to 18:04
)
NODES = tuple(Node(name, ((BEFORE, {}),), {"cpu": 64.0, "memory": 512.0 * GIB}) for name in ("node-1", "node-2"))


def world(volumes: tuple[Volume, ...] = VOLUMES) -> World:
    return World((Cluster("jaguar", NODES, PODS, {"cluster": "jaguar"},
                          (Controller("ReplicaSet", "vision", "web-5d8f", "Deployment", "web"),
                           Controller("ReplicaSet", "vision", "api-7c9d", "Deployment", "api")),
                          volumes=volumes, volume_claims=CLAIMS),), BEFORE, AFTER)


# By hand, in GiB-hours over the day's 1,440 instants:
CKPT = 100 * 12 + 150 * (6 + LOOKBACK)  # 2,112.5: bound until 18:04, its last samples' lookback
CKPT_WEB = 100 * 6 + 150 * LOOKBACK  # 612.5: mounted by the Deployment's pod 06:00 to 12:04, resized at noon
SCRATCH = 512 * 21  # 10,752: Pending until 03:00 (nothing), then its volume's 512 GiB, not the 500 requested
TRAINERS = 200 * 24 * 2  # 9,600: the StatefulSet's two claims all day
CACHE = 64 * 8 + 100 * (24 - 8.25)  # 2,087: Pending 08:00 to 08:14 (the old volume's lookback too), then 100 GiB
LEGACY = 10 * 24  # 240: its request, its volume's capacity not being there
DATASETS = 1000 * 24  # 24,000: mounted all day
# a third of it while three pods mount it (12:00 to 18:04), the api's pod one of them: 2,027.8 (not the half that
# equal shares per workload would give)
API = 1000 * (6 + LOOKBACK) / 3
USAGE = {("vision", FAST): CKPT, ("vision", BULK): SCRATCH + LEGACY + DATASETS, ("nlp", BULK): TRAINERS,
         ("nlp", FAST): CACHE}
WORKLOADS = {("vision", "Deployment/web", FAST): CKPT_WEB, ("vision", "(no workload)", FAST): CKPT - CKPT_WEB,
             ("vision", "(no workload)", BULK): SCRATCH + LEGACY, ("nlp", "StatefulSet/trainer", BULK): TRAINERS,
             ("nlp", "(no workload)", FAST): CACHE, ("vision", "Deployment/web", BULK): DATASETS - API,
             ("vision", "Deployment/api", BULK): API}
# Unused storage (waste, never billed): held less used at the instants the kubelet's used bytes are seen. ckpt: the
# web pod's 06:00 to 12:04 (12:00 to 12:04 its last samples' lookback, in the hour whose highest capacity is 150 GiB);
# data-trainer-0 all day; datasets all day (node-1's kubelet; node-2's too from 12:00 to 18:04, each instant counted
# once); the other claims report no used bytes: not measured
UNUSED_STORAGE = {"vision": (100 - 40) * 6 + (150 - 40) * LOOKBACK + (1000 - 600) * 24, "nlp": (200 - 50) * 24}
CLASSES = {
    # provisioned: pv-ckpt 3,000; pv-cache-a 8 h and its lookback at 64 GiB; pv-cache-b from 08:15 at 100 GiB
    FAST: (100 * 12 + 150 * 12 + 64 * (8 + LOOKBACK) + 100 * (24 - 8.25), CKPT + CACHE, 150 * 6),
    # provisioned: pv-scratch, the trainers', pv-spare (Available all day: unclaimed), pv-datasets
    BULK: (SCRATCH + TRAINERS + 1000 * 24 + DATASETS, SCRATCH + TRAINERS + LEGACY + DATASETS, 1000 * 24),
}


def collected(url: str, cost_labels: list[str] | None):
    config = cluster("jaguar", url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    workloads = () if cost_labels is None else collect_cluster(context, cost_labels).pod_workloads  # the run's way
    return collect_storage(context, cost_labels, workloads)


def unused_storage(url: str) -> dict[str, float]:
    """Per namespace, the unused storage GiB-hours waste measures (collect_waste, workloads off)."""
    config = cluster("jaguar", url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    waste = collect_waste(context, 5.0).dropna(subset=["unused_storage_gib_hours"])
    return dict(zip(waste["namespace"], waste["unused_storage_gib_hours"]))


def reference(of: World, workloads: bool) -> dict:
    return reference_storage(of, "jaguar", D, DAY.end.timestamp(), 60, workloads=workloads)


def assert_close(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key, figures in expected.items():
        assert got[key] == pytest.approx(figures, rel=1e-9, abs=1e-9), key


def test_the_reference_gives_the_figures_worked_out_by_hand():
    """The independent reference (fixtures/reference.py, on the raw samples) agrees with the hand-worked figures,
    so that the stores can be held to it, and to them."""
    plain = reference(world(), workloads=False)
    assert_close(plain.pop(("classes",)), CLASSES)
    assert_close({(namespace, storageclass): hours for (namespace, _, storageclass), hours in plain.items()}, USAGE)
    broken_down = reference(world(), workloads=True)
    broken_down.pop(("classes",))
    assert_close(broken_down, WORKLOADS)


def check(url: str, of: World) -> None:
    """The store's storage of the day `of` equals the reference's, per namespace and class, per workload and per
    class."""
    plain, expected = collected(url, None), reference(of, workloads=False)
    assert set(plain.usage["resource"]) == {"storage"}
    assert set(plain.usage["priority_class"] + plain.usage["pool"]) == {""}
    assert_close({r.storageclass: (r.provisioned, r.claimed, r.unclaimed) for r in plain.classes.itertuples()},
                 expected.pop(("classes",)))
    assert_close({(r.namespace, "", r.gpu_model): r.quantity for r in plain.usage.itertuples()}, expected)

    broken_down, expected = collected(url, ["experiment"]), reference(of, workloads=True)
    expected.pop(("classes",))
    assert_close({(r.namespace, r.workload, r.gpu_model): r.quantity for r in broken_down.workloads.itertuples()},
                 expected)
    assert set(broken_down.workloads["labels"]) == {'{"experiment": ""}'}
    # the same money either way: the mounted claims' bytes are summed per pod over the chunk, the rest per instant
    pd.testing.assert_frame_equal(broken_down.usage, plain.usage, rtol=1e-12)


def test_claims_billed_per_namespace_class_and_workload(store_server):
    """A resize billed from the instant it shows, a Pending claim not, a claim billed at its volume's capacity, the
    Released and Available volumes unclaimed, a StatefulSet's claims its own and an unmounted claim the namespace's:
    backfilled blocks, on Prometheus and VictoriaMetrics."""
    check(store_server(world()).url, world())


def test_labels_a_scrape_without_honor_labels_moved_are_read_where_they_are(prometheus_server):
    """A scrape with `honor_labels: false`: the claims' and pods' namespace is in exported_namespace, kube-state-metrics'
    own in namespace (docs/stores.md); the same figures as the world's (the reference reads the exporter's labels)."""
    url = prometheus_server(replace(world(), honor_labels=False)).url
    check(url, world())
    assert_close(unused_storage(url), UNUSED_STORAGE)  # the kubelet's namespace in exported_namespace too


def test_a_live_store_follows_staleness_markers_and_counts_copies_once(live_store):
    """The same day as a live store holds it: series end at staleness markers (the deleted claim is billed to 18:00,
    not 18:04), and kube-state-metrics replaced at 09:00 (a copy of every series per exporter)."""
    live = replace(world(), staleness=True, exporters=replaced_exporter(at(9)))
    assert reference(live, workloads=False)[("vision", "", FAST)] == pytest.approx(100 * 12 + 150 * 6, rel=1e-9)
    url = live_store(live).url
    check(url, live)
    # the kubelet's used bytes end at the web pod's deletion (12:00), not 12:04; kube-state-metrics' copies once
    assert_close(unused_storage(url), {"vision": (100 - 40) * 6 + (1000 - 600) * 24, "nlp": (200 - 50) * 24})


@pytest.mark.parametrize(("capacity", "shown"), [(float("nan"), "NaN"), (-1000 * GIB, "-"), (float("inf"), "+Inf")])
def test_an_impossible_capacity_refuses_the_day(prometheus_server, tmp_path, capacity, shown):
    """`billing run` of a day on which a bound claim's volume has a NaN, negative (beyond the other claims of its
    namespace and class) or infinite capacity from 10:00: exit 1, naming the series and the fix; nothing written."""
    broken = tuple(Volume(v.name, v.storageclass, ((BEFORE, 200 * GIB), (at(10), capacity)), v.phases)
                   if v.name == "pv-trainer-0" else v for v in VOLUMES)
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}",
                          {"jaguar": prometheus_server(world(broken)).url})
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "cluster jaguar on 2026-11-20: kube_persistentvolume_capacity_bytes{" in said
    assert 'storageclass="bulk"' in said and f"}} is {shown}" in said
    assert "correct the volume's or claim's spec or kube-state-metrics' export of it, then run the day again; " \
           "nothing was billed" in said
    assert not (tmp_path / "ledger.db").exists() or ledger_rows(tmp_path) == 0


def ledger_rows(tmp_path) -> int:
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as connection:
        return int(connection.execute(text("select count(*) from chargeback")).scalar_one())


def test_claims_without_their_volumes_capacity_refuse_the_day(prometheus_server):
    """docs/spec.md rule 10: claims listed but no volume's capacity (kube-state-metrics without persistentvolumes) would
    bill every claim its request; the preflight refuses the day naming the family."""
    config = cluster("jaguar", prometheus_server(world(volumes=())).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    failed = preflight(context, workloads=False).said("FAIL")
    assert "kube_persistentvolume_capacity_bytes is missing" in failed
    assert "kube_persistentvolumeclaim_status_phase" not in failed  # the claims' phase is there
    with pytest.raises(MissingSeries, match="kube_persistentvolume_capacity_bytes is missing"):
        refuse_missing(preflight(context, workloads=False))


def test_billing_checks_storage_line_names_the_classes_and_the_claims_bound(prometheus_server):
    """`billing check`'s storage line: per class the GiB-hours claimed, provisioned and unclaimed (the figures
    above), and the 7 claims bound at some instant (scratch after 03:00, cache in both lives)."""
    config = priced(prometheus_server(world()).url, storage_gib_hour=0.0001)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    assert storage(context) == (
        "2 storage classes on 2026-11-20: bulk 44592.00 GiB-h claimed of 68352.00 provisioned, 24000.00 unclaimed; "
        "fast-nvme 4199.50 GiB-h claimed of 5092.33 provisioned, 900.00 unclaimed; 7 claims bound")


def priced(url: str, **storage_prices: object) -> ClusterConfig:
    """jaguar of `url` with its storage priced so."""
    return ClusterConfig(name="jaguar", prometheus=cluster("jaguar", url).prometheus,
                         prices={**PRICES, **storage_prices})


def test_billing_checks_storage_line_fails_where_the_run_refuses_a_class(prometheus_server):
    """A class the day holds that no price covers, or that `storage_classes` names only in another case, refuses
    `billing run`'s day; the check's storage line said ok. Now it fails with the run's sentence."""
    url = prometheus_server(world()).url
    for storage_classes, sentence in [
        ({"fast-nvme": 0.0002}, "storage class bulk has no price: add it to prices.storage_classes, or "
                                "set prices.storage_gib_hour for every class not listed"),
        ({"fast-nvme": 0.0002, "Bulk": 0.00004}, "storage class bulk is not in prices.storage_classes, "
                                                 "which names Bulk: names are case-sensitive, write it as the store "
                                                 "does (bulk)")]:
        config = priced(url, storage_classes=storage_classes)
        context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
        with pytest.raises(RunFailed) as failed:
            storage(context)
        assert str(failed.value) == f"on 2026-11-20: {sentence}"


def test_a_collected_day_carries_storage_beside_the_usage(prometheus_server, tmp_path):
    """collect_day, as `billing run` collects the day (workloads on by default): storage's rows after the pods' own,
    per namespace and per workload, and the figures per class."""
    config = load_config(Path(write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}",
                                           {"jaguar": prometheus_server(world()).url})))
    jaguar = config.clusters[0]
    day = collect_day(config, jaguar, DAY, LivePrometheus(jaguar.name, jaguar.prometheus))
    usage = day.usage.usage
    stored = usage[usage["resource"] == "storage"]
    assert_close({(r.namespace, r.gpu_model): r.quantity for r in stored.itertuples()}, USAGE)
    assert set(usage["resource"]) == {"cpu", "storage"}  # the pods' one core each, billed as before
    assert day.usage.workloads is not None
    workloads = day.usage.workloads[day.usage.workloads["resource"] == "storage"]
    assert_close({(r.namespace, r.workload, r.gpu_model): r.quantity for r in workloads.itertuples()}, WORKLOADS)
    assert_close({r.storageclass: (r.provisioned, r.claimed, r.unclaimed) for r in day.storage_classes.itertuples()},
                 CLASSES)
    wasted = day.wasted.dropna(subset=["unused_storage_gib_hours"])
    assert_close(dict(zip(wasted["namespace"], wasted["unused_storage_gib_hours"])), UNUSED_STORAGE)
    per_workload = day.workload_wasted.dropna(subset=["unused_storage_gib_hours"])
    assert set(per_workload["workload"]) == {"(no workload)"}  # per namespace only: the namespace's own
    assert per_workload["unused_storage_gib_hours"].sum() == pytest.approx(sum(UNUSED_STORAGE.values()), rel=1e-9)


def test_billing_run_keeps_the_storage_per_class_and_the_admins_page_shows_it(prometheus_server, tmp_path):
    """`billing run` of the day: table cluster_storage holds the figures per class above, the unclaimed priced at the
    class's price and not billed (fast-nvme at 0.0005 a GiB-hour: 900 x 0.0005 = 0.45; bulk at 0.00003:
    24,000 x 0.00003 = 0.72), and the admins' day page shows them."""
    config = Path(write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": prometheus_server(world()).url}))
    settings = yaml.safe_load(config.read_text())
    settings["clusters"][0]["prices"]["storage_classes"] = {FAST: 0.0005, BULK: 0.00003}
    config.write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", str(config)])
    assert result.exit_code == 0, result.output
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as connection:
        kept = pd.read_sql("select * from cluster_storage", connection)
    assert set(kept["cluster"]) == {"jaguar"} and set(kept["day"]) == {"2026-11-20"}
    assert_close({r.storageclass: (r.provisioned, r.claimed, r.unclaimed) for r in kept.itertuples()}, CLASSES)
    assert_close({r.storageclass: (r.unit_price, r.unclaimed_cost) for r in kept.itertuples()},
                 {FAST: (0.0005, 0.45), BULK: (0.00003, 0.72)})
    page = read_page((tmp_path / "reports" / "2026-11-20" / "index.html").read_text())
    assert [row[:2] + row[4:] for row in page.tables["storage"][1:]] == [
        ["jaguar", BULK, "24,000.00 GiB-h", "0.72 USD"], ["jaguar", FAST, "900.00 GiB-h", "0.45 USD"]]
