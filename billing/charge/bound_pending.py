"""What pods bound to a node held before they ran (docs/spec.md "Rule 2: running"), in the words of the night's log
and `billing check`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from billing.resources import UNITS


def held_sentence(resource: str, held: pd.DataFrame, share: str = "") -> str:
    """What pods bound to a node held of one resource before they ran (`held`: rows with reason and quantity), as the
    night's log and `billing check` say it, with `share` (what it is a share of) after the total: '49.17 GPU-h held
    by pods bound to a node, not yet Running, 3.1% of the bill; 46.67 of them in ImagePullBackOff'."""
    unit = UNITS.get(resource, f"{resource}-h")
    by_reason = held.groupby("reason")["quantity"].sum().sort_values(ascending=False, kind="stable")
    sentence = f"{by_reason.sum():,.2f} {unit} held by pods bound to a node, not yet Running" + (f", {share}" if share else "")
    if by_reason.index[0]:  # the reason that dominated: the most resource-hours
        sentence += f"; {by_reason.iloc[0]:,.2f} of them in {by_reason.index[0]}"
    return sentence


def held_by_resource(hours: pd.DataFrame) -> list[str]:
    """Per resource, what pods bound to a node held (`hours`: resource, reason, quantity; reason None for what
    Running pods requested) and its share of what Running pods requested, as `billing check` says it; none where
    no pod bound to a node was Pending."""
    held, running = hours[hours["reason"].notna()], hours[hours["reason"].isna()].groupby("resource")["quantity"].sum()
    lines = []
    resource: Any  # a group key (pandas-stubs types it as Hashable)
    for resource, by_reason in held.groupby("resource"):
        ran = float(running.get(resource, 0.0))
        share = f"{by_reason['quantity'].sum() / ran:.1%} of what Running pods requested" if ran else ""
        lines.append(f"{resource} {held_sentence(resource, by_reason, share)}")
    return lines


def bill_sentences(bound_pending: pd.DataFrame, rows: pd.DataFrame) -> list[tuple[str, str]]:
    """Per cluster and resource of the night's log: what pods bound to a node held before they ran, its share of the
    cluster's bill (the charged part of it, or what it would add) and the reason that held most of it."""
    bills = rows.groupby("cluster")["cost"].sum()
    said = []
    cluster: Any  # the group keys (pandas-stubs types them as Hashable)
    resource: Any
    for (cluster, resource), held in bound_pending.groupby(["cluster", "resource"]):
        bill = float(bills.get(cluster, 0.0))
        share = f"{held['cost'].sum() / bill:.1%} of the bill" if bill else ""
        if share and not held["charged"].all():
            share += " (shown, not charged)"
        said.append((cluster, held_sentence(resource, held, share)))
    return said
