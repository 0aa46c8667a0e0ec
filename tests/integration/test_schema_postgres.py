"""On PostgreSQL: the DDL in sql/, the migrations and the SQLAlchemy model describe the same schema; a ledger
written with old names upgrades."""

from sqlalchemy import create_engine

from billing.ledger.database import open_ledger
from billing.ledger.tables import metadata
from tests.helpers.old_names import upgrade_old_names
from tests.helpers.schemas import ddl_engine, describe


def test_ddl_migrations_and_model_agree(postgres_server):
    migrated, from_ddl, from_model = (postgres_server.url(postgres_server.create_database()) for _ in range(3))
    migrations = describe(open_ledger(migrated))
    ddl_engine(from_ddl, "postgresql")
    assert migrations == describe(open_ledger(from_ddl))  # the DDL records its revision too
    assert migrations.pop("alembic_version")
    model = create_engine(from_model)
    metadata.create_all(model)
    assert migrations == describe(model)


def test_a_ledger_written_with_the_old_names_upgrades_to_the_new_on_postgres(postgres_url):
    upgrade_old_names(postgres_url)
