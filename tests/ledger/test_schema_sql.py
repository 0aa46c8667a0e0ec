"""sql/ holds what Alembic writes from the migrations, so the schema is written once (in the migrations)."""

import subprocess
import sys
from pathlib import Path

import pytest

from billing.ledger.migrate import head_revision
from billing.ledger.schema_sql import DIALECTS, upgrade_script

SQL = Path(__file__).resolve().parents[2] / "sql"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_committed_ddl_is_the_migrations_script(dialect):
    assert (SQL / f"{dialect}.sql").read_text() == upgrade_script(dialect), (
        f"sql/{dialect}.sql is stale: python -m billing.ledger.schema_sql {dialect} > sql/{dialect}.sql")


def test_the_script_creates_every_table_and_records_the_revision():
    script = upgrade_script("postgresql")
    for table in ("chargeback", "completed_days", "directory_snapshots", "cluster_days", "cluster_capacity", "waste"):
        assert f"CREATE TABLE {table} (" in script
    assert f"UPDATE alembic_version SET version_num='{head_revision()}'" in script
    assert "ALTER TABLE chargeback ALTER COLUMN list_cost SET NOT NULL;" in script


def test_an_unknown_dialect_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "billing.ledger.schema_sql", "oracle"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: python -m billing.ledger.schema_sql {sqlite|postgresql}" in done.stderr
