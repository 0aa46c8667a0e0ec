"""The ledger schema as a database shows it, for comparing migrations, DDL and the tables."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect

SQL = Path(__file__).resolve().parents[2] / "sql"


def describe(engine) -> dict:
    """Columns (name, Python type, nullable), primary key and indexes of every ledger table (asked for all tables at
    once: on PostgreSQL three queries, not three per table, which the kill tests' hundreds of ledgers felt)."""
    found = inspect(engine)
    columns, keys, indexes = found.get_multi_columns(), found.get_multi_pk_constraint(), found.get_multi_indexes()
    return {
        table: (
            [(c["name"], c["type"].python_type, c["nullable"]) for c in columns[key]],
            keys[key]["constrained_columns"],
            sorted((i["name"], tuple(i["column_names"])) for i in indexes[key]),
        )
        for key, table in sorted((key, key[1]) for key in columns)  # key: (schema, table), the default schema's
    }


def ddl_engine(url: str, dialect: str):
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in (SQL / f"{dialect}.sql").read_text().split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
    return engine
