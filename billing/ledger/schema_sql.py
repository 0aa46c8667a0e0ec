"""The ledger schema as a SQL script, written by Alembic from the migrations without a database.

For a DBA who applies schema changes by hand, and for sql/, which holds this
script for SQLite and PostgreSQL so the schema can be read without Python:
`python -m billing.ledger.schema_sql postgresql > sql/postgresql.sql`. The script
also records the schema revision, so `billing run` accepts the database it makes.
"""

from __future__ import annotations

import io
import sys

from alembic import command
from alembic.config import Config as AlembicConfig

from billing.ledger.migrate import MIGRATIONS

DIALECTS = ("sqlite", "postgresql")


def upgrade_script(dialect: str) -> str:
    """`alembic upgrade head --sql` for one dialect, without trailing blanks."""
    output = io.StringIO()
    config = AlembicConfig(output_buffer=output)
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["dialect"] = dialect
    command.upgrade(config, "head", sql=True)
    lines = [line.rstrip() for line in output.getvalue().strip().splitlines()]
    header = f"-- The ledger schema for {dialect}, written by `python -m billing.ledger.schema_sql {dialect}` from the migrations."
    return "\n".join([header, "", *lines]) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] not in ([d] for d in DIALECTS):
        print(f"usage: python -m billing.ledger.schema_sql {{{'|'.join(DIALECTS)}}}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(upgrade_script(sys.argv[1]))
