import pandas as pd
import pytest

from billing.config import Prices
from billing.pricing import price, unit_price

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


def test_price_splits_by_share_and_keeps_the_total():
    usage = pd.DataFrame(
        [
            ("jaguar", "bob", "gpu", "NVIDIA-H100-80GB-HBM3", 24.0),
            ("ibis", "bob", "cpu", "", 100.0),
            ("ibis", "kube-system", "memory", "", 1000.0),
        ],
        columns=["cluster", "namespace", "resource", "gpu_model", "quantity"],
    )
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
