"""DataFrames handed from one module to the next, checked where they cross.

A frame's columns are the interface between two steps (collect → job,
ownership → pricing, pricing → ledger): each receiver names the columns it
reads, so a renamed or missing column fails at the border with a sentence
naming both sides, not as a KeyError deep inside, or as a silently empty merge.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

# the longest name a Kubernetes object can have (a DNS subdomain): the most a ledger's name column holds
LONGEST_NAME = 253

# a day's costs per workload and cost labels, as charging hands them to the ledger (table workload_costs)
WORKLOAD_COST_COLUMNS = [
    "cluster", "namespace", "team", "owner", "workload", "labels", "resource", "gpu_model", "quantity", "cost", "list_cost",
]


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    """`frame` itself, once it has every one of `columns`; a ValueError (a bug, never bad input) if not."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {', '.join(missing)}; it has {', '.join(map(str, frame.columns))}")
    return frame
