"""A ledger written with the words of revision 0008, upgraded: on SQLite (tests/ledger) and PostgreSQL (integration).

Revision 0008 called a re-run's difference an adjustment and the capacity no pod requested idle; the rows below
are what it wrote for a day, November 5, on which robotics requested 40 of jaguar's 100 core-hours at 0.01 and
paid the other 60 as its share (`idle: share`), and for the statement of October, closed.
"""

from __future__ import annotations

from datetime import date

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from billing.ledger import migrate
from billing.ledger.database import open_ledger
from billing.ledger.read import read_capacity, read_rows, read_workload_costs
from billing.publish.statement import build_statement

NOV_5 = date(2026, 11, 5)
OLD_ROWS = {
    "chargeback (day, cluster, namespace, team, owner, resource, gpu_model, quantity, unit_price, cost, currency, "
    "computed_at, list_cost)": [
        "('2026-11-05', 'jaguar', 'alice', 'robotics', 'alice', 'cpu', '', 40.0, 0.01, 0.4, 'USD', "
        "'2026-11-06 01:00:00', 0.4)",
        "('2026-11-05', 'jaguar', 'alice', 'robotics', 'alice', 'idle-cpu', '', 60.0, 0.01, 0.6, 'USD', "
        "'2026-11-06 01:00:00', 0.6)"],
    "workload_costs (day, cluster, namespace, team, owner, workload, labels, resource, gpu_model, quantity, cost, "
    "list_cost, currency)": [
        "('2026-11-05', 'jaguar', 'alice', 'robotics', 'alice', '(no workload)', '{}', 'idle-cpu', '', 60.0, 0.6, "
        "0.6, 'USD')"],
    "cluster_capacity (day, cluster, resource, gpu_model, pool, allocatable, requested, idle, unit_price, idle_cost)": [
        "('2026-11-05', 'jaguar', 'cpu', '', '', 100.0, 40.0, 60.0, 0.01, 0.6)"],
    # October as closed: a charge, a share of unrequested capacity, and what a re-run of September 5 changed
    "statement_lines (month, line, team, cost_center, cluster, kind, resource, gpu_model, corrects, quantity, "
    "amount, currency)": [
        "('2026-10-01', 1, 'robotics', '', 'jaguar', 'charge', 'gpu', '', NULL, 10.0, 24.0, 'USD')",
        "('2026-10-01', 2, 'robotics', '', 'jaguar', 'unrequested', 'idle-cpu', '', NULL, 60.0, 0.6, 'USD')",
        "('2026-10-01', 3, 'robotics', '', 'jaguar', 'adjustment', 'idle-cpu', '', '2026-09-05', NULL, -0.6, 'USD')"],
    # a re-run of October 5 that booked its difference in November
    "adjustments (month, corrects, team, cluster, resource, booked_at, amount, currency)": [
        "('2026-11-01', '2026-10-05', 'robotics', 'jaguar', 'idle-cpu', '2026-11-02 01:00:00', -0.3, 'USD')"],
}


def upgrade_old_names(url: str) -> None:
    """Write rows at revision 0008 with the old names, upgrade, and read them back under the new ones."""
    with create_engine(url).begin() as conn:
        command.upgrade(migrate._alembic(conn), "0008")
        for table, rows in OLD_ROWS.items():
            for row in rows:
                conn.execute(text(f"INSERT INTO {table} VALUES {row}"))
    migrate.upgrade(create_engine(url))
    engine = open_ledger(url)

    with engine.connect() as conn:
        closed = conn.execute(text("SELECT kind, resource FROM statement_lines ORDER BY line")).all()
    assert [tuple(line) for line in closed] == [
        ("charge", "gpu"), ("unrequested", "unrequested-cpu"), ("correction", "unrequested-cpu")]
    assert read_rows(engine, NOV_5, NOV_5)["resource"].tolist() == ["cpu", "unrequested-cpu"]
    assert read_workload_costs(engine, NOV_5, NOV_5)["resource"].tolist() == ["unrequested-cpu"]
    capacity = read_capacity(engine, NOV_5)
    assert capacity[["unrequested", "unrequested_cost"]].values.tolist() == [[60.0, 0.6]]

    november = build_statement(engine, date(2026, 11, 1), "USD", {})  # open: its lines come from the ledger now
    assert [(line.kind, line.resource, line.corrects, line.amount) for line in november.lines] == [
        ("charge", "cpu", None, pytest.approx(0.4)),
        ("unrequested", "unrequested-cpu", None, pytest.approx(0.6)),
        ("correction", "unrequested-cpu", date(2026, 10, 5), pytest.approx(-0.3))]
