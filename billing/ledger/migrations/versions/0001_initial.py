"""The ledger as of the first release: chargeback, completed days, directory snapshots, coverage.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "chargeback",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("gpu_model", sa.Text, primary_key=True),
        sa.Column("quantity", sa.Double, nullable=False),
        sa.Column("unit_price", sa.Double, nullable=False),
        sa.Column("cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("chargeback_team_day", "chargeback", ["team", "day"])
    op.create_index("chargeback_owner_day", "chargeback", ["owner", "day"])
    op.create_table(
        "completed_days",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("directory_note", sa.Text, nullable=False, server_default=""),
    )
    op.create_table(
        "directory_snapshots",
        sa.Column("taken_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("content", sa.Text, nullable=False),
    )
    op.create_table(
        "cluster_days",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("coverage", sa.Double, nullable=False),
    )
