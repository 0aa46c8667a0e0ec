"""GPU sharing: table gpu_holdings, what each ledger `gpu` row held (MIG slices, time-sliced replicas).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "gpu_holdings",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("gpu_model", sa.Text, primary_key=True),
        sa.Column("held_hours", sa.Double, nullable=False),
        sa.Column("gpu_hours", sa.Double, nullable=False),
        sa.Column("cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
    )
