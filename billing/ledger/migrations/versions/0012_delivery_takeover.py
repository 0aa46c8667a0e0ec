"""Messages go out once, one at a time: a delivery may be owed (claimed by no run), keeps its Message-ID, and says
when a run took it over from a run that stopped while sending it.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    offline = op.get_context().as_sql  # sql/sqlite.sql: no database to reflect the table from
    with op.batch_alter_table("deliveries", copy_from=_deliveries_of_0006() if offline else None) as table:
        table.alter_column("claimed_at", existing_type=sa.DateTime(timezone=True), nullable=True)
        table.add_column(sa.Column("message_id", sa.Text, nullable=True))
        table.add_column(sa.Column("taken_over_at", sa.DateTime(timezone=True), nullable=True))


def _deliveries_of_0006() -> sa.Table:
    """deliveries as 0006 made it, for SQLite's copy of it when writing SQL offline."""
    return sa.Table(
        "deliveries",
        sa.MetaData(),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("message", sa.Text, primary_key=True),
        sa.Column("address", sa.Text, nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
    )
