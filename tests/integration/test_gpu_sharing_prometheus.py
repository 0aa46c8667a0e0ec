"""GPU sharing against a real Prometheus and a real VictoriaMetrics (docs/spec.md "GPU sharing").

A random world plus fixtures.ksm's sharing nodes: MIG in mixed strategy (two profiles), a time-sliced
node relabelled from 4 to 2 replicas at noon, MIG in single strategy and an AMD node, beside whole GPUs.
Noon is also where two 6-hour chunks meet; the same world relabelled at 13:30 makes the chunk in which
it happens take the exact path for the node's pods.
GPU-hours are physical-GPU-hours: checked against the reference to 1e-9 and, for the sharing pods, by hand.
"""

import json
from collections import defaultdict
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.charge.pricing import unrequested_capacity
from billing.cli import main
from billing.collect.capacity import collect_allocatable
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.usage import collect_cluster
from billing.collect.waste import collect_waste
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import (
    A100,
    A100_MIG_1G5,
    AMD_PRODUCT_LABEL,
    L40S,
    MI300X,
    MIG_1G,
    MIG_3G,
    REPLICAS_LABEL,
    SHARED_GPU,
    SHARING_GPU_RESOURCES,
    make_world,
    with_gpu_sharing,
)
from fixtures.reference import reference_allocatable, reference_usage, reference_waste
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import PRICES, write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
SHARING = {"vendor_model_labels": [AMD_PRODUCT_LABEL], "replicas_label": REPLICAS_LABEL}


@pytest.fixture(scope="module", params=[12.0, 13.5], ids=["relabel-at-noon", "relabel-mid-chunk"])
def world(request):
    start = DAY.start.timestamp()
    return with_gpu_sharing(make_world(13, start, pods=150, clusters=("jaguar",)), start, relabel_hour=request.param)


def relabel_hour(world) -> float:
    sliced = next(node for node in world.clusters[0].nodes if node.name == "node-sliced")
    return (sliced.labels[1][0] - DAY.start.timestamp()) / 3600


@pytest.fixture
def jaguar(store_server, world):
    prom = store_server(world)
    config = ClusterConfig(name="jaguar", prometheus={"url": prom.url, "selector": 'cluster="jaguar"', "retries": 0},
                           prices=PRICES["jaguar"], vendor_model_labels=[AMD_PRODUCT_LABEL], gpu_replicas_label=REPLICAS_LABEL)
    return config, LivePrometheus("jaguar", config.prometheus)


def reference(world, function):
    return function(world, "jaguar", DAY.start.timestamp(), DAY.end.timestamp(), 60,
                    gpu_resources=SHARING_GPU_RESOURCES, **SHARING)


def test_slices_and_replicas_bill_physical_gpu_hours(jaguar, world):
    config, source = jaguar
    usage = collect_cluster(cluster_day(config, DAY, 60, SHARING_GPU_RESOURCES, source)).usage
    got = usage.groupby(["namespace", "resource", "gpu_model"])["quantity"].sum().to_dict()
    expected = {k: v for k, v in reference(world, reference_usage).items() if v}
    assert sorted(got) == sorted(expected)
    for key, hours in expected.items():
        assert got[key] == pytest.approx(hours, rel=1e-9), key
    # by hand: the sharing pods beside the random world's; a pod that ends in the day is still seen for the
    # 5-minute lookback (its series have no staleness marker), 1/12 h more
    linger = 5 / 60
    assert got[("alice", "gpu", A100)] - _random_pods("alice", A100) == pytest.approx((10 + linger) / 7)  # 1 x 1g
    # bob: two 1g slices 03-15h, one 3g slice from 06h on
    assert got[("bob", "gpu", A100)] - _random_pods("bob", A100) == pytest.approx(2 * (12 + linger) / 7 + 18 * 3 / 7)
    assert got[("team-vision", "gpu", A100)] - _random_pods("team-vision", A100) == pytest.approx(4 * 3 / 7)
    # carol: one replica 08-16h and two all day; a quarter GPU per replica until the relabel (r), a half after
    r = relabel_hour(world)
    assert got[("carol", "gpu", L40S)] == pytest.approx((r - 8 + 2 * r) / 4 + (16 - r + linger + 2 * (24 - r)) / 2)
    # single strategy: three 1g.5gb slices of an A100 sold as nvidia.com/gpu, a seventh of a GPU each
    assert got[("dave", "gpu", A100_MIG_1G5)] == pytest.approx(3 * (4 + linger) / 7)
    assert got[("erin", "gpu", MI300X)] == pytest.approx(2 * (4 + linger))


def _random_pods(namespace: str, model: str) -> float:
    """GPU-hours the random part of the world adds to a namespace on a model (the reference without sharing)."""
    start = DAY.start.timestamp()
    plain = make_world(13, start, pods=150, clusters=("jaguar",))
    return reference_usage(plain, "jaguar", start, DAY.end.timestamp(), 60).get((namespace, "gpu", model), 0.0)


