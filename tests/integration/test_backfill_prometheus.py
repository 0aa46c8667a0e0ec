"""`billing backfill --parallel` against a real Prometheus: days collected at once, each billed exactly as the
reference computes it, written oldest first; days without data fail loudly and the others are billed.

The world holds two days of samples (2026-11-17 and 18, no margin): the day before has none, so docs/spec.md "Rule 10: no data is not zero"
refuses it, and the days after it must not wait for it to be written.
"""

from datetime import date
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_usage
from tests.helpers.prometheus_jobs import write_config

UTC = ZoneInfo("UTC")
BILLED = [date(2026, 11, 17), date(2026, 11, 18)]


@pytest.fixture(scope="module")
def world():
    start = billing_day(BILLED[0], UTC).start.timestamp()
    return make_world(7, start, pods=150, clusters=("jaguar",), day_seconds=2 * 86400, margin=0)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_parallel_backfill_bills_each_day_like_the_reference_and_the_failing_days_are_named(
        prometheus_server, world, tmp_path, request, database):
    url = f"sqlite:///{tmp_path / 'ledger.db'}" if database == "sqlite" else request.getfixturevalue("postgres_url")
    config = write_config(tmp_path, url, {"jaguar": prometheus_server(world).url})
    result = CliRunner().invoke(main, ["backfill", "--from", "2026-11-16", "--to", "2026-11-18", "--parallel", "3",
                                       "--config", config])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "billing: 1 of 3 days failed, the others are billed: 2026-11-16; the first: cluster jaguar: "
        "Prometheus holds no kube-state-metrics sample for 2026-11-16 under the selector cluster=\"jaguar\" (a "
        "selector typo, a day outside retention, or a scrape that never ran); nothing was billed and the day stays "
        "missing")

    with create_engine(url).connect() as conn:
        ledger = pd.read_sql("select day, namespace, resource, gpu_model, quantity from chargeback", conn)
        completed = pd.read_sql("select day, completed_at from completed_days order by completed_at", conn)
    assert [pd.Timestamp(day).date() for day in completed["day"]] == BILLED  # written oldest first
    for day in BILLED:
        period = billing_day(day, UTC)
        expected = reference_usage(world, "jaguar", period.start.timestamp(), period.end.timestamp(), 60)
        rows = ledger[pd.to_datetime(ledger["day"]).dt.date == day]
        billed = rows.groupby(["namespace", "resource", "gpu_model"])["quantity"].sum()
        assert len(expected) > 20
        assert billed[billed > 0].to_dict() == pytest.approx({k: v for k, v in expected.items() if v > 0}, rel=1e-9)
