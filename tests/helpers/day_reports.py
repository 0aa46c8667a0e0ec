"""The hand-worked ledger (tests/helpers/report_ledger.py) opened, its day's report, and its workload costs."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill
from billing.ledger.database import open_ledger
from billing.ledger.read import read_rows
from billing.ledger.write import replace_day
from billing.publish.dayview import read_report
from tests.helpers.report_ledger import (
    DAY,
    write_ledger,
)


@pytest.fixture
def ledger(tmp_path):
    return open_ledger(write_ledger(tmp_path / "ledger.db"))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The day's report of a ledger of its own, built once per module: its tests only read it."""
    return read_report(open_ledger(write_ledger(tmp_path_factory.mktemp("report") / "ledger.db")), DAY, "USD",
                       "unallocated")


# 2026-11-19 and 2026-11-20 of tests/helpers/report_ledger.py below the namespace, adding up to its costs
#        cluster   namespace        team           owner    workload               cost
WORKLOADS = {
    date(2026, 11, 19): [
        ("jaguar", "alice", "robotics", "alice", "Job/train-a", 12.00),
        ("ibis", "bob", "vision", "bob", "Deployment/notebook", 2.95),
    ],
    DAY: [
        ("jaguar", "alice", "robotics", "alice", "Job/train-b", 24.00),
        ("jaguar", "alice", "robotics", "alice", "Deployment/jupyter", 1.20),
        ("jaguar", "team-robotics", "robotics", None, "Pod/debug", 1.50),
        ("ibis", "bob", "robotics", "bob", "Deployment/notebook", 5.90),
        ("ibis", "bob", "vision", "bob", "Deployment/notebook", 5.90),
        ("ibis", "stray", "unallocated", None, "Pod/x", 1.70),
        ("jaguar", "kube-system", "platform", None, "Deployment/coredns", 0.12),
    ],
}


def with_workload_costs(ledger, days=tuple(WORKLOADS)):
    """Re-run `days` of the ledger with their workload costs (one cpu row each: only costs matter here)."""
    for day in days:
        rows = read_rows(ledger, day, day).drop(columns=["day", "currency", "computed_at"])
        workloads = pd.DataFrame([(c, ns, team, owner, w, "{}", "cpu", "", 1.0, cost, cost)
                                  for c, ns, team, owner, w, cost in WORKLOADS[day]], columns=frames.WORKLOAD_COSTS.columns)
        replace_day(ledger, day, DayBill(rows, workloads=workloads), "USD")
    return ledger
