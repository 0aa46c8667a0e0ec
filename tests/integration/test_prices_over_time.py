"""Dated price sets, end to end against a real Prometheus (docs/spec.md "Prices over time and cost recovery").

jaguar's contract changes on 2026-11-20: CPU from 0.012 to 0.010 a core-hour, H100 from 2.40 to 2.10 a
GPU-hour. The world spans 19 and 20 November; each day's hours come from the reference, its prices from the
set in force that day, worked out here. Re-running the 19th after the 20th keeps the 19th's prices.
"""

import json
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

ZONE = ZoneInfo("UTC")
DAYS = [billing_day(date(2026, 11, d), ZONE) for d in (19, 20)]
H100 = "NVIDIA-H100-80GB-HBM3"
BEFORE = {**PRICES["jaguar"], "from": "2026-01-01"}  # cpu 0.012, H100 2.40
AFTER = {**PRICES["jaguar"], "from": "2026-11-20", "cpu_core_hour": 0.010,
         "gpu_models": {**PRICES["jaguar"]["gpu_models"], H100: 2.10}}


@pytest.fixture(scope="module")
def world():
    return make_world(21, DAYS[0].start.timestamp(), pods=120, clusters=("jaguar",), day_seconds=2 * 86400)


def configure(tmp_path: Path, url: str, sets: list[dict]) -> str:
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": url})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["prices"] = sets
    settings["waste"] = {"enabled": False}
    Path(config).write_text(yaml.safe_dump(settings))
    return config


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def ledger(tmp_path: Path, day: str) -> pd.DataFrame:
    """robotics' rows of the day per resource and model."""
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        rows = pd.read_sql(f"select * from chargeback where day = '{day}' and team = 'robotics'", conn)
    return rows.groupby(["resource", "gpu_model", "unit_price"])[["quantity", "cost"]].sum().reset_index(
        "unit_price")


def unit_price(prices: dict, resource: str, model: str) -> float:
    if resource == "gpu":
        return prices["gpu_models"].get(model, prices["gpu_hour"])
    return prices["cpu_core_hour" if resource == "cpu" else "memory_gib_hour"]


def robotics_cost(world, period, prices: dict) -> float:
    """By hand: each namespace's reference hours, robotics' share of it (HAND_MAPPING), at the day's prices."""
    hours = reference_usage(world, "jaguar", period.start.timestamp(), period.end.timestamp(), 60)
    shares = {ns: share for ns, teams in HAND_MAPPING.items() for team, share in teams if team == "robotics"}
    return sum(h * shares[ns] * unit_price(prices, resource, model)
               for (ns, resource, model), h in hours.items() if ns in shares)


def test_each_day_is_priced_with_the_set_in_force_that_day(prometheus_server, world, tmp_path):
    prom = prometheus_server(world)
    config = configure(tmp_path, prom.url, [BEFORE, AFTER])
    for day in ("2026-11-19", "2026-11-20"):
        result = invoke("run", "--date", day, "--config", config)
        assert result.exit_code == 0, result.output
    nineteenth = ledger(tmp_path, "2026-11-19")
    for period, prices in zip(DAYS, (BEFORE, AFTER)):
        rows = ledger(tmp_path, period.date.isoformat())
        assert rows["cost"].sum() == pytest.approx(robotics_cost(world, period, prices), rel=1e-9)
        assert rows.loc[("cpu", ""), "unit_price"] == prices["cpu_core_hour"]
    assert robotics_cost(world, DAYS[1], AFTER) < robotics_cost(world, DAYS[1], BEFORE)  # the change shows

    pages = {day: (tmp_path / "reports" / day / "index.html").read_text() for day in ("2026-11-19", "2026-11-20")}
    note = "The prices of cluster jaguar changed on 2026-11-20: hours before and after it are priced differently"
    assert note in pages["2026-11-20"] and note not in pages["2026-11-19"]  # the month to date holds the change

    rerun = invoke("run", "--date", "2026-11-19", "--config", config)  # after the new contract
    assert rerun.exit_code == 0, rerun.output
    again = ledger(tmp_path, "2026-11-19")
    assert again.loc[("cpu", ""), "unit_price"] == 0.012
    pd.testing.assert_frame_equal(again, nineteenth)

    report = invoke("report", "--team", "robotics", "--from", "2026-11-19", "--to", "2026-11-20", "--config", config)
    assert report.exit_code == 0
    assert ("billing: the prices of cluster jaguar changed on 2026-11-20: hours before and after it are priced "
            "differently") in report.stderr
    answer = json.loads(invoke("report", "--team", "robotics", "--from", "2026-11-19", "--to", "2026-11-20",
                               "--format", "json", "--config", config).stdout)
    assert answer["price_changes"] == [{"cluster": "jaguar", "from": "2026-11-20"}]
    one_day = json.loads(invoke("report", "--team", "robotics", "--from", "2026-11-20", "--to", "2026-11-20",
                                "--format", "json", "--config", config).stdout)
    assert "price_changes" not in one_day  # the set came into force on the range's first day: no change inside it

    # without a set in force on the 19th, its re-run is refused before any store is asked, and nothing changes
    config = configure(tmp_path, prom.url, [AFTER])
    refused = invoke("run", "--date", "2026-11-19", "--config", config)
    assert refused.exit_code == 2
    assert "clusters[0].prices: no price set is in force on 2026-11-19; the first is from 2026-11-20" in refused.output
    pd.testing.assert_frame_equal(ledger(tmp_path, "2026-11-19"), nineteenth)
