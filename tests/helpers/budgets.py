"""A budgeted team's days billed by the job with collection stubbed, for the budget, alert and mail tests."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import billing.collect.day
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.days import days_in_month
from tests.helpers.config import stub_node_metrics
from tests.helpers.jobs import LDIF, USAGE
from tests.helpers.report_ledger import write_ledger

# what the job bills each day, worked by hand: alice's 10 GPU-h at 2.00 = 20.00 and 100 core-h at 0.01 = 1.00
#        cluster   namespace team        owner    resource gpu_model quantity unit_price cost
A_DAY = [("jaguar", "alice", "robotics", "alice", "cpu", "", 100.0, 0.01, 1.00),
         ("jaguar", "alice", "robotics", "alice", "gpu", "", 10.0, 2.00, 20.00)]


@pytest.fixture
def budget_job(tmp_path, monkeypatch):
    """write(**email) -> the path of a config billing 21.00 a day to robotics against a budget of 50.00."""
    monkeypatch.setattr(billing.collect.day, "collect_cluster",
                        lambda context, *args: ClusterUsage(context.cluster.name, USAGE, 1, 0, 1.0))
    stub_node_metrics(monkeypatch)
    (tmp_path / "directory.ldif").write_text(LDIF)
    settings = {
        "currency": "USD",
        "database": f"sqlite:///{tmp_path / 'ledger.db'}",
        "output_dir": str(tmp_path / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"replay": str(tmp_path)},
                      "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0}}],
        "directory": {"ldif": str(tmp_path / "directory.ldif")},
        "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]},
        "budgets": {"monthly": {"robotics": 50}, "alert_at": [0.5, 1.0]},
    }

    def write(**email) -> str:
        settings["email"].update(email)
        (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
        return str(tmp_path / "billing.yaml")

    return write


def run(config: str, *args: str) -> None:
    result = CliRunner().invoke(main, [*args, "--config", config])
    assert result.exit_code == 0, result.output


def billed_month(ledger: Path, month: date) -> None:
    """Every night of `month` as the budget job bills it (A_DAY), written straight to the ledger: the same rows
    as backfilling the month through the command, in a fraction of a second instead of minutes."""
    write_ledger(ledger, {month + timedelta(days=n): A_DAY for n in range(days_in_month(month))})
