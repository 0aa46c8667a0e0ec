"""A ledger written with the words of revision 0008, upgraded: on SQLite (tests/ledger) and PostgreSQL (integration)."""

from __future__ import annotations

from datetime import date

from alembic import command
from sqlalchemy import create_engine, text

from billing.ledger import migrate
from billing.ledger.database import open_ledger
from billing.publish.statement import build_statement

# October's statement, closed: a charge and what a re-run of September 5 changed, as 0008 wrote them
OLD_STATEMENT_LINES = [
    "('2026-10-01', 1, 'robotics', '', 'jaguar', 'charge', 'gpu', '', NULL, 10.0, 24.0, 'USD')",
    "('2026-10-01', 2, 'robotics', '', 'jaguar', 'adjustment', 'gpu', '', '2026-09-05', NULL, 6.0, 'USD')",
]
# the same re-run's difference, booked in October
OLD_ADJUSTMENT = "('2026-10-01', '2026-09-05', 'robotics', 'jaguar', 'gpu', '2026-10-02 01:00:00', 6.0, 'USD')"


def upgrade_old_names(url: str) -> None:
    """Write rows at revision 0008 with the old names, upgrade, and read them back under the new ones."""
    with create_engine(url).begin() as conn:
        command.upgrade(migrate._alembic(conn), "0008")
        for line in OLD_STATEMENT_LINES:
            conn.execute(text(f"INSERT INTO statement_lines VALUES {line}"))
        conn.execute(text(f"INSERT INTO adjustments VALUES {OLD_ADJUSTMENT}"))
    migrate.upgrade(create_engine(url))
    engine = open_ledger(url)
    with engine.connect() as conn:
        kinds = conn.execute(text("SELECT kind FROM statement_lines ORDER BY line")).scalars().all()
    assert kinds == ["charge", "correction"]
    october = build_statement(engine, date(2026, 10, 1), "USD", {})  # open: its lines come from the ledger now
    assert [(line.kind, line.resource, line.corrects, line.amount) for line in october.lines] == [
        ("correction", "gpu", date(2026, 9, 5), 6.0)]
