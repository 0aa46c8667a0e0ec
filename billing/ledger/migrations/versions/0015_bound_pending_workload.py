"""Table bound_pending per workload too (issue 46): a `workload` column in its key, '' for the days kept before.

The key changes, which SQLite cannot alter: the table is made again under its name and the kept rows copied into it,
in plain statements that work online and in sql/*.sql alike.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"

KEPT = ("day", "cluster", "namespace", "team", "owner", "resource", "gpu_model", "reason", "quantity", "unit_price",
        "cost", "list_cost", "currency", "charged")


def upgrade() -> None:
    op.rename_table("bound_pending", "bound_pending_0013")
    if op.get_context().dialect.name == "postgresql":  # its primary key keeps the table's old name otherwise
        op.execute("ALTER TABLE bound_pending_0013 RENAME CONSTRAINT bound_pending_pkey TO bound_pending_0013_pkey")
    op.create_table(
        "bound_pending",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("team", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("workload", sa.Text, primary_key=True),
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
    kept = ", ".join(KEPT)
    op.execute(f"INSERT INTO bound_pending ({kept}, workload) SELECT {kept}, '' FROM bound_pending_0013")  # noqa: S608
    op.drop_table("bound_pending_0013")
