"""sql/postgresql.sql creates the tables billing/ledger.py describes, on a real PostgreSQL."""

from sqlalchemy import create_engine

from billing.ledger import metadata
from tests.test_ledger import ddl_engine, describe


def test_postgresql_ddl_matches_the_model(postgres_server):
    names = [postgres_server.create_database() for _ in range(2)]
    try:
        from_ddl = ddl_engine(postgres_server.url(names[0]), "postgresql")
        from_model = create_engine(postgres_server.url(names[1]))
        metadata.create_all(from_model)
        assert describe(from_ddl) == describe(from_model)
        from_ddl.dispose()
        from_model.dispose()
    finally:
        for name in names:
            postgres_server.drop_database(name)
