"""Unit prices and costs (SPEC.md rules 6 and 8)."""

from __future__ import annotations

import pandas as pd

from billing.config import Prices

PRICED_COLUMNS = [
    "cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost",
]


def unit_price(prices: Prices, resource: str, gpu_model: str) -> float:
    """Price of one resource-hour; a GPU model without its own price pays gpu_hour."""
    if resource == "gpu":
        return prices.gpu_models.get(gpu_model, prices.gpu_hour)
    return {"cpu": prices.cpu_core_hour, "memory": prices.memory_gib_hour}[resource]


def price(usage: pd.DataFrame, ownership: pd.DataFrame, prices: dict[str, Prices]) -> pd.DataFrame:
    """Ledger rows: each namespace's usage split over its teams and priced per cluster.

    usage: cluster, namespace, resource, gpu_model, quantity.
    ownership: namespace, team, owner, share.
    """
    rows = usage.merge(ownership, on="namespace", how="left", validate="many_to_many")
    if rows["team"].isna().any():
        missing = sorted(rows.loc[rows["team"].isna(), "namespace"].unique())
        raise ValueError(f"namespaces without an owner: {missing[:5]}")  # a bug, never an input problem
    rows["quantity"] = rows["quantity"] * rows["share"]
    rows["unit_price"] = [
        unit_price(prices[c], r, m) for c, r, m in zip(rows["cluster"], rows["resource"], rows["gpu_model"])
    ]
    rows["cost"] = rows["quantity"] * rows["unit_price"]
    return rows[PRICED_COLUMNS].sort_values(PRICED_COLUMNS[:6], ignore_index=True)
