"""Costs below the namespace (docs/spec.md "Workloads and experiment labels"): the ledger's rows split over workloads.

Each `chargeback` row of what a namespace requested (cpu, memory, gpu) or held (storage) is split over the namespace's
workloads and cost-label sets the way the row itself was made: the workloads' usage is priced exactly
as the namespace's (the same teams and shares, unit prices and priority-class discounts), and the
last part of each row takes what the others leave, so that the parts add up to the row's quantity,
cost and list cost. Rows no pod requested (reserved-*, credit-* and unrequested-* rows, and any row of a
cluster whose workloads were not collected) get one part of the whole row under the workload
UNATTRIBUTED; so does the part of a row no workload holds (workload '' in the usage: storage no pod mounts).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

import pandas as pd

from billing import frames
from billing.charge.pricing import price
from billing.charge.workload_names import UNATTRIBUTED
from billing.collect.usage import labels_json
from billing.config import Prices
from billing.frames import require_columns

BELOW = ["workload", "labels"]
ROW_KEYS = ["cluster", "namespace", "team", "resource", "gpu_model"]  # one chargeback row (owner follows the team)
AMOUNTS = ["quantity", "cost", "list_cost"]


def workload_costs(usage: pd.DataFrame, ownership: pd.DataFrame, prices: dict[str, Prices], rows: pd.DataFrame,
                   cost_labels: Sequence[str]) -> pd.DataFrame:
    """frames.WORKLOAD_COSTS.columns rows that add up to `rows` per ROW_KEYS.

    usage: cluster and frames.WORKLOAD_USAGE of the clusters whose workloads were collected (workload '' where none
    holds it);
    ownership as for pricing.price; rows: the day's ledger rows (frames.ROWS)."""
    require_columns(usage, ["cluster", *frames.WORKLOAD_USAGE.columns], "workload usage")
    frames.ROWS.check(rows, "ledger rows to split over workloads")
    # no workload ('') is what the namespace holds that no pod's workload does (storage no pod mounts): the same part
    # as the rows no pod requested
    parts = price(usage.assign(workload=usage["workload"].replace("", UNATTRIBUTED)), ownership, prices, below=BELOW)
    parts = parts[parts["quantity"] != 0].astype({amount: float for amount in AMOUNTS})
    amounts = rows.astype({amount: float for amount in AMOUNTS})
    whole = amounts.groupby(ROW_KEYS, dropna=False, as_index=False)[AMOUNTS].sum()
    parts = parts.merge(whole, on=ROW_KEYS, how="inner", suffixes=("", "_row"), validate="many_to_one")
    last = ~parts.duplicated(ROW_KEYS, keep="last")
    for amount in AMOUNTS:  # the last part of each row: the row less the others (summed in order)
        before = parts.assign(before=parts.groupby(ROW_KEYS, dropna=False)[amount].shift(fill_value=0.0))
        others = before.groupby(ROW_KEYS, dropna=False)["before"].cumsum()
        parts.loc[last, amount] = parts.loc[last, f"{amount}_row"] - others[last]
    split = parts[ROW_KEYS].drop_duplicates()
    rest = rows.merge(split, on=ROW_KEYS, how="left", indicator=True)
    unsplit = rest[rest["_merge"] == "left_only"].groupby([*ROW_KEYS, "owner"], dropna=False, as_index=False)[AMOUNTS]
    rest = unsplit.sum().assign(workload=UNATTRIBUTED, labels=labels_json(("",) * len(cost_labels), tuple(cost_labels)))
    frame = pd.concat([parts[frames.WORKLOAD_COSTS.columns], rest[frames.WORKLOAD_COSTS.columns]], ignore_index=True)
    return frame.sort_values(frames.WORKLOAD_COSTS.columns[:8], ignore_index=True)


def kept_since(today: date, keep_days: int | None) -> date | None:
    """The first day whose workload rows are kept: the `keep_days` days before today; None: every day."""
    return None if keep_days is None else today - timedelta(days=keep_days)
