"""Columns shared_kwh and shared_carbon_g of table energy: a namespace's share of its cluster's unattributed kWh, and its
grams of CO2e, where the cluster shares it (`energy.share_unattributed`), minus what was shared on the unattributed
row; 0 where nothing was shared, as on every day billed before (docs/spec.md "Energy and carbon").

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"


def upgrade() -> None:
    op.add_column("energy", sa.Column("shared_kwh", sa.Double, nullable=False, server_default="0"))
    op.add_column("energy", sa.Column("shared_carbon_g", sa.Double, nullable=True, server_default="0"))
