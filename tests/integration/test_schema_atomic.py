"""Creating and upgrading the ledger schema is all or nothing, and first runs at once wait for each other.

Real processes are killed with SIGKILL before every statement that may change
the database and before every commit they send (tests/killed_schema_change.py), on SQLite and on a real
PostgreSQL; the database left behind must hold the old schema or the new one,
never a part, and the next run must succeed.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Protocol

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from billing.ledger import migrate
from billing.ledger.database import LedgerError, open_ledger, upgrade_schema
from billing.ledger.read import read_rows
from billing.ledger.tables import metadata
from fixtures.servers import PostgresServer, free_port
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.processes import Command
from tests.helpers.schemas import describe

PARALLEL = 4  # killed processes at a time
TRIALS = 7  # first runs at once, as often as the defect was seen to need
HEAD = migrate.head_revision()


def schema_change(action: str, url: str, kill_at: int) -> Command:
    """A process opening (`open`, as every run does) or upgrading the ledger at `url`, killed before point `kill_at`."""
    return Command("tests.killed_schema_change", action, url, str(kill_at))


def points(action: str, url: str) -> int:
    """How many statements and commits the action sends to a database like `url` (which it changes)."""
    process = schema_change(action, url, 0)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return int(out)


def kill_at_every_point(action: str, urls: list[str]) -> None:
    """Run the action on urls[i] killed before point i + 1, a few processes at a time."""

    def killed(point: int) -> None:
        process = schema_change(action, urls[point - 1], point)
        _, err = process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL, err

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(killed, range(1, len(urls) + 1)))


def first_runs_at_once(url: str) -> None:
    processes = [schema_change("open", url, 0) for _ in range(2)]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err


def model_schema(tmp_path: Path) -> dict:
    engine = create_engine(f"sqlite:///{tmp_path}/model.db")
    metadata.create_all(engine)
    return describe(engine)


def schema(url: str) -> dict:
    """The tables as left behind, alembic_version's presence instead of its columns."""
    engine = create_engine(url)
    try:
        found = describe(engine)
        if "alembic_version" in found:
            with engine.connect() as conn:
                found["alembic_version"] = migrate.current_revision(conn)
    finally:
        engine.dispose()
    return found


def at_revision_0001(url: str) -> None:
    """The first release's schema with one row in it."""
    engine = create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate._alembic(conn), "0001")
        conn.execute(text("INSERT INTO chargeback VALUES ('2026-11-19', 'jaguar', 'alice', 'robotics', 'alice', "
                          "'cpu', '', 100.0, 0.012, 1.2, 'USD', '2026-11-20 01:00:00')"))
    engine.dispose()


def assert_whole_after_next_run(url: str, model: dict) -> None:
    engine = open_ledger(url)
    found = describe(engine)
    engine.dispose()
    assert found.pop("alembic_version") and found == model


def check_creation_killed_anywhere(ledgers: Ledgers, model: dict) -> None:
    urls = [ledgers() for _ in range(points("open", ledgers()))]
    kill_at_every_point("open", urls)
    for kill_at, url in enumerate(urls, start=1):
        left = schema(url)
        assert left == {} or left == {**model, "alembic_version": HEAD}, f"killed before point {kill_at}: {sorted(left)}"
        assert_whole_after_next_run(url, model)


def check_upgrade_killed_anywhere(ledgers: Ledgers, model: dict) -> None:
    first = ledgers()
    at_revision_0001(first)
    urls = [ledgers.copy(first) for _ in range(points("upgrade", ledgers.copy(first)))]
    old = schema(urls[0])
    assert old["alembic_version"] == "0001"
    kill_at_every_point("upgrade", urls)
    for kill_at, url in enumerate(urls, start=1):
        left = schema(url)
        assert left in (old, {**model, "alembic_version": HEAD}), f"killed before point {kill_at}: {sorted(left)}"
        if left == old:
            with pytest.raises(LedgerError, match=f"schema revision 0001, this billing needs {HEAD}"):
                open_ledger(url)
            assert upgrade_schema(url) == ("0001", HEAD)
        assert_whole_after_next_run(url, model)
        rows = read_rows(create_engine(url), date(2026, 11, 19), date(2026, 11, 19))
        assert rows[["cost", "list_cost"]].values.tolist() == [[1.2, 1.2]]


