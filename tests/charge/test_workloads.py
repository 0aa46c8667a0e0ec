"""billing.charge.workloads: ledger rows split over workloads and cost labels, with hand-worked numbers."""

from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.pricing import price
from billing.charge.workloads import UNATTRIBUTED, kept_since, workload_costs
from billing.config import Prices

H100 = "NVIDIA-H100-80GB-HBM3"
PRICES = {"jaguar": Prices(cpu_core_hour=0.01, memory_gib_hour=0.001, gpu_hour=1.0, gpu_models={H100: 2.5},
                           priority_classes={"batch-low": 0.5})}
# bob is on two teams (half each); team-nlp belongs to nlp
OWNERSHIP = pd.DataFrame([("bob", "nlp", "bob", 0.5), ("bob", "robotics", "bob", 0.5), ("team-nlp", "nlp", None, 1.0)],
                         columns=["namespace", "team", "owner", "share"])
X1, NONE = '{"experiment": "x1"}', '{"experiment": ""}'


def usage_by_workload() -> pd.DataFrame:
    return pd.DataFrame([
        # bob: 10 H100-hours of a Deployment (6 of them at batch-low), 2 of a bare pod; 30 core-hours
        ("bob", "Deployment/train", X1, "gpu", H100, "", "", 4.0),
        ("bob", "Deployment/train", X1, "gpu", H100, "batch-low", "", 6.0),
        ("bob", "Pod/debug", NONE, "gpu", H100, "", "", 2.0),
        ("bob", "Deployment/train", X1, "cpu", "", "", "", 20.0),
        ("bob", "CronJob/nightly", NONE, "cpu", "", "", "", 10.0),
        ("team-nlp", "StatefulSet/db", NONE, "memory", "", "", "", 1000.0),
    ], columns=frames.WORKLOAD_USAGE.columns).assign(cluster="jaguar")


def namespace_rows(usage: pd.DataFrame) -> pd.DataFrame:
    by_namespace = usage.groupby(["cluster", "namespace", "resource", "gpu_model", "priority_class"], as_index=False)
    return price(by_namespace["quantity"].sum(), OWNERSHIP, PRICES)


def test_each_row_is_split_over_its_workloads_with_their_own_discounts():
    usage = usage_by_workload()
    rows = namespace_rows(usage)
    parts = workload_costs(usage, OWNERSHIP, PRICES, rows, ["experiment"])
    assert list(parts.columns) == frames.WORKLOAD_COSTS.columns
    got = {(r.team, r.workload, r.resource): (r.quantity, r.cost, r.list_cost) for r in parts.itertuples()}
    # by hand, per team (half of bob each): Deployment/train 5 H100-hours, 2 of them at list (2 x 2.5 = 5.0)
    # and 3 at half price (3 x 2.5 x 0.5 = 3.75): cost 8.75, list 12.5; Pod/debug 1 H100-hour: 2.5
    for team in ("nlp", "robotics"):
        assert got[(team, "Deployment/train", "gpu")] == pytest.approx((5.0, 8.75, 12.5), rel=1e-12)
        assert got[(team, "Pod/debug", "gpu")] == pytest.approx((1.0, 2.5, 2.5), rel=1e-12)
        assert got[(team, "Deployment/train", "cpu")] == pytest.approx((10.0, 0.1, 0.1), rel=1e-12)
        assert got[(team, "CronJob/nightly", "cpu")] == pytest.approx((5.0, 0.05, 0.05), rel=1e-12)
    assert got[("nlp", "StatefulSet/db", "memory")] == pytest.approx((1000.0, 1.0, 1.0), rel=1e-12)
    assert parts.loc[parts["workload"] == "Deployment/train", "labels"].unique().tolist() == [X1]
    assert set(parts.loc[parts["namespace"] == "bob", "owner"]) == {"bob"}
    assert parts.loc[parts["namespace"] == "team-nlp", "owner"].isna().all()
    assert_sums_equal(parts, rows)


def assert_sums_equal(parts: pd.DataFrame, rows: pd.DataFrame) -> None:
    keys = ["cluster", "namespace", "team", "resource", "gpu_model"]
    summed = parts.groupby(keys)[["quantity", "cost", "list_cost"]].sum()
    whole = rows.groupby(keys)[["quantity", "cost", "list_cost"]].sum()
    assert sorted(summed.index) == sorted(whole.index)
    for key in whole.index:
        for amount in ("quantity", "cost", "list_cost"):
            assert summed.loc[key, amount] == pytest.approx(whole.loc[key, amount], rel=1e-12, abs=1e-15), (key, amount)


