"""One word for each thing: the part of a row no pod's workload requested, '(namespace)', becomes '(no workload)';
statement lines of shared unrequested capacity, kind 'idle', become kind 'unrequested'.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.execute("UPDATE workload_costs SET workload = '(no workload)' WHERE workload = '(namespace)'")
    op.execute("UPDATE statement_lines SET kind = 'unrequested' WHERE kind = 'idle'")

