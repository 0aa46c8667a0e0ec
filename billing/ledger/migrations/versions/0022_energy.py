"""Table energy: per day, cluster, namespace and team the kWh of its GPUs and of its CPU and memory, and its grams of
CO2e; namespace and team '' hold the cluster's unattributed energy; NULL where a family had no sample (docs/spec.md
"Energy and carbon").

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    op.create_table(
        "energy",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("gpu_kwh", sa.Double, nullable=True),
        sa.Column("cpu_kwh", sa.Double, nullable=True),
        sa.Column("carbon_g", sa.Double, nullable=True),
    )
