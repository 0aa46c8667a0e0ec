"""billing report run against the hand-worked ledger."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day

H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"


FORMULA_TEAM = "=cmd|' /C calc'!A0"


# day -> (cluster, namespace, team, owner, resource, gpu_model, quantity, unit_price)
# 2026-11-03 is never run (missing); 2026-11-05 is run and had no usage (zero, not missing).
LEDGER = {
    date(2026, 11, 1): [
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 24.0, 2.4),  # 57.60
        ("jaguar", "alice", "robotics", "alice", "cpu", "", 100.0, 0.012),  # 1.20
        ("jaguar", "alice", "robotics", "alice", "memory", "", 400.0, 0.0015),  # 0.60
        ("ibis", "evil", FORMULA_TEAM, None, "cpu", "", 1.0, 1.0),  # 1.00
    ],
    date(2026, 11, 2): [
        ("ibis", "team-robotics", "robotics", None, "gpu", "", 10.0, 2.95),  # 29.50
        ("jaguar", "bob", "robotics", "bob", "gpu", A100, 6.0, 1.6),  # 9.60, bob is on two teams
        ("jaguar", "bob", "vision", "bob", "gpu", A100, 6.0, 1.6),  # 9.60
    ],
    date(2026, 11, 4): [
        ("ibis", "alice", "robotics", "alice", "cpu", "", 50.0, 0.034),  # 1.70
        ("jaguar", "alice", "robotics", "alice", "gpu", H100, 500.0, 2.4),  # 1,200.00
        ("jaguar", "team-vision", "vision", None, "cpu", "", 10.0, 0.012),  # 0.12
    ],
    date(2026, 11, 5): [],
}


GAPS = {date(2026, 11, 4): 0.925}  # ibis's kube-state-metrics data had a hole of 7.5 % of that day


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path: Path) -> str:
    """The URL of an empty ledger database of each kind."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def config(database: str, write_config) -> str:
    """A config file whose ledger holds LEDGER."""
    engine = open_ledger(database)
    columns = ["cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity", "unit_price"]
    for day, rows in LEDGER.items():
        frame = pd.DataFrame(rows, columns=columns)
        costed = frame.assign(cost=frame["quantity"] * frame["unit_price"], list_cost=lambda f: f["cost"])
        replace_day(engine, day, DayBill(costed, coverage={"jaguar": 1.0, "ibis": GAPS.get(day, 1.0)}), "USD")
    engine.dispose()
    return str(write_config(database=database, currency="USD"))


def report(config: str, *args: str):
    return CliRunner().invoke(main, ["report", "--config", config, *args])


def report_json(config: str, *args: str) -> dict:
    result = report(config, *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
