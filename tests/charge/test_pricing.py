from dataclasses import replace
from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.pricing import (
    model_price,
    price,
    price_holdings,
    reserve_pools,
    share_unrequested,
    unit_price,
    unpriced_models,
    unrequested_capacity,
)
from billing.config import ClusterConfig, Prices
from billing.resources import REGISTRY

H100 = "NVIDIA-H100-80GB-HBM3"

PRICES = {
    "jaguar": Prices(cpu_core_hour=0.012, memory_gib_hour=0.0015, gpu_hour=1.10,
                     gpu_models={"NVIDIA-H100-80GB-HBM3": 2.40}),
    "ibis": Prices(cpu_core_hour=0.034, memory_gib_hour=0.0045, gpu_hour=2.95),
}


def test_unit_prices_per_cluster_and_model():
    assert unit_price(PRICES["jaguar"], "gpu", "NVIDIA-H100-80GB-HBM3") == 2.40
    assert unit_price(PRICES["jaguar"], "gpu", "NVIDIA-A100-SXM4-80GB") == 1.10  # no own price: gpu_hour
    assert unit_price(PRICES["jaguar"], "gpu", "") == 1.10
    assert unit_price(PRICES["ibis"], "gpu", "NVIDIA-H100-80GB-HBM3") == 2.95
    assert unit_price(PRICES["ibis"], "cpu", "") == 0.034
    assert unit_price(PRICES["ibis"], "memory", "") == 0.0045


def test_storage_is_priced_per_class_else_at_storage_gib_hour():
    prices = Prices(cpu_core_hour=0.0, memory_gib_hour=0.0, gpu_hour=1.10,
                    storage_classes={"fast-nvme": 0.00014, "bulk": 0.0})
    assert unit_price(prices, "storage", "fast-nvme") == 0.00014 and unit_price(prices, "storage", "bulk") == 0.0
    assert model_price(prices, "storage", "archive") is None  # no price: the day is refused before pricing
    with pytest.raises(ValueError, match="storage of model 'archive' has no price"):
        unit_price(prices, "storage", "archive")
    defaulted = replace_prices(prices, storage_gib_hour=0.00005)
    assert unit_price(defaulted, "storage", "archive") == 0.00005 and unit_price(defaulted, "storage", "bulk") == 0.0


def test_each_unpriced_class_is_one_sentence_naming_it_and_both_keys():
    prices = Prices(cpu_core_hour=0.01, memory_gib_hour=0.0, gpu_hour=1.10, storage_classes={"fast-nvme": 0.00014})
    usage = pd.DataFrame([("alice", "storage", "archive", "", "", 100.0), ("bob", "storage", "fast-nvme", "", "", 5.0),
                          ("bob", "storage", "", "", "", 1.0), ("bob", "cpu", "", "", "", 1.0),
                          ("alice", "gpu", "NVIDIA-A30", "", "", 1.0)], columns=frames.USAGE.columns)
    assert unpriced_models(usage, prices, "clusters[0].prices[1]") == [
        "storage class (none) has no price: add it to clusters[0].prices[1].storage_classes, or set "
        "clusters[0].prices[1].storage_gib_hour for every class not listed",
        "storage class archive has no price: add it to clusters[0].prices[1].storage_classes, or set "
        "clusters[0].prices[1].storage_gib_hour for every class not listed"]
    assert unpriced_models(usage, replace_prices(prices, storage_gib_hour=0.0), "clusters[0].prices") == []


def test_a_class_priced_only_in_another_case_is_refused_even_where_a_default_would_price_it():
    """`Fast-NVMe` for the store's `fast-nvme` would bill it at storage_gib_hour: a typo, named, not a price."""
    prices = Prices(cpu_core_hour=0.01, memory_gib_hour=0.0, gpu_hour=1.10, storage_gib_hour=0.00005,
                    storage_classes={"Fast-NVMe": 0.00014})
    usage = pd.DataFrame([("bob", "storage", "fast-nvme", "", "", 5.0), ("bob", "storage", "bulk", "", "", 5.0)],
                         columns=frames.USAGE.columns)
    assert unpriced_models(usage, prices, "clusters[0].prices") == [
        "storage class fast-nvme is not in clusters[0].prices.storage_classes, which names Fast-NVMe: names are "
        "case-sensitive, write it as the store does (fast-nvme)"]


def replace_prices(prices: Prices, **changes: object) -> Prices:
    return Prices.model_validate({**prices.model_dump(), **changes})


