"""One word for a re-run's difference: statement lines of kind 'adjustment' become kind 'correction', and table
adjustments becomes corrections ("adjustment" is FOCUS's ChargeCategory of cost recovery lines only).

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.execute("UPDATE statement_lines SET kind = 'correction' WHERE kind = 'adjustment'")
    op.rename_table("adjustments", "corrections")
    if op.get_context().dialect.name == "postgresql":  # its primary key keeps the table's old name otherwise
        op.execute("ALTER TABLE corrections RENAME CONSTRAINT adjustments_pkey TO corrections_pkey")
