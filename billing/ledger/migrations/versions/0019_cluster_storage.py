"""Table cluster_storage: each cluster's persistent volumes per storage class on a day, in GiB-hours provisioned,
claimed and unclaimed (Released or Available), and what the unclaimed would cost at the class's price; shown on the
admins' day page beside capacity, never billed (docs/spec.md "Storage").

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"


def upgrade() -> None:
    op.create_table(
        "cluster_storage",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("storageclass", sa.Text, primary_key=True),
        sa.Column("provisioned", sa.Double, nullable=False),
        sa.Column("claimed", sa.Double, nullable=False),
        sa.Column("unclaimed", sa.Double, nullable=False),
        sa.Column("unit_price", sa.Double, nullable=True),
        sa.Column("unclaimed_cost", sa.Double, nullable=True),
    )
