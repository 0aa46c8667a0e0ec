"""The ledger schema as a database shows it, for comparing migrations, DDL and the tables."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect

SQL = Path(__file__).resolve().parents[2] / "sql"


def describe(engine) -> dict:
    """Columns (name, Python type, nullable), primary key and indexes of every ledger table."""
    found = inspect(engine)
    return {
        table: (
            [(c["name"], c["type"].python_type, c["nullable"]) for c in found.get_columns(table)],
            found.get_pk_constraint(table)["constrained_columns"],
            sorted((i["name"], tuple(i["column_names"])) for i in found.get_indexes(table)),
        )
        for table in sorted(found.get_table_names())
    }


def ddl_engine(url: str, dialect: str):
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in (SQL / f"{dialect}.sql").read_text().split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
    return engine
