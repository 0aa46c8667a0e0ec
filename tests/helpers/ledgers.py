"""New ledgers for tests: a new SQLite file starts as a copy of one migrated once per test process.

Bringing an empty database to the current schema runs every Alembic migration, a tenth of a second that
hundreds of tests each paid. The copy is the database those migrations made (tests/ledger/test_migrate.py
tests the migrations themselves); PostgreSQL ledgers are migrated as before.
"""

from __future__ import annotations

import functools
from pathlib import Path
from tempfile import TemporaryDirectory

from sqlalchemy import Engine, make_url

from billing.ledger.database import open_ledger
from billing.private import write_private_file


@functools.cache
def _migrated_sqlite() -> bytes:
    """The file of an empty SQLite ledger at the current schema, as open_ledger leaves it."""
    with TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.db"
        open_ledger(f"sqlite:///{path}").dispose()
        return path.read_bytes()


def new_ledger(url: str) -> Engine:
    """open_ledger on a database, copying the migrated SQLite file first where `url` names a file not there yet."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_private_file(path, _migrated_sqlite())
    return open_ledger(url)
