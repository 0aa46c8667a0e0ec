"""A day's bill: every frame charging hands the ledger, in one value.

The ledger writes a DayBill in one transaction (billing/ledger/write.py);
each frame is checked against its schema here, where it crosses from charging
to the ledger, so a frame missing a column fails before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from billing import frames


@dataclass(frozen=True)
class DayBill:
    """The day's chargeback rows and what is written beside them, for every cluster."""

    rows: pd.DataFrame  # frames.ROWS: what each team pays, per namespace, resource and GPU model
    capacity: pd.DataFrame = field(default_factory=frames.CAPACITY.empty)
    wasted: pd.DataFrame = field(default_factory=frames.CHARGED_WASTE.empty)  # held but not used, per team
    held: pd.DataFrame = field(default_factory=frames.HOLDINGS.empty)  # which GPU resources the `gpu` rows held
    # the rows and the waste below the namespace; None with workloads off
    workloads: pd.DataFrame | None = None
    workload_wasted: pd.DataFrame | None = None
    coverage: dict[str, float] = field(default_factory=dict)  # each cluster's share of the day with data
    # why a cluster's capacity is unknown (it has no `capacity` rows), for the clusters whose capacity is
    capacity_unknown: dict[str, str] = field(default_factory=dict)
    # what pods bound to a node held while Pending: in `rows` too where its cluster charges it
    bound_pending: pd.DataFrame = field(default_factory=frames.BOUND_PENDING_COSTS.empty)
    unlent: pd.DataFrame = field(default_factory=frames.UNLENT.empty)  # Kueue borrowing no team lent: shown only

    def __post_init__(self) -> None:
        frames.ROWS.check(self.rows, "the day's ledger rows")
        frames.CAPACITY.check(self.capacity)
        frames.CHARGED_WASTE.check(self.wasted)
        frames.HOLDINGS.check(self.held)
        frames.BOUND_PENDING_COSTS.check(self.bound_pending)
        frames.UNLENT.check(self.unlent)
        if self.workloads is not None:
            frames.WORKLOAD_COSTS.check(self.workloads)
        if self.workload_wasted is not None:
            frames.CHARGED_WORKLOAD_WASTE.check(self.workload_wasted)
