"""Closing a month, re-running one of its days and reopening it, on a real PostgreSQL (the SQLite test's scenario)."""

from tests.test_statement import closing_scenario


def test_close_rerun_and_reopen_on_postgres(postgres_url):
    closing_scenario(postgres_url)
