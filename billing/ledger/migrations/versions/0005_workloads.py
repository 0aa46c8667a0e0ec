"""Workloads and cost labels: tables workload_costs and workload_waste, costs and waste below the namespace.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def _charged() -> list[sa.Column]:
    return [
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("workload", sa.Text, primary_key=True),
    ]


def upgrade() -> None:
    op.create_table(
        "workload_costs",
        *_charged(),
        sa.Column("labels", sa.Text, primary_key=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("gpu_model", sa.Text, primary_key=True),
        sa.Column("quantity", sa.Double, nullable=False),
        sa.Column("cost", sa.Double, nullable=False),
        sa.Column("list_cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
    )
    op.create_index("workload_costs_team_day", "workload_costs", ["team", "day"])
    op.create_index("workload_costs_owner_day", "workload_costs", ["owner", "day"])
    op.create_table(
        "workload_waste",
        *_charged(),
        sa.Column("idle_gpu_hours", sa.Double, nullable=True),
        sa.Column("unused_cpu_core_hours", sa.Double, nullable=True),
    )
