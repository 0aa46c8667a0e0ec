"""Capacity, reserved pools, discounts and waste: tables cluster_capacity and waste, and chargeback.list_cost.

A ledger written before discounts existed paid list prices, so its rows'
list_cost is their cost.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("chargeback") as chargeback:
        chargeback.add_column(sa.Column("list_cost", sa.Double, nullable=True))
    op.execute("UPDATE chargeback SET list_cost = cost")
    offline = op.get_context().as_sql  # sql/sqlite.sql: no database to reflect the table from
    with op.batch_alter_table("chargeback", copy_from=_chargeback_before_not_null() if offline else None) as chargeback:
        chargeback.alter_column("list_cost", existing_type=sa.Double, nullable=False)
    if offline and op.get_context().dialect.name == "sqlite":  # the copy's indexes in a fixed order (a Table keeps a set)
        op.create_index("chargeback_team_day", "chargeback", ["team", "day"])
        op.create_index("chargeback_owner_day", "chargeback", ["owner", "day"])
    op.create_table(
        "cluster_capacity",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("gpu_model", sa.Text, primary_key=True),
        sa.Column("pool", sa.Text, primary_key=True),
        sa.Column("allocatable", sa.Double, nullable=False),
        sa.Column("requested", sa.Double, nullable=False),
        sa.Column("idle", sa.Double, nullable=False),
        sa.Column("unit_price", sa.Double, nullable=False),
        sa.Column("idle_cost", sa.Double, nullable=False),
    )
    op.create_table(
        "waste",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("idle_gpu_hours", sa.Double, nullable=True),
        sa.Column("unused_cpu_core_hours", sa.Double, nullable=True),
    )


def _chargeback_before_not_null() -> sa.Table:
    """chargeback as 0001 and the added list_cost left it, for SQLite's copy of it when writing SQL offline."""
    return sa.Table(
        "chargeback",
        sa.MetaData(),
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
        sa.Column("list_cost", sa.Double, nullable=True),
    )
