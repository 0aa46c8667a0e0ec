"""Service units of ledger rows (docs/spec.md "Service units, credits and subsidies"): the one place SU are
computed, so that a statement line, a report row and an allocation drawn down read the same figure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import numpy as np
import pandas as pd

from billing.charge.pricing import unit_price
from billing.config import ClusterConfig, ConfigError, Prices
from billing.resources import base

# what service_units reads of a ledger row
SU_COLUMNS = ["day", "cluster", "resource", "gpu_model", "quantity"]


def service_units(rows: pd.DataFrame, clusters: Sequence[ClusterConfig]) -> pd.Series:
    """Each row's SU: its quantity (resource-hours) times the SU weight of its resource and GPU model in the price
    set in force on its day (Slurm's TRES billing weights, summed over resources). NaN where that set has no
    `service_units`, the cluster is not configured, or no set is in force on the day: no SU, which is not 0 SU."""
    if rows.empty:
        return pd.Series(np.nan, index=rows.index, dtype=float)
    by_name = {cluster.name: cluster for cluster in clusters}
    rates = {(day, cluster): _rates(by_name.get(cluster), day)
             for day, cluster in rows[["day", "cluster"]].drop_duplicates().itertuples(index=False)}
    keys = rows[["day", "cluster", "resource", "gpu_model"]].drop_duplicates()
    weights = [np.nan if (set_ := rates[day, cluster]) is None else unit_price(set_, base(resource), gpu_model)
               for day, cluster, resource, gpu_model in keys.itertuples(index=False)]
    weighed = rows[keys.columns].merge(keys.assign(weight=weights), how="left", on=list(keys.columns))
    return pd.Series(rows["quantity"].to_numpy(dtype=float) * weighed["weight"].to_numpy(dtype=float),
                     index=rows.index)


def _rates(cluster: ClusterConfig | None, day: date) -> Prices | None:
    """The SU weights in force on the cluster's day, as a price set (a ledger resource such as `credit-gpu` weighs
    as its base); None: none."""
    if cluster is None:
        return None
    try:
        return cluster.prices_on(day).su_rates()
    except ConfigError:  # a day before the first price set: the ledger has it from an earlier config
        return None
