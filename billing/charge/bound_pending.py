"""What pods bound to a node held before they ran (docs/spec.md "Rule 2: running"), in the words of the night's log
and `billing check`."""

from __future__ import annotations

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
