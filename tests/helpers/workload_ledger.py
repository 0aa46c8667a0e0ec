"""A small ledger with costs per workload and cost label, its breakdowns worked out by hand below.

Cost label `experiment`. 2026-11-01 is broken down by workload and label;
2026-11-02 was billed without workload rows (before they were kept, or with
workloads off); 2026-11-03's workload rows have no cost labels (billed
before `experiment` was in cost_labels); 2026-11-04 was never run.
"""

from __future__ import annotations

from datetime import date

import pandas as pd
from sqlalchemy import Engine

from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.write import replace_day
from tests.helpers.report_ledger import H100, frame

FIRST, LAST = date(2026, 11, 1), date(2026, 11, 4)
MISSING = [date(2026, 11, 4)]
EXP1, EXP2, NONE = '{"experiment": "exp-1"}', '{"experiment": "exp-2"}', '{"experiment": ""}'

#        cluster   namespace        team        owner    resource gpu_model quantity unit_price cost
LEDGER = {
    date(2026, 11, 1): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.40, 24.00),
        ("jaguar", "alice", "robotics", "alice", "cpu", "", 100.0, 0.012, 1.20),
        ("ibis", "bob", "robotics", "bob", "gpu", "", 2.0, 2.95, 5.90),  # bob is on two teams
        ("ibis", "bob", "vision", "bob", "gpu", "", 2.0, 2.95, 5.90),
        ("jaguar", "team-robotics", "robotics", None, "memory", "", 1000.0, 0.0015, 1.50),
    ],
    date(2026, 11, 2): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 5.0, 2.40, 12.00),
    ],
    date(2026, 11, 3): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 1.0, 2.40, 2.40),
    ],
}

#        cluster   namespace        team        owner    workload               labels resource gpu_model quantity cost
WORKLOADS = {
    date(2026, 11, 1): [
        ("jaguar", "alice", "robotics", "alice", "Job/train-a", EXP1, "gpu", H100, 6.0, 14.40),
        ("jaguar", "alice", "robotics", "alice", "Deployment/notebook", NONE, "gpu", H100, 4.0, 9.60),
        ("jaguar", "alice", "robotics", "alice", "Job/train-a", EXP1, "cpu", "", 60.0, 0.72),
        ("jaguar", "alice", "robotics", "alice", "Deployment/notebook", NONE, "cpu", "", 40.0, 0.48),
        ("ibis", "bob", "robotics", "bob", "StatefulSet/db", EXP1, "gpu", "", 2.0, 5.90),
        ("ibis", "bob", "vision", "bob", "StatefulSet/db", EXP1, "gpu", "", 2.0, 5.90),
        ("jaguar", "team-robotics", "robotics", None, "Deployment/web", EXP2, "memory", "", 1000.0, 1.50),
    ],
    date(2026, 11, 3): [
        ("jaguar", "alice", "robotics", "alice", "CronJob/nightly", "{}", "gpu", H100, 1.0, 2.40),
    ],
}

# team robotics, 2026-11-01 to 2026-11-04, by hand
ROBOTICS_TOTAL = 47.00  # 24 + 1.20 + 5.90 + 1.50 (Nov 1) + 12.00 (Nov 2) + 2.40 (Nov 3)
NAMESPACE_TOTALS = {"alice": 39.60, "bob": 5.90, "team-robotics": 1.50}
# (namespace, workload) -> cost, most expensive first
BY_WORKLOAD = {
    ("alice", "Job/train-a"): 15.12,  # 14.40 + 0.72
    ("alice", "(not broken down)"): 12.00,  # Nov 2
    ("alice", "Deployment/notebook"): 10.08,  # 9.60 + 0.48
    ("bob", "StatefulSet/db"): 5.90,
    ("alice", "CronJob/nightly"): 2.40,
    ("team-robotics", "Deployment/web"): 1.50,
}
# (namespace, experiment) -> cost
BY_EXPERIMENT = {
    ("alice", "exp-1"): 15.12,
    ("alice", "(not broken down)"): 14.40,  # Nov 2 (no workload rows) + Nov 3 (no label recorded)
    ("alice", ""): 10.08,  # the notebook has no experiment label
    ("bob", "exp-1"): 5.90,
    ("team-robotics", "exp-2"): 1.50,
}


def workload_frame(rows: list[tuple]) -> pd.DataFrame:
    """Workload rows without discounts (list cost = cost)."""
    columns = [c for c in frames.WORKLOAD_COSTS.columns if c != "list_cost"]
    return pd.DataFrame(rows, columns=columns).assign(list_cost=lambda f: f["cost"])[frames.WORKLOAD_COSTS.columns]


def fill(engine: Engine) -> None:
    """Write LEDGER and WORKLOADS into the ledger at `engine`."""
    for day, rows in LEDGER.items():
        replace_day(engine, day, DayBill(frame(rows), workloads=workload_frame(WORKLOADS.get(day, []))), "USD")
