"""Column statement_lines.service_units: a closed month's SU per line, kept as closed like its amounts
(docs/spec.md "Service units, credits and subsidies"); NULL where a line has none, as every line closed before.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    op.add_column("statement_lines", sa.Column("service_units", sa.Double, nullable=True))
