"""On a real PostgreSQL: closing, re-running and reopening, recovering costs, correcting a recovered cluster (the SQLite
tests' scenarios), and closing beside a run."""

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone

from sqlalchemy import text

from billing import frames
from billing.ledger.database import open_ledger
from billing.ledger.tables import chargeback
from billing.publish.statement import close_month
from tests.helpers.statements import (
    OCT,
    OCT_5,
    OCT_6,
    TODAY_DONE,
    cents,
    closing_scenario,
    recovered_correction_scenario,
    recovery_scenario,
    write_month,
)


def test_close_rerun_and_reopen_on_postgres(postgres_url):
    closing_scenario(postgres_url)


def test_closing_recovers_each_clusters_cost_on_postgres(postgres_url):
    recovery_scenario(postgres_url)


def test_a_correction_on_a_recovered_cluster_keeps_its_month_at_its_cost_on_postgres(postgres_url):
    recovered_correction_scenario(postgres_url)


def test_closing_waits_for_a_run_of_one_of_its_days_in_progress(postgres_url):
    """A run of October 6 holds its day (as replace_day does) while finance closes October: the closing waits and
    its statement has the run's rows, so no run lands between the lines read and the month marked closed."""
    engine = open_ledger(postgres_url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5})
    closing = ThreadPoolExecutor(1)
    with engine.begin() as conn:  # the run, from its lock to its commit
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": date(2026, 10, 6).toordinal()})
        closed = closing.submit(close_month, engine, OCT, "finance", TODAY_DONE, "USD", {})
        time.sleep(1.0)
        assert not closed.done()  # waiting for the run
        conn.execute(chargeback.insert(), [{**dict(zip(frames.ROWS.columns, OCT_6[0])), "day": date(2026, 10, 6),
                                            "currency": "USD", "computed_at": datetime.now(timezone.utc)}])
    statement = closed.result(timeout=30)
    assert cents(statement.total) == "85.20"  # October 5's 73.20 and the run's 12.00 of October 6
    assert [line.quantity for line in statement.lines if line.resource == "gpu" and line.team == "robotics"] == [15.0]
