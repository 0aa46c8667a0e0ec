"""`billing run` end to end: real Prometheus servers, an LDIF directory, SQLite and PostgreSQL.

Expected costs are worked out here from fixtures.reference (the arithmetic),
the directory below (who is on which team, by hand) and the prices.
"""

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from sqlalchemy import create_engine

from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_usage
from tests.helpers.prometheus_jobs import HAND_MAPPING, PRICES, database, run, write_config  # noqa: F401 (pytest fixtures)

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def expected_costs(world) -> pd.Series:
    """Cost per team from the reference quantities, the hand mapping and the prices."""
    costs: dict[str, float] = {}
    for cluster, prices in PRICES.items():
        usage = reference_usage(world, cluster, DAY.start.timestamp(), DAY.end.timestamp(), 60)
        for (namespace, resource, model), quantity in usage.items():
            unit = (prices.get("gpu_models", {}).get(model, prices["gpu_hour"]) if resource == "gpu"
                    else prices["cpu_core_hour" if resource == "cpu" else "memory_gib_hour"])
            for team, share in HAND_MAPPING.get(namespace, [("unallocated", 1)]):
                costs[team] = costs.get(team, 0.0) + quantity * share * unit
    return pd.Series(costs).sort_index()


@pytest.fixture(scope="module")
def world():
    return make_world(3, DAY.start.timestamp(), pods=200, clusters=("jaguar", "ibis"))


def ledger(database: str) -> pd.DataFrame:
    with create_engine(database).connect() as conn:
        return pd.read_sql("select * from chargeback order by cluster, namespace, team, resource, gpu_model", conn)


def test_a_day_billed_end_to_end_then_rerun_then_failing_half_way(prometheus_server, world, database, tmp_path):
    jaguar, ibis = prometheus_server(world), prometheus_server(world)
    config = write_config(tmp_path, database, {"jaguar": jaguar.url, "ibis": ibis.url})

    result = run(config)
    assert result.exit_code == 0, result.output
    first = ledger(database)
    by_team = first.groupby("team")["cost"].sum().sort_index()
    expected = expected_costs(world)
    assert list(by_team.index) == list(expected.index)
    for team, cost in expected.items():
        assert by_team[team] == pytest.approx(cost, rel=1e-9), team
    assert (first["cost"] == first["quantity"] * first["unit_price"]).all()
    assert set(first.loc[first["namespace"] == "bob", "owner"]) == {"bob"}
    assert first.loc[first["namespace"] == "kube-system", "owner"].isna().all()

    # Re-running the day replaces its rows: same rows, no duplicates.
    assert run(config).exit_code == 0
    again = ledger(database)
    assert len(again) == len(first)
    keys = ["cluster", "namespace", "team", "resource", "gpu_model"]
    pd.testing.assert_frame_equal(again.drop(columns="computed_at"), first.drop(columns="computed_at"))
    assert not again.duplicated(keys).any()

    # The second cluster's Prometheus dies: the run fails and the day's rows stay as they were.
    ibis.stop()
    result = run(config)
    assert result.exit_code == 1
    assert f"Prometheus of cluster ibis at {ibis.url} is unreachable" in result.output
    pd.testing.assert_frame_equal(ledger(database), again)


@pytest.mark.parametrize("honor_labels", [True, False], ids=["plain-labels", "exported-labels"])
def test_a_day_billed_from_victoria_metrics(victoria_metrics_server, world, tmp_path, honor_labels, caplog):
    """`billing run` against VictoriaMetrics on its defaults, also where the day was scraped with
    honor_labels: false: the same costs per team as the reference's, the renames logged once per cluster."""
    store = victoria_metrics_server(replace(world, honor_labels=honor_labels))
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    with caplog.at_level("INFO", logger="billing.collect.stores"):
        result = run(write_config(tmp_path, database, {"jaguar": store.url, "ibis": store.url}))
    assert result.exit_code == 0, result.output
    by_team = ledger(database).groupby("team")["cost"].sum().sort_index()
    expected = expected_costs(world)
    assert list(by_team.index) == list(expected.index)
    for team, cost in expected.items():
        assert by_team[team] == pytest.approx(cost, rel=1e-9), team
    for name in ("jaguar", "ibis"):
        renamed = (f"cluster {name}: kube-state-metrics labels read from exported_namespace, exported_pod, "
                   "exported_container, exported_node (a scrape with honor_labels: false renamed them)")
        assert [r.getMessage() for r in caplog.records].count(renamed) == (0 if honor_labels else 1)