def test_a_slice_sold_as_a_whole_gpu_costs_its_slice_hours_price():
    """MIG single strategy: the row is in physical GPU-hours (a 1g.5gb slice-hour is 1/7 GPU-h), so its own price
    per slice-hour is 7 times that per GPU-hour; without one, its whole GPU's price (or gpu_hour) applies."""
    prices = Prices(cpu_core_hour=0.0, memory_gib_hour=0.0, gpu_hour=1.10,
                    gpu_models={"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb": 0.20, "NVIDIA-A100-SXM4-40GB": 1.50})
    slice_hours = 12.25
    per_gpu_hour = unit_price(prices, "gpu", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
    assert per_gpu_hour == pytest.approx(1.40) and slice_hours / 7 * per_gpu_hour == pytest.approx(2.45)
    assert unit_price(prices, "gpu", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb") == 1.50
    assert unit_price(prices, "gpu", "NVIDIA-A30-MIG-1g.6gb") == 1.10


def test_price_splits_by_share_and_keeps_the_total():
    usage = pd.DataFrame(
        [
            ("jaguar", "bob", "gpu", "NVIDIA-H100-80GB-HBM3", 24.0),
            ("ibis", "bob", "cpu", "", 100.0),
            ("ibis", "kube-system", "memory", "", 1000.0),
        ],
        columns=["cluster", "namespace", "resource", "gpu_model", "quantity"],
    ).assign(priority_class="")
    ownership = pd.DataFrame(
        [("bob", "nlp", "bob", 0.5), ("bob", "robotics", "bob", 0.5), ("kube-system", "platform", None, 1.0)],
        columns=["namespace", "team", "owner", "share"],
    )
    rows = price(usage, ownership, PRICES)
    by_team = rows.groupby("team")["cost"].sum()
    # 24 H100-hours at 2.40 = 57.60 and 100 core-hours at 0.034 = 3.40, halved over two teams
    assert by_team["nlp"] == pytest.approx((57.60 + 3.40) / 2)
    assert by_team["robotics"] == pytest.approx((57.60 + 3.40) / 2)
    assert by_team["platform"] == pytest.approx(1000 * 0.0045)
    assert rows["quantity"].sum() == pytest.approx(usage["quantity"].sum())
    assert rows.loc[rows["team"] == "platform", "owner"].isna().all()
    assert set(rows.loc[rows["team"] == "nlp", "owner"]) == {"bob"}


def test_unrequested_capacity_is_shared_in_proportion_to_cost():
    rows = pd.DataFrame([
        ("jaguar", "alice", "robotics", "alice", "gpu", "NVIDIA-H100-80GB-HBM3", 12.5, 2.4, 30.0, 30.0),
        ("jaguar", "team-vision", "vision", None, "cpu", "", 1000.0, 0.01, 10.0, 10.0),
        ("jaguar", "scratch", "unallocated", None, "cpu", "", 100.0, 0.01, 0.0, 1.0),  # backfill: free
        ("ibis", "bob", "vision", "bob", "cpu", "", 100.0, 0.05, 5.0, 5.0),
    ], columns=frames.ROWS.columns)
    capacity = pd.DataFrame([
        ("jaguar", "gpu", "NVIDIA-H100-80GB-HBM3", 4.0, 2.5),
        ("jaguar", "cpu", "", 100.0, 0.01),
        ("jaguar", "memory", "", 0.0, 0.002),  # nothing unrequested: no rows
    ], columns=["cluster", "resource", "gpu_model", "unrequested", "unit_price"]).assign(pool="")
    reserved = pd.DataFrame([("jaguar", "gpu", "NVIDIA-H100-80GB-HBM3", 16.0, 2.4, "robotics-h100")],
                            columns=["cluster", "resource", "gpu_model", "unrequested", "unit_price", "pool"])
    capacity = pd.concat([capacity, reserved])  # a reserved pool's unrequested capacity is its team's, never shared
    shared = share_unrequested(capacity, rows, "unallocated")
    # alice paid 30 of 40 on jaguar: 3/4 of 4 unrequested GPU-h (7.50) and of 100 unrequested core-h (0.75); vision 1/4
    got = {(r.namespace, r.team, r.resource): (r.quantity, r.cost) for r in shared.itertuples()}
    assert got.keys() == {("alice", "robotics", "unrequested-gpu"), ("alice", "robotics", "unrequested-cpu"),
                          ("team-vision", "vision", "unrequested-gpu"), ("team-vision", "vision", "unrequested-cpu")}
    assert got[("alice", "robotics", "unrequested-gpu")] == pytest.approx((3.0, 7.5))
    assert got[("alice", "robotics", "unrequested-cpu")] == pytest.approx((75.0, 0.75))
    assert got[("team-vision", "vision", "unrequested-gpu")] == pytest.approx((1.0, 2.5))
    assert got[("team-vision", "vision", "unrequested-cpu")] == pytest.approx((25.0, 0.25))
    assert set(shared.loc[shared["namespace"] == "alice", "owner"]) == {"alice"}
    assert set(shared["gpu_model"]) == {"NVIDIA-H100-80GB-HBM3", ""}
    # the cluster's ledger now adds up to what was paid plus the whole unrequested cost: 40 + 10 + 1
    assert rows.loc[rows["cluster"] == "jaguar", "cost"].sum() + shared["cost"].sum() == pytest.approx(51.0)


def test_unrequested_capacity_of_a_cluster_nobody_paid_for_goes_to_the_unallocated_team():
    capacity = pd.DataFrame([("heron", "gpu", "", "", 24.0, 0.6)],
                            columns=["cluster", "resource", "gpu_model", "pool", "unrequested", "unit_price"])
    shared = share_unrequested(capacity, pd.DataFrame(columns=frames.ROWS.columns), "unallocated")
    assert shared[["namespace", "team", "resource", "quantity", "cost"]].values.tolist() == [
        ["", "unallocated", "unrequested-gpu", 24.0, pytest.approx(14.4)]]


def test_priority_classes_discount_the_cost_but_keep_the_hours():
    prices = {"jaguar": Prices(cpu_core_hour=0.01, memory_gib_hour=0.001, gpu_hour=2.0,
                               priority_classes={"backfill": 0.0, "premium": 1.5})}
    usage = pd.DataFrame([
        ("jaguar", "alice", "gpu", "", "", 3.0),
        ("jaguar", "alice", "gpu", "", "backfill", 5.0),
        ("jaguar", "alice", "gpu", "", "premium", 2.0),
        ("jaguar", "kube-system", "cpu", "", "backfill", 100.0),
    ], columns=["cluster", "namespace", "resource", "gpu_model", "priority_class", "quantity"])
    ownership = pd.DataFrame([("alice", "robotics", "alice", 0.5), ("alice", "vision", "alice", 0.5),
                              ("kube-system", "platform", None, 1.0)], columns=["namespace", "team", "owner", "share"])
    rows = price(usage, ownership, prices).set_index("team")
    # alice: 10 GPU-h at 2.00 list = 20.00; paid 3 x 2 + 5 x 0 + 2 x 2 x 1.5 = 12.00; half to each team
    for team in ("robotics", "vision"):
        assert rows.loc[team, ["quantity", "unit_price", "list_cost", "cost"]].tolist() == pytest.approx([5, 2, 10, 6])
    assert rows.loc["platform", ["quantity", "list_cost", "cost"]].tolist() == pytest.approx([100, 1.0, 0.0])


def test_a_reserved_pool_charges_its_team_the_capacity_and_credits_it_the_use():
    jaguar = ClusterConfig(
        name="jaguar", prometheus={"url": "http://prometheus:9090"},
        prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0, "gpu_models": {H100: 2.4},
                "priority_classes": {"backfill": 0.0}},
        reserved_pools={"node_label": "label_pool", "teams": {"robotics-h100": "robotics"}})
    capacity = pd.DataFrame([
        ("jaguar", "gpu", H100, "robotics-h100", 192.0, 2.4),  # one node: 8 H100 x 24 h
        ("jaguar", "cpu", "", "robotics-h100", 2304.0, 0.01),  # and 96 cores
        ("jaguar", "gpu", H100, "", 384.0, 2.4),  # the rest of the cluster is nobody's pool
    ], columns=["cluster", "resource", "gpu_model", "pool", "allocatable", "unit_price"])
    usage = pd.DataFrame([
        ("jaguar", "alice", "gpu", H100, "", "robotics-h100", 10.0),  # the pool's own team
        ("jaguar", "carol", "gpu", H100, "", "robotics-h100", 4.0),  # another team
        ("jaguar", "carol", "gpu", H100, "backfill", "robotics-h100", 2.0),  # another team, free
        ("jaguar", "team-nlp", "cpu", "", "", "robotics-h100", 100.0),
        ("jaguar", "carol", "gpu", H100, "", "", 5.0),  # not on the pool: no credit
    ], columns=["cluster", "namespace", "resource", "gpu_model", "priority_class", "pool", "quantity"])
    ownership = pd.DataFrame([("alice", "robotics", "alice", 1.0), ("carol", "nlp", "carol", 1.0),
                              ("team-nlp", "nlp", None, 1.0)], columns=["namespace", "team", "owner", "share"])
    pool = reserve_pools(capacity, usage, ownership, [jaguar], {"jaguar": jaguar.prices_on(date(2026, 11, 20))})
    got = {(r.namespace, r.team, r.resource): (r.quantity, r.cost) for r in pool.itertuples()}
    assert got == {
        ("pool:robotics-h100", "robotics", "reserved-gpu"): pytest.approx((192.0, 460.8)),
        ("pool:robotics-h100", "robotics", "reserved-cpu"): pytest.approx((2304.0, 23.04)),
        ("alice", "robotics", "credit-gpu"): pytest.approx((-10.0, -24.0)),
        ("carol", "robotics", "credit-gpu"): pytest.approx((-6.0, -9.6)),  # the backfill hours were paid 0
        ("team-nlp", "robotics", "credit-cpu"): pytest.approx((-100.0, -1.0)),
    }
    assert set(pool.loc[pool["namespace"] == "carol", "owner"]) == {"carol"}
    # robotics pays the pool once: its capacity 483.84 less what nlp paid for using it (9.60 + 1.00)
    usage_rows = price(usage, ownership, {"jaguar": jaguar.prices})
    robotics = pd.concat([usage_rows, pool]).query("team == 'robotics'")["cost"].sum()
    assert robotics == pytest.approx(483.84 - 10.60)


def test_holdings_split_a_gpu_row_by_the_resources_it_held():
    # bob held 14 1g.10gb slice-hours (2 H100-hours) and 3 whole H100-hours: one gpu row of 5 H100-hours at 2.40
    # = 12.00, split over two teams; the slices' share of each team's row is 2/5 of its cost, 2.40
    usage = pd.DataFrame([("jaguar", "bob", "gpu", H100, 5.0)],
                         columns=["cluster", "namespace", "resource", "gpu_model", "quantity"]).assign(priority_class="")
    ownership = pd.DataFrame([("bob", "nlp", "bob", 0.5), ("bob", "robotics", "bob", 0.5)],
                             columns=["namespace", "team", "owner", "share"])
    holdings = pd.DataFrame([("jaguar", "bob", "nvidia_com_mig_1g_10gb", H100, 14.0, 2.0),
                             ("jaguar", "bob", "nvidia_com_gpu", H100, 3.0, 3.0)],
                            columns=["cluster", "namespace", "resource", "gpu_model", "held_hours", "gpu_hours"])
    held = price_holdings(holdings, ownership, price(usage, ownership, PRICES)).set_index(["team", "resource"])
    assert held.loc[("nlp", "nvidia_com_mig_1g_10gb"), ["held_hours", "gpu_hours", "cost"]].tolist() == \
        pytest.approx([7.0, 1.0, 2.40])
    assert held.loc[("robotics", "nvidia_com_gpu"), ["held_hours", "gpu_hours", "cost"]].tolist() == \
        pytest.approx([1.5, 1.5, 3.60])
    assert held["cost"].sum() == pytest.approx(12.0) and set(held["owner"]) == {"bob"}


def test_a_resource_nodes_do_not_offer_has_no_capacity_row(monkeypatch, caplog):
    """The registry says which resources nodes offer (Resource.offered_by_nodes): only those have allocatable
    capacity and an unrequested rest, and only they are warned of when requests pass allocatable. A licence seat,
    which no node offers: 3 seat-hours requested, no capacity row, no warning; CPU beside it as always, 10
    allocatable less 4 requested = 6 core-h unrequested at 0.01."""
    seat = replace(REGISTRY["cpu"], name="seat", price_key="seat_hour", offered_by_nodes=False)
    monkeypatch.setitem(REGISTRY, "seat", seat)
    allocatable = pd.DataFrame([("cpu", "", "", 10.0)], columns=["resource", "gpu_model", "pool", "allocatable"])
    usage = pd.DataFrame([("alice", "cpu", "", "", "", 4.0), ("alice", "seat", "", "", "", 3.0)],
                         columns=frames.USAGE.columns)
    prices = Prices(cpu_core_hour=0.01, memory_gib_hour=0.001, gpu_hour=1.0)
    with caplog.at_level("WARNING"):
        capacity = unrequested_capacity(allocatable, usage, prices, "jaguar")
    assert capacity[["resource", "allocatable", "requested", "unrequested"]].values.tolist() == [["cpu", 10.0, 4.0, 6.0]]
    assert capacity["unrequested_cost"].tolist() == pytest.approx([0.06]) and not caplog.records
