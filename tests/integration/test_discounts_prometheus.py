"""Discounts by pod priority class, end to end against a real Prometheus.

One GPU pod of the generated world is made a backfill pod (multiplier 0);
the world's batch-low pods pay half. Expected costs come from the reference
quantities per priority class, the hand mapping of namespaces to teams and
the prices, worked out here.
"""

from collections import defaultdict
from dataclasses import replace
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_usage
from tests.helpers.prometheus_jobs import HAND_MAPPING, PRICES, write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
MULTIPLIERS = {"backfill": 0.0, "batch-low": 0.5}


@pytest.fixture(scope="module")
def world():
    """The first GPU pod that runs at noon in alice's namespace becomes a backfill pod."""
    world = make_world(5, DAY.start.timestamp(), pods=200, clusters=("jaguar",))
    jaguar = world.clusters[0]
    noon = DAY.start.timestamp() + 12 * 3600
    index = next(i for i, p in enumerate(jaguar.pods) if p.namespace == "alice" and p.created < noon < p.deleted
                 and any(c.gpu for c in p.containers) and any(phase == "Running" for _, phase in p.phases))
    pods = list(jaguar.pods)
    pods[index] = replace(pods[index], priority_class="backfill")
    return replace(world, clusters=(replace(jaguar, pods=tuple(pods)),))


def unit_price(resource: str, model: str) -> float:
    prices = PRICES["jaguar"]
    if resource == "gpu":
        return prices["gpu_models"].get(model, prices["gpu_hour"])
    return prices["cpu_core_hour" if resource == "cpu" else "memory_gib_hour"]


def test_backfill_runs_free_and_the_ledger_keeps_its_hours(store_server, world, tmp_path):
    prom = store_server(world)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": prom.url})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["prices"]["priority_classes"] = MULTIPLIERS
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output

    expected = defaultdict(lambda: [0.0, 0.0, 0.0])  # team -> [quantity, list cost, cost]
    backfill_gpu_hours = 0.0
    usage = reference_usage(world, "jaguar", DAY.start.timestamp(), DAY.end.timestamp(), 60, by_priority_class=True)
    for (namespace, resource, model, priority_class), hours in usage.items():
        if priority_class == "backfill" and resource == "gpu":
            backfill_gpu_hours += hours
        for team, share in HAND_MAPPING.get(namespace, [("unallocated", 1)]):
            list_cost = hours * share * unit_price(resource, model)
            expected[team][0] += hours * share
            expected[team][1] += list_cost
            expected[team][2] += list_cost * MULTIPLIERS.get(priority_class, 1.0)
    assert backfill_gpu_hours > 1  # the backfill pod ran GPUs for a while on the day

    with create_engine(database).connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
    by_team = ledger.groupby("team")[["quantity", "list_cost", "cost"]].sum()
    assert sorted(by_team.index) == sorted(expected)
    for team, (quantity, list_cost, cost) in expected.items():
        assert by_team.loc[team].tolist() == pytest.approx([quantity, list_cost, cost], rel=1e-9), team
    # alice (robotics) is where the backfill pod ran: its GPU hours are all there, at a discount
    alice = ledger[(ledger["namespace"] == "alice") & (ledger["resource"] == "gpu")]
    assert (alice["list_cost"] - alice["cost"]).sum() >= backfill_gpu_hours * 1.10 - 1e-9
    assert (ledger["list_cost"] == ledger["quantity"] * ledger["unit_price"]).all()

    # the team's page shows the discount
    page = (tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text()
    discount = expected["robotics"][1] - expected["robotics"][2]
    assert f"Priority classes: {discount:,.2f} USD off the list price of {expected['robotics'][1]:,.2f} USD" in page
