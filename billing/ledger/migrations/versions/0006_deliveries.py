"""Messages go out once: table deliveries, each daily summary sent to one address.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("message", sa.Text, primary_key=True),
        sa.Column("address", sa.Text, nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
    )