def test_capacity_counts_the_physical_gpus_behind_slices_and_replicas(jaguar, world):
    config, source = jaguar
    allocatable = collect_allocatable(cluster_day(config, DAY, 60, SHARING_GPU_RESOURCES, source))
    usage = collect_cluster(cluster_day(config, DAY, 60, SHARING_GPU_RESOURCES, source)).usage
    capacity = unrequested_capacity(allocatable, usage, config.prices, "jaguar").set_index(["resource", "gpu_model"])
    expected = reference(world, reference_allocatable)
    requested: dict = defaultdict(float)
    for (_, resource, model), hours in reference(world, reference_usage).items():
        requested[(resource, model)] += hours
    for key, hours in expected.items():
        assert capacity.loc[key, "allocatable"] == pytest.approx(hours, rel=1e-9), key
        assert capacity.loc[key, "requested"] + capacity.loc[key, "unrequested"] == pytest.approx(hours, rel=1e-9), key
        assert capacity.loc[key, "requested"] == pytest.approx(requested.get(key, 0.0), rel=1e-9), key
    # by hand: 4 L40S all day (16 replicas of 4, then 8 of 2), 8 MI300X, one A100 in 7 single-strategy slices
    assert capacity.loc[("gpu", L40S), "allocatable"] == pytest.approx(4 * 24)
    assert capacity.loc[("gpu", MI300X), "allocatable"] == pytest.approx(8 * 24)
    assert capacity.loc[("gpu", A100_MIG_1G5), "allocatable"] == pytest.approx(24)
    # the MIG node's 2 A100s (8 x 1g + 2 x 3g) are 2 GPUs, beside the random world's whole A100s
    plain = reference_allocatable(make_world(13, DAY.start.timestamp(), pods=150, clusters=("jaguar",)), "jaguar",
                                  DAY.start.timestamp(), DAY.end.timestamp(), 60)
    assert capacity.loc[("gpu", A100), "allocatable"] - plain[("gpu", A100)] == pytest.approx(2 * 24)


def test_an_idle_mig_slice_is_the_fraction_of_a_gpu_it_stands_for(jaguar, world):
    """Only the sharing pods report utilisation. alice's 1g.10gb slice is idle (0%) until 10:00 (+ the lookback),
    bob's 3g.40gb at 1% from 06:00 on, dave's three single-strategy 1g.5gb slices at 2% 10-14h (no resource names
    their profile: a seventh of an A100 each, by DCGM's modelName); bob's 1g slices (40%) and all others are busy.
    Their DCGM_FI_DEV_GPU_UTIL series of 0 (GPU_I_ID set: no utilisation for MIG instances) must not count as
    idle whole GPUs."""
    config, source = jaguar
    waste = collect_waste(cluster_day(config, DAY, 60, SHARING_GPU_RESOURCES, source), 5.0).set_index("namespace")
    idle = waste["idle_gpu_hours"].dropna()
    assert idle[idle > 0].to_dict() == pytest.approx(
        {"alice": (10 + 5 / 60) / 7, "bob": 18 * 3 / 7, "dave": 3 * (4 + 5 / 60) / 7})
    expected = reference_waste(world, "jaguar", DAY.start.timestamp(), DAY.end.timestamp(), 60,
                               gpu_resources=SHARING_GPU_RESOURCES)
    for namespace, (idle_hours, _) in expected.items():
        assert idle.get(namespace, 0.0) == pytest.approx(idle_hours, rel=1e-9, abs=1e-12), namespace


