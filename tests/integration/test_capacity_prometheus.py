"""Capacity and unrequested capacity against a real Prometheus, checked against fixtures.reference.

Allocatable resource-hours must match the reference's sample-by-sample
evaluation to 1e-9 relative, and requested + unrequested = allocatable per resource
and GPU model, with requested from the independent usage reference.
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

from billing.charge.pricing import unrequested_capacity
from billing.cli import main
from billing.collect.capacity import collect_allocatable
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_allocatable, reference_usage
from tests.helpers.prometheus_jobs import PRICES as JOB_PRICES
from tests.helpers.prometheus_jobs import write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
PRICES = {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0,
          "gpu_models": {"NVIDIA-H100-80GB-HBM3": 2.5}}


@pytest.fixture(scope="module")
def world():
    return make_world(11, DAY.start.timestamp(), pods=250, clusters=("jaguar", "ibis"))


@pytest.mark.parametrize("honor_labels", [True, False], ids=["plain-labels", "exported-labels"])
def test_requested_plus_unrequested_is_allocatable(store_server, world, honor_labels):
    prom = store_server(replace(world, honor_labels=honor_labels))
    start, end = DAY.start.timestamp(), DAY.end.timestamp()
    for name in ("jaguar", "ibis"):
        cluster = ClusterConfig(name=name, prometheus={"url": prom.url, "selector": f'cluster="{name}"', "retries": 0},
                                prices=PRICES)
        source = LivePrometheus(name, cluster.prometheus)
        allocatable = collect_allocatable(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source))
        usage = collect_cluster(cluster_day(cluster, DAY, 60, ["nvidia_com_gpu"], source)).usage
        capacity = unrequested_capacity(allocatable, usage, cluster.prices, name).set_index(["resource", "gpu_model"])

        expected_allocatable = reference_allocatable(world, name, start, end, 60)
        expected_requested: dict = defaultdict(float)
        for (_, resource, model), hours in reference_usage(world, name, start, end, 60).items():
            expected_requested[(resource, model)] += hours
        assert sorted(capacity.index) == sorted(expected_allocatable)
        # the world has a node relabelled A100 -> H100 mid-day and one GPU node without a model
        assert {("gpu", "NVIDIA-A100-SXM4-80GB"), ("gpu", "NVIDIA-H100-80GB-HBM3"), ("gpu", "")} <= set(capacity.index)
        for key, hours in expected_allocatable.items():
            row = capacity.loc[key]
            assert row["allocatable"] == pytest.approx(hours, rel=1e-9), key
            assert row["requested"] == pytest.approx(expected_requested.get(key, 0.0), rel=1e-9), key
            assert row["requested"] + row["unrequested"] == pytest.approx(hours, rel=1e-9), key
            assert row["unrequested"] > 0, key  # about 18% of the pods run at a time: plenty is unrequested
        h100 = capacity.loc[("gpu", "NVIDIA-H100-80GB-HBM3")]
        assert h100["unrequested_cost"] == pytest.approx(h100["unrequested"] * 2.5)


@pytest.mark.parametrize("key", ["unrequested", "idle"])
def test_shared_unrequested_capacity_makes_the_ledger_add_up_to_the_whole_cluster(store_server, world, tmp_path, key,
                                                                                 caplog):
    """billing run with `unrequested: share` on jaguar: its ledger rows cost what all its allocatable costs. `idle`,
    the key's old name, is still read, with a warning naming the new one, and bills the same."""
    prom = store_server(world)
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": prom.url, "ibis": prom.url})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0][key] = "share"
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    renamed = [r.getMessage() for r in caplog.records if "config key idle is now called unrequested" in r.getMessage()]
    assert renamed == (["cluster jaguar: config key idle is now called unrequested; it is still read, but rename it "
                        "(unrequested: share)"] if key == "idle" else [])

    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
        capacity = pd.read_sql("select * from cluster_capacity", conn)
    start, end = DAY.start.timestamp(), DAY.end.timestamp()
    prices = JOB_PRICES["jaguar"]
    whole_cluster = sum(
        hours * (prices["gpu_models"].get(model, prices["gpu_hour"]) if resource == "gpu"
                 else prices["cpu_core_hour" if resource == "cpu" else "memory_gib_hour"])
        for (resource, model), hours in reference_allocatable(world, "jaguar", start, end, 60).items())
    jaguar = ledger[ledger["cluster"] == "jaguar"]
    assert jaguar["cost"].sum() == pytest.approx(whole_cluster, rel=1e-9)
    assert {"unrequested-gpu", "unrequested-cpu", "unrequested-memory"} <= set(jaguar["resource"])
    # ibis leaves its unrequested capacity unbilled; both clusters' capacity is in the table
    assert not ledger.loc[ledger["cluster"] == "ibis", "resource"].str.startswith("unrequested-").any()
    assert set(capacity["cluster"]) == {"jaguar", "ibis"}
    assert capacity["unrequested_cost"].sum() > 0
    assert (capacity["requested"] + capacity["unrequested"] - capacity["allocatable"]).abs().max() < 1e-6
