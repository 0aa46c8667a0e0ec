"""Table journal_lines: the finance office's journal of each closed month, recorded in the close's transaction so
that each posting is written once, and reversed from it when the month is closed again (docs/spec.md "Accounts").

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.create_table(
        "journal_lines",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("posting", sa.Integer, primary_key=True),
        sa.Column("line", sa.Integer, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("account", sa.Text, nullable=False),
        sa.Column("object_code", sa.Text, nullable=False),
        sa.Column("debit_cents", sa.BigInteger, nullable=False),
        sa.Column("credit_cents", sa.BigInteger, nullable=False),
        sa.Column("reference", sa.Text, nullable=False),
    )
