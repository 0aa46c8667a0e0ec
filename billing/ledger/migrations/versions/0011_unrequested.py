"""One word for capacity no pod requested, 'unrequested': ledger resources idle-gpu, idle-cpu, idle-memory become
unrequested-gpu, unrequested-cpu, unrequested-memory wherever a resource is kept, and cluster_capacity's columns
idle and idle_cost become unrequested and unrequested_cost ("idle" keeps only its waste meaning: held, not used).

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"

OLD, NEW = "idle-", "unrequested-"


def upgrade() -> None:
    for table in ("chargeback", "workload_costs", "statement_lines", "corrections"):
        op.execute(f"UPDATE {table} SET resource = '{NEW}' || substr(resource, {len(OLD) + 1}) "
                   f"WHERE substr(resource, 1, {len(OLD)}) = '{OLD}'")
    for old, new in (("idle", "unrequested"), ("idle_cost", "unrequested_cost")):
        op.execute(f"ALTER TABLE cluster_capacity RENAME COLUMN {old} TO {new}")
