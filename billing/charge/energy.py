"""The energy no pod accounts for, shared where a cluster says so (docs/spec.md "Energy and carbon": `energy.share_unattributed`).

The collector keeps a cluster's unattributed kWh in two parts, as it keeps every namespace's: its GPUs' (GPUs held by
no pod) and its CPU and memory's (what Kepler's node counters counted beyond the pods'). Each part is shared over the
namespaces in proportion to their own kWh of that part, so that a namespace that held no GPU pays no idle GPU, and the
GPU users pay none of the CPU nodes' idle power beyond their own CPU share.
"""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd

PARTS = ("gpu_kwh", "cpu_kwh")  # frames.ENERGY's parts, each shared apart


def share_unattributed(energy: pd.DataFrame, sharing: Collection[str]) -> pd.DataFrame:
    """`energy` (cluster and frames.ENERGY, namespace '' the unattributed) with `shared_kwh`: on each cluster of
    `sharing`, a namespace's share of each unattributed part (part x its kWh of the part / all namespaces' kWh of it),
    and minus what was shared on the unattributed row, so that each cluster's shared_kwh add up to 0 and its
    namespaces' to what was unattributed. A part unknown (NaN) or that no namespace drew stays unattributed; 0 on a
    cluster that does not share."""
    own = energy["namespace"] != ""
    shares = energy["cluster"].isin(list(sharing))
    shared = pd.Series(0.0, index=energy.index)
    for part in PARTS:
        kwh = energy[part].fillna(0.0)  # an unknown part: nothing known to share, nobody known to share it with
        attributed = kwh.where(own, 0.0)
        unattributed = kwh.where(~own, 0.0).groupby(energy["cluster"]).transform("sum")
        total = attributed.groupby(energy["cluster"]).transform("sum")
        each = (unattributed * attributed / total.where(total > 0)).where(own, -unattributed)
        shared += each.where(shares & (total > 0), 0.0)
    return energy.assign(shared_kwh=shared)
