"""Tables allocation_draws and allocation_alerts: each night's use of a prepaid allocation per team and cluster and
what it drew, replaced with the night's other rows; and each threshold of an allocation crossed, so that its alert
goes out once (docs/spec.md "Allocations").

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.create_table(
        "allocation_draws",
        sa.Column("account", sa.Text, primary_key=True),
        sa.Column("starts", sa.Date, primary_key=True),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("used", sa.Double, nullable=False),
        sa.Column("used_cost", sa.Double, nullable=False),
        sa.Column("drawn", sa.Double, nullable=False),
        sa.Column("drawn_cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
    )
    op.create_table(
        "allocation_alerts",
        sa.Column("account", sa.Text, primary_key=True),
        sa.Column("starts", sa.Date, primary_key=True),
        sa.Column("threshold", sa.Double, primary_key=True),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("drawn", sa.Double, nullable=False),
        sa.Column("amount", sa.Double, nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
    )
