"""A night's use of each allocation (docs/spec.md "Allocations"): the account's share of the day's charges, per team
and cluster, in the allocation's unit (SU, from billing/charge/service_units.py, or money) and in money. The ledger
keeps it and draws each allocation down in day order (billing/ledger/allocations.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import numpy as np
import pandas as pd

from billing import frames
from billing.accounts import Accounts
from billing.allocations import Allocation
from billing.charge.service_units import service_units
from billing.config import ClusterConfig


def allocation_use(rows: pd.DataFrame, day: date, accounts: Accounts | None, allocations: Sequence[Allocation],
                   clusters: Sequence[ClusterConfig]) -> pd.DataFrame:
    """Per allocation holding `day`, team and cluster: what the day's `rows` (frames.ROWS) charge its account, in
    its unit and in money. A team's part below 0 on a cluster (the account credited more than charged there) is
    no use; rows without SU (a cluster without weights) use nothing of an allocation of SU."""
    held = [allocation for allocation in allocations if allocation.holds(day)]
    if accounts is None or not held or rows.empty:
        return frames.ALLOCATION_USE.empty()
    percents: dict[str, list[float]] = {allocation.account: [] for allocation in held}
    for team, namespace, owner in zip(rows["team"], rows["namespace"], rows["owner"], strict=True):
        shares = {share.account.id: float(share.percent) for share in
                  accounts.shares(day, team, namespace, owner if isinstance(owner, str) else None)}
        for account, found in percents.items():
            found.append(shares.get(account, 0.0) / 100)
    units = service_units(rows.assign(day=day), clusters).fillna(0.0).to_numpy(dtype=float) \
        if any(allocation.in_su for allocation in held) else np.zeros(len(rows))
    parts = []
    for allocation in held:
        share = np.asarray(percents[allocation.account])
        cost = rows["cost"].to_numpy(dtype=float) * share
        used = units * share if allocation.in_su else cost
        part = (pd.DataFrame({"team": rows["team"], "cluster": rows["cluster"], "used": used, "used_cost": cost})
                .groupby(["team", "cluster"], as_index=False)[["used", "used_cost"]].sum())
        part = part[part["used"] > 0]
        parts.append(part.assign(account=allocation.account, starts=allocation.first))
    return pd.concat(parts)[frames.ALLOCATION_USE.columns].reset_index(drop=True)