def test_rows_no_workload_requested_are_one_part_of_the_namespace_as_a_whole():
    usage = usage_by_workload()
    pool = pd.DataFrame([("jaguar", "pool:h100", "vision", None, "reserved-gpu", H100, 48.0, 2.5, 120.0, 120.0),
                         ("jaguar", "bob", "nlp", "bob", "unrequested-cpu", "", 7.0, 0.01, 0.07, 0.07)],
                        columns=rows_columns())
    rows = pd.concat([namespace_rows(usage), pool], ignore_index=True)
    parts = workload_costs(usage, OWNERSHIP, PRICES, rows, ["experiment", "example.com/project"])
    whole = parts[parts["workload"] == UNATTRIBUTED]
    assert sorted(whole["resource"]) == ["reserved-gpu", "unrequested-cpu"]
    assert set(whole["labels"]) == {'{"example.com/project": "", "experiment": ""}'}
    assert whole.set_index("resource")["cost"].to_dict() == {"unrequested-cpu": 0.07, "reserved-gpu": 120.0}
    assert_sums_equal(parts, rows)


def rows_columns() -> list[str]:
    return ["cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost",
            "list_cost"]


def test_a_cluster_without_workloads_is_split_into_namespaces_as_a_whole():
    usage = usage_by_workload()
    rows = namespace_rows(usage)
    parts = workload_costs(usage.iloc[:0], OWNERSHIP, PRICES, rows, [])
    assert set(parts["workload"]) == {UNATTRIBUTED} and set(parts["labels"]) == {"{}"}
    assert len(parts) == len(rows)
    assert_sums_equal(parts, rows)


def test_the_last_part_takes_what_the_others_leave():
    # three workloads of a tenth of a core-hour each: 0.1 + 0.1 + 0.1 is not 0.3 in binary
    usage = pd.DataFrame([("team-nlp", f"Job/j{i}", "{}", "cpu", "", "", "", 0.1) for i in range(3)],
                         columns=frames.WORKLOAD_USAGE.columns).assign(cluster="jaguar")
    rows = namespace_rows(usage)
    parts = workload_costs(usage, OWNERSHIP, PRICES, rows, [])
    assert parts["quantity"].tolist()[:2] == [0.1, 0.1]
    assert parts["quantity"].iloc[2] == rows["quantity"].iloc[0] - 0.2


@pytest.mark.parametrize("keep_days, since", [(None, None), (1, date(2026, 11, 20)), (30, date(2026, 10, 22))])
def test_workload_rows_are_kept_the_days_before_today(keep_days, since):
    assert kept_since(date(2026, 11, 21), keep_days) == since


def test_storage_no_pod_mounts_is_the_namespaces_no_workload_beside_a_claim_a_workload_mounts():
    """The workload usage names no workload ('') for a claim no pod mounts: by hand, team-nlp's 24,000 GiB-hours of
    fast-nvme at 0.0002 (4.80) are 12,000 of StatefulSet/db's claim (2.40) and 12,000 of one no pod mounts (2.40),
    not all of it StatefulSet/db's as the last part of the row."""
    prices = {"jaguar": Prices(cpu_core_hour=0.0, memory_gib_hour=0.0, gpu_hour=0.0, storage_classes={"fast-nvme": 0.0002})}
    usage = pd.DataFrame([("team-nlp", "StatefulSet/db", NONE, "storage", "fast-nvme", "", "", 12_000.0),
                          ("team-nlp", "", NONE, "storage", "fast-nvme", "", "", 12_000.0)],
                         columns=frames.WORKLOAD_USAGE.columns).assign(cluster="jaguar")
    by_namespace = usage.groupby(["cluster", "namespace", "resource", "gpu_model", "priority_class"], as_index=False)
    rows = price(by_namespace["quantity"].sum(), OWNERSHIP, prices)
    parts = workload_costs(usage, OWNERSHIP, prices, rows, ["experiment"])
    assert {row.workload: (row.quantity, round(row.cost, 9)) for row in parts.itertuples()} == {
        "StatefulSet/db": (12_000.0, 2.40), UNATTRIBUTED: (12_000.0, 2.40)}
