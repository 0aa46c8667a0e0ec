"""Schema migrations of the ledger database (Alembic), for `billing db upgrade`.

The migrations live in billing/migrations/versions and ship with the
package. A new, empty database is brought to the current schema by the
first run; an existing one only by `billing db upgrade`, so that an operator
decides when a production schema changes.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect

MIGRATIONS = Path(__file__).parent / "migrations"


def _alembic(connection: Connection) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The schema revision this version of billing needs."""
    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None, "billing ships its migrations"
    return head


def current_revision(connection: Connection) -> str | None:
    """The database's revision; None for a database Alembic never touched."""
    return MigrationContext.configure(connection).get_current_revision()


def is_empty(connection: Connection) -> bool:
    return not inspect(connection).get_table_names()


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Apply every pending migration in one transaction; return (from, to) revisions."""
    with engine.begin() as connection:
        before = current_revision(connection)
        command.upgrade(_alembic(connection), "head")
    return before, head_revision()