def test_billing_run_keeps_what_was_held_and_reports_separate_it(store_server, world, tmp_path):
    """The ledger's gpu rows are physical GPU-hours at the physical model's price; gpu_holdings says what they
    held; `billing report --by resource` separates slices from whole GPUs and adds up to the same total."""
    prom = store_server(world)
    config_path = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": prom.url})
    config = yaml.safe_load(Path(config_path).read_text())
    config.update(gpu_resources={**SHARING_GPU_RESOURCES, MIG_1G: "1/7", MIG_3G: "3/7"},
                  gpu_replicas_label=REPLICAS_LABEL)
    config["clusters"][0]["vendor_model_labels"] = [AMD_PRODUCT_LABEL]
    slice_price = 0.20  # a 1g.5gb slice-hour (single strategy), by the slice's own name
    config["clusters"][0]["prices"]["gpu_models"][A100_MIG_1G5] = slice_price
    config["waste"] = {"enabled": False}
    with open(config_path, "w") as stream:
        yaml.safe_dump(config, stream)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config_path])
    assert result.exit_code == 0, result.output

    with create_engine(config["database"]).connect() as conn:
        ledger = pd.read_sql("select * from chargeback where resource = 'gpu'", conn)
        held = pd.read_sql("select * from gpu_holdings", conn)
    keys = ["cluster", "namespace", "team", "gpu_model"]
    rows = ledger.groupby(keys)[["quantity", "cost"]].sum()
    sums = held.groupby(keys)[["gpu_hours", "cost"]].sum()
    assert sorted(rows.index) == sorted(sums.index)
    for key in rows.index:  # a row's holdings add up to it
        assert sums.loc[key].tolist() == pytest.approx(rows.loc[key].tolist(), rel=1e-9), key
    # dave's three 1g.5gb slices 10-14h (+ the lookback): physical GPU-hours, costing the slice-hours' price
    dave = ledger.set_index(["namespace", "gpu_model"]).loc[("dave", A100_MIG_1G5)]
    slice_hours = 3 * (4 + 5 / 60)
    assert dave["quantity"] == pytest.approx(slice_hours / 7) and dave["cost"] == pytest.approx(slice_hours * slice_price)
    sliced = held[held["gpu_model"] == A100_MIG_1G5]
    assert sliced[["namespace", "resource", "held_hours"]].values.tolist() == [
        ["dave", "nvidia_com_mig_1g_5gb", pytest.approx(slice_hours)]]
    carol = ledger.set_index(["namespace", "gpu_model"]).loc[("carol", L40S)]
    expected = reference(world, reference_usage)[("carol", "gpu", L40S)]
    assert carol["quantity"] == pytest.approx(expected, rel=1e-9) and carol["unit_price"] == PRICES["jaguar"]["gpu_hour"]

    def report(*args: str) -> dict:
        answer = CliRunner().invoke(main, ["report", "--from", "2026-11-20", "--to", "2026-11-20", *args,
                                           "--config", config_path])
        assert answer.exit_code == 0, answer.output
        return answer.output

    # robotics: alice's 1g slice (10 h + the lookback) and half of bob's (two slices 03-15h) and 3g slice (18 h)
    linger = 5 / 60
    by_resource = {row["resource"]: row for row in
                   json.loads(report("--team", "robotics", "--by", "resource", "--format", "json"))["rows"]}
    one_g = by_resource[MIG_1G]
    assert one_g["held_hours"] == pytest.approx(10 + linger + (12 + linger))
    assert one_g["gpu_hours"] == pytest.approx((10 + linger + (12 + linger)) / 7)
    assert one_g["cost"] == pytest.approx(one_g["gpu_hours"] * PRICES["jaguar"]["gpu_models"][A100])
    assert by_resource[MIG_3G]["gpu_hours"] == pytest.approx(18 * 3 / 7 / 2)
    assert "gpu" not in by_resource and by_resource["nvidia_com_gpu"]["gpu_hours"] > 0
    by_namespace = json.loads(report("--team", "robotics", "--by", "namespace", "--format", "json"))
    assert sum(r["cost"] for r in by_resource.values()) == pytest.approx(by_namespace["total_cost"], rel=1e-9)
    alice = next(row for row in by_namespace["rows"] if row["namespace"] == "alice")
    assert alice["gpu_held"] == [{"resource": MIG_1G, "held_hours": pytest.approx(10 + linger),
                                  "gpu_hours": pytest.approx((10 + linger) / 7)}]
    assert "GPU-h (physical)" in report("--team", "robotics")  # the table, shortened to 80 columns
    assert "10.08 × 1g.10gb slice-h" in report("--team", "robotics", "--by", "namespace", "--format", "csv")
    nlp = report("--team", "nlp", "--by", "namespace", "--format", "html")
    replicas = f"{(16 - 8 + linger) + 2 * 24:.2f} × {SHARED_GPU} replica-h"
    assert replicas in nlp
    # the nightly team pages: a GPU row says what it was held as, each part in its own units and in GPU-hours
    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "nlp.html").read_text())
    r = relabel_hour(world)  # carol's replicas: a quarter GPU each until the relabel, a half after
    l40s = (r - 8 + 2 * r) / 4 + (16 - r + linger + 2 * (24 - r)) / 2
    assert [cell for row in page.tables["team-usage"] for cell in row if "held as" in cell] == [
        f"GPU {L40S} held as {replicas} = {l40s:.2f} GPU-h"]
    # robotics' A100 row: alice's and half of bob's slices, and whole A100s of the random world's pods; it was
    # "held as" the slices alone, as if all its GPU-hours were slices
    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text())
    a100 = next(row for row in page.tables["team-usage"] if A100 in row[1])
    one_g, three_g = (10 + linger + 12 + linger), 18 / 2
    robotics_a100 = ledger[(ledger["team"] == "robotics") & (ledger["gpu_model"] == A100)]["quantity"].sum()
    whole = robotics_a100 - one_g / 7 - three_g * 3 / 7
    assert a100[1] == (f"GPU {A100} held as {one_g:.2f} × 1g.10gb slice-h = {one_g / 7:.2f} GPU-h, "
                       f"{three_g:.2f} × 3g.40gb slice-h = {three_g * 3 / 7:.2f} GPU-h, {whole:.2f} GPU-h as whole GPUs")