class Ledgers(Protocol):
    """Makes the URLs of new ledger databases: empty (`ledgers()`), or a copy of one (`ledgers.copy(url)`)."""

    def __call__(self) -> str: ...

    def copy(self, url: str) -> str: ...


class SqliteFiles:
    def __init__(self, directory: Path):
        self.directory, self.made = directory, 0

    def __call__(self) -> str:
        self.made += 1
        return f"sqlite:///{self.directory}/ledger-{self.made}.db"

    def copy(self, url: str) -> str:
        new = self()
        shutil.copy(url.removeprefix("sqlite:///"), new.removeprefix("sqlite:///"))
        return new


def test_sqlite_schema_creation_killed_at_any_point(tmp_path):
    check_creation_killed_anywhere(SqliteFiles(tmp_path), model_schema(tmp_path))


def test_sqlite_upgrade_killed_at_any_point(tmp_path):
    check_upgrade_killed_anywhere(SqliteFiles(tmp_path), model_schema(tmp_path))


def test_sqlite_first_runs_at_once_both_succeed(tmp_path):
    new_url, model = SqliteFiles(tmp_path), model_schema(tmp_path)
    for _ in range(TRIALS):
        url = new_url()
        first_runs_at_once(url)
        assert_whole_after_next_run(url, model)


def test_sqlite_failed_upgrade_changes_nothing(tmp_path):
    """0002 creates cluster_capacity after altering chargeback: a table of that name already there fails it late."""
    url = SqliteFiles(tmp_path)()
    at_revision_0001(url)
    with create_engine(url).begin() as conn:
        conn.execute(text("CREATE TABLE cluster_capacity (note TEXT)"))
    before = schema(url)
    with pytest.raises(LedgerError, match=r"upgrading the schema failed, nothing changed: table cluster_capacity already exists"):
        upgrade_schema(url)
    assert schema(url) == before  # chargeback without list_cost, still revision 0001


def test_billing_run_killed_milliseconds_after_the_database_file_appears(tmp_path, write_config):
    """The operator's case: `kill -9` of a real first `billing run` at 0, 5, ... 45 ms after the file appears."""
    model = model_schema(tmp_path)
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0}}
    for trial in range(10):
        database = tmp_path / f"run-{trial}" / "ledger.db"
        config = write_config(clusters=[cluster], database=f"sqlite:///{database}", output_dir=str(tmp_path / "out"))
        process = Command("billing", "run", "--date", "2026-11-20", "--config", str(config))
        deadline = time.monotonic() + 60
        while not database.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(trial * 0.005)
        process.kill()
        process.communicate(timeout=60)
        left = schema(f"sqlite:///{database}")
        assert left == {} or left == {**model, "alembic_version": HEAD}, f"killed {trial * 5} ms in: {sorted(left)}"
        assert_whole_after_next_run(f"sqlite:///{database}", model)


class PostgresDatabases:
    """Databases on the session's PostgreSQL, dropped at the end of the test (a kill test makes some seventy)."""

    def __init__(self, server: PostgresServer):
        self.server = server
        self.made: list[str] = []

    def __call__(self, template: str = "template1") -> str:
        self.made.append(self.server.create_database(template))
        return self.server.url(self.made[-1])

    def copy(self, url: str) -> str:
        return self(url.rsplit("/", 1)[1])  # no session may be connected to it: every engine is disposed


@pytest.fixture
def postgres_databases(postgres_server: PostgresServer) -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases(postgres_server)
    yield databases
    for name in databases.made:
        postgres_server.drop_database(name)


def test_postgres_schema_creation_killed_at_any_point(postgres_databases):
    check_creation_killed_anywhere(postgres_databases, describe_model_on(postgres_databases))


def test_postgres_upgrade_killed_at_any_point(postgres_databases):
    check_upgrade_killed_anywhere(postgres_databases, describe_model_on(postgres_databases))


def test_postgres_first_runs_at_once_both_succeed(postgres_databases):
    model = describe_model_on(postgres_databases)
    for _ in range(TRIALS):
        url = postgres_databases()
        first_runs_at_once(url)
        assert_whole_after_next_run(url, model)


def describe_model_on(databases: PostgresDatabases) -> dict:
    engine = create_engine(databases())
    metadata.create_all(engine)
    found = describe(engine)
    engine.dispose()
    return found
