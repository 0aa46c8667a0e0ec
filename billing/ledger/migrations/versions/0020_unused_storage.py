"""Column unused_storage_gib_hours of tables waste and workload_waste: the GiB-hours bound claims held but their
filesystems did not use (kubelet's used bytes), shown beside the other waste, never billed; NULL where it was not
measured, as on every day billed before (docs/spec.md "Storage").

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    for table in ("waste", "workload_waste"):
        op.add_column(table, sa.Column("unused_storage_gib_hours", sa.Double, nullable=True))
