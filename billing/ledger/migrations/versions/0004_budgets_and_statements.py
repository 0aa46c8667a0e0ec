"""Budgets and monthly statements: tables budget_alerts, closed_months, month_closings, statement_lines, adjustments.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "budget_alerts",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("threshold", sa.Double, primary_key=True),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("spent", sa.Double, nullable=False),
        sa.Column("budget", sa.Double, nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "closed_months",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_by", sa.Text, nullable=False),
        sa.Column("missing_days", sa.Text, nullable=False),
    )
    op.create_table(
        "month_closings",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("logged_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("who", sa.Text, nullable=False),
    )
    op.create_table(
        "statement_lines",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("line", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("cost_center", sa.Text, nullable=False),
        sa.Column("cluster", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("resource", sa.Text, nullable=False),
        sa.Column("gpu_model", sa.Text, nullable=False),
        sa.Column("corrects", sa.Date, nullable=True),
        sa.Column("quantity", sa.Double, nullable=True),
        sa.Column("amount", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
    )
    op.create_table(
        "adjustments",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("corrects", sa.Date, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("resource", sa.Text, primary_key=True),
        sa.Column("booked_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("amount", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
    )
