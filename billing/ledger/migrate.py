"""Schema migrations of the ledger database (Alembic), for `billing db upgrade`.

The migrations live in billing/ledger/migrations/versions and ship with the
package. A new, empty database is brought to the current schema by the
first run; an existing one only by `billing db upgrade`, so that an operator
decides when a production schema changes.

Opening the ledger only compares the database's revision with the newest
migration's, both read without Alembic: importing it would cost every
command that reads the ledger (`billing report`) a tenth of a second or more.
Only an upgrade imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"  # where Alembic keeps a database's revision (one row)
# the execution option naming the statement that begins a transaction on SQLite (billing/ledger/tables.py)
SQLITE_BEGIN = "sqlite_begin"
# PostgreSQL advisory lock of schema changes; day locks (billing/ledger/tables.py) are day ordinals, all below 3,652,060
SCHEMA_LOCK = 0x62696C6C  # "bill"


def _alembic(connection: Connection) -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The schema revision this version of billing needs: the newest migration's, which is its file's number.

    Each migration's revision is the number its file name starts with, and
    each follows the one numbered before it (tests/ledger/test_migrate.py).
    """
    return max(path.name.split("_", 1)[0] for path in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def current_revision(connection: Connection) -> str | None:
    """The database's revision; None for a database Alembic never touched."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def is_empty(connection: Connection) -> bool:
    return not inspect(connection).get_table_names()


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Apply every pending migration in one transaction; return (from, to) revisions.

    A process killed halfway leaves the old schema (the transaction holds the
    DDL too, see billing/ledger/tables.py for SQLite). The transaction starts with an
    exclusive lock, so of two first runs on an empty database one creates the
    schema and the other waits, then finds it at head and changes nothing.
    """
    from alembic import command

    with engine.connect() as connection:
        connection.execution_options(**{SQLITE_BEGIN: "BEGIN EXCLUSIVE"})
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            before = current_revision(connection)
            command.upgrade(_alembic(connection), "head")
    return before, head_revision()
