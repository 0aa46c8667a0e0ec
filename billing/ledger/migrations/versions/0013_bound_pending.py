"""Table bound_pending: what pods bound to a node held while Pending, per reason, priced, shown or charged (issue 46).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.create_table(
        "bound_pending",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("gpu_model", sa.Text, primary_key=True),
        sa.Column("reason", sa.Text, primary_key=True),
        sa.Column("quantity", sa.Double, nullable=False),
        sa.Column("unit_price", sa.Double, nullable=False),
        sa.Column("cost", sa.Double, nullable=False),
        sa.Column("list_cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("charged", sa.Integer, nullable=False),
    )
