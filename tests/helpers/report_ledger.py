"""A small ledger whose report figures are worked out by hand in the comments.

Billing days: 2026-10-25 (last month, inside the 30-day trend), 2026-11-01,
2026-11-10 (run, nothing used), 2026-11-19 and 2026-11-20 (the report day).
Every other day of the window was never run.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd

from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.write import replace_day
from tests.helpers.ledgers import new_ledger

DAY = date(2026, 11, 20)
H100 = "NVIDIA-H100-80GB-HBM3"

#        cluster   namespace        team           owner    resource  gpu_model quantity unit_price cost
ROWS = {
    date(2026, 10, 25): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 100.0, 2.40, 240.00),
    ],
    date(2026, 11, 1): [
        ("jaguar", "team-robotics", "robotics", None, "cpu", "", 1000.0, 0.012, 12.00),
    ],
    date(2026, 11, 10): [],
    date(2026, 11, 19): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 5.0, 2.40, 12.00),
        ("ibis", "bob", "vision", "bob", "gpu", "", 1.0, 2.95, 2.95),
    ],
    DAY: [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.40, 24.00),
        ("jaguar", "alice", "robotics", "alice", "cpu", "", 100.0, 0.012, 1.20),
        ("jaguar", "team-robotics", "robotics", None, "memory", "", 1000.0, 0.0015, 1.50),
        # bob is on two teams: his 4 GPU-h are split 2 and 2 (docs/spec.md "Rule 7: owner and team")
        ("ibis", "bob", "robotics", "bob", "gpu", "", 2.0, 2.95, 5.90),
        ("ibis", "bob", "vision", "bob", "gpu", "", 2.0, 2.95, 5.90),
        ("ibis", "stray", "unallocated", None, "cpu", "", 50.0, 0.034, 1.70),
        ("jaguar", "kube-system", "platform", None, "cpu", "", 10.0, 0.012, 0.12),
    ],
}

# 2026-11-20 by hand
DAY_TOTAL = "40.32"  # 24 + 1.20 + 1.50 + 5.90 + 5.90 + 1.70 + 0.12
TEAM_COST = {"robotics": "32.60", "vision": "5.90", "unallocated": "1.70", "platform": "0.12"}
TEAM_CHANGE = {"robotics": "+20.60", "vision": "+2.95", "unallocated": "+1.70", "platform": "+0.12"}
DAY_CHANGE = "+25.37"  # 40.32 - (12.00 + 2.95)
# November 1 to 20: 12.00 + 14.95 + 40.32
MONTH_TOTAL = "67.27"
TEAM_MONTH = {"robotics": "56.60", "vision": "8.85", "unallocated": "1.70", "platform": "0.12"}
MISSING_IN_MONTH = [date(2026, 11, d) for d in (*range(2, 10), *range(11, 19))]


def frame(rows: list[tuple]) -> pd.DataFrame:
    """Priced rows; a row without a list cost had no discount (list cost = cost)."""
    rows = [row if len(row) == len(frames.ROWS.columns) else (*row, row[-1]) for row in rows]
    return pd.DataFrame(rows, columns=frames.ROWS.columns)


def write_ledger(path: Path, rows: dict = ROWS) -> str:
    """A SQLite ledger at path holding `rows` per day; returns its URL."""
    return fill_ledger(f"sqlite:///{path}", rows)


def fill_ledger(url: str, rows: dict = ROWS) -> str:
    """The ledger at `url` (SQLite or PostgreSQL) holding `rows` per day; returns the URL."""
    engine = new_ledger(url)
    for day, day_rows in rows.items():
        replace_day(engine, day, DayBill(frame(day_rows)), "USD")
    engine.dispose()
    return url


# What pods bound to a node held on DAY before they ran: the pods of tests/integration/test_bound_pending_prometheus.py,
# shown, not charged (bound_pending: show), priced as jaguar's rows above
#        cluster   namespace team        owner    resource gpu_model reason                  quantity unit_price cost
HELD = [
    # the image pull: 30 minutes of 1 GPU and 8 cores
    ("jaguar", "alice", "robotics", "alice", "gpu", H100, "ContainerCreating", 0.5, 2.40, 1.20),
    ("jaguar", "alice", "robotics", "alice", "cpu", "", "ContainerCreating", 4.0, 0.012, 0.048),
    # the stage-dataset init container: 20 minutes of 4 cores, bob's namespace split between his two teams
    ("jaguar", "bob", "robotics", "bob", "cpu", "", "InitContainersRunning", 2 / 3, 0.012, 0.008),
    ("jaguar", "bob", "vision", "bob", "cpu", "", "InitContainersRunning", 2 / 3, 0.012, 0.008),
    # 8 GPUs bound for 6 hours: ContainerCreating for 10 minutes, then ImagePullBackOff
    ("jaguar", "carol", "nlp", "carol", "gpu", H100, "ContainerCreating", 8 / 6, 2.40, 3.20),
    ("jaguar", "carol", "nlp", "carol", "gpu", H100, "ImagePullBackOff", 8 * 35 / 6, 2.40, 112.00),
]


def write_held_ledger(path: Path) -> str:
    """The ledger of `write_ledger` with HELD on DAY; returns its URL."""
    url = write_ledger(path)
    columns = [column for column in frames.BOUND_PENDING_COSTS.columns if column != "workload"]
    held = pd.DataFrame([(*row, row[-1], False) for row in HELD], columns=columns).assign(workload="")  # workloads off
    engine = new_ledger(url)
    replace_day(engine, DAY, DayBill(frame(ROWS[DAY]), bound_pending=held), "USD")
    engine.dispose()
    return url
