"""A month's invoice from several files: table invoices keeps one row per file imported (key month, cluster, sha256),
so that `billing invoice import --add` adds a file and the same file twice is still refused.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    """A table with the new key, filled from the old one: plain DDL, the same on SQLite (which cannot change a key in
    place) and PostgreSQL, and in the SQL scripts of sql/."""
    op.create_table(
        "invoice_files",
        sa.Column("month", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("sha256", sa.Text, primary_key=True),
        sa.Column("billed_cost", sa.Double, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("file_name", sa.Text, nullable=False),
        sa.Column("rows_read", sa.Integer, nullable=False),
        sa.Column("rows_matched", sa.Integer, nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("imported_by", sa.Text, nullable=False),
    )
    op.execute("INSERT INTO invoice_files (month, cluster, sha256, billed_cost, currency, file_name, rows_read, "
               "rows_matched, imported_at, imported_by) SELECT month, cluster, sha256, billed_cost, currency, file_name, "
               "rows_read, rows_matched, imported_at, imported_by FROM invoices")
    op.drop_table("invoices")
    op.rename_table("invoice_files", "invoices")
