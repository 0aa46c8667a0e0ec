"""Column cluster_days.capacity_unknown: why a cluster's capacity of the day is unknown, '' where it is known.

An impossible allocatable figure where the bill needs no capacity (no reserved pool, Kueue quota or shared
unrequested capacity) no longer refuses the day: the day is billed, no capacity row is written for the cluster, and
the pages say why (docs/spec.md "Figures from the store").

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.add_column("cluster_days", sa.Column("capacity_unknown", sa.Text, nullable=False, server_default=""))
