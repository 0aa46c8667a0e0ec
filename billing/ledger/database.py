"""The ledger database: opening it (SQLite or PostgreSQL), transactions, and failures as one sentence.

Every read and write goes through here, so a database outage reads the same
whichever command met it: a LedgerError naming the database and what was being done.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    create_engine,
    event,
)
from sqlalchemy.exc import SQLAlchemyError

from billing.errors import RunFailed
from billing.ledger import migrate
from billing.private import create_private_file, private_directory

if TYPE_CHECKING:
    import pandas as pd


class LedgerError(RunFailed):
    """The database could not be reached or written; the message names it."""


class NoLedgerYet(LedgerError):
    """The database (an SQLite file) or its ledger tables do not exist yet; the first run creates them."""


# an engine's execution option: the config key its URL came from (`database`, `web.database`), for sentences
CONFIG_KEY = "billing_config_key"


def database_name(engine: Engine) -> str:
    return f"database {engine.url.render_as_string(hide_password=True)}"


def _engine(url: str, create: bool = True, key: str = "database") -> Engine:
    """Connections are checked before use: a database restarted while the job
    collected for an hour must not fail the write with a stale connection.
    Without `create` a missing SQLite file is NoLedgerYet instead of made."""
    try:
        engine = create_engine(url, pool_pre_ping=True)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise LedgerError(f"config key {key}: cannot use {url.split('@')[-1]!r} ({exc})") from None
    engine.update_execution_options(**{CONFIG_KEY: key})
    if engine.url.get_backend_name() == "sqlite":
        _real_sqlite_transactions(engine)
        if engine.url.database not in (None, "", ":memory:"):
            path = Path(engine.url.database)
            if not create and not path.exists():
                raise NoLedgerYet(f"{database_name(engine)}: the file {path} does not exist yet (the first billing run creates it)")
            try:
                private_directory(path.parent)  # like output_dir, but the ledger holds names and emails
            except OSError as exc:
                raise LedgerError(f"{database_name(engine)}: cannot create its directory ({exc.strerror})") from None
            try:
                create_private_file(path)
            except OSError as exc:
                raise LedgerError(f"{database_name(engine)}: cannot create the file ({exc.strerror})") from None
    return engine


def _real_sqlite_transactions(engine: Engine) -> None:
    """Transactions on SQLite that hold DDL too, as they do on PostgreSQL.

    Python's sqlite3 (before 3.12's autocommit=False) begins a transaction only
    before INSERT/UPDATE/DELETE and runs every other statement, CREATE TABLE
    included, on its own: a schema change killed halfway stayed half made.
    SQLAlchemy's recipe for pysqlite: switch that off and emit BEGIN ourselves;
    a connection's `sqlite_begin` execution option can make it BEGIN EXCLUSIVE.
    """

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection, connection_record) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql(connection.get_execution_options().get(migrate.SQLITE_BEGIN, "BEGIN"))


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A transaction that reads and then writes. On SQLite it takes the write lock as it begins (BEGIN
    IMMEDIATE): begun deferred, two such transactions each hold the read lock the other's write needs, and
    SQLite fails one at once ("database is locked") instead of letting it wait its busy timeout."""
    with engine.connect() as connection:
        connection.execution_options(**{migrate.SQLITE_BEGIN: "BEGIN IMMEDIATE"})
        with connection.begin():
            yield connection


def open_ledger(url: str, create: bool = True, key: str = "database") -> Engine:
    """An engine on the ledger database at the schema this billing needs; `key` is the config key of `url`.

    A new, empty database gets the schema (without `create`, which `billing
    check` uses to change nothing, it is NoLedgerYet); one at an older schema
    revision is left alone with the advice to run `billing db upgrade`.
    """
    engine = _engine(url, create, key)
    try:
        with engine.connect() as conn:
            empty, current = migrate.is_empty(conn), migrate.current_revision(conn)
        if empty and not create:
            raise NoLedgerYet(f"{database_name(engine)} holds no ledger tables yet (the first billing run creates them)")
        if empty:
            migrate.upgrade(engine)
        elif current != migrate.head_revision():
            raise LedgerError(
                f"{database_name(engine)} has ledger schema revision {current or 'none'}, this billing needs "
                f"{migrate.head_revision()}: run `billing db upgrade` first"
            )
    except SQLAlchemyError as exc:
        raise LedgerError(f"{database_name(engine)}: opening the ledger failed: {failure(engine, exc)}") from None
    return engine


def upgrade_schema(url: str) -> tuple[str | None, str]:
    """Apply pending migrations; (from, to) revisions."""
    engine = _engine(url)
    try:
        return migrate.upgrade(engine)
    except SQLAlchemyError as exc:
        raise LedgerError(f"{database_name(engine)}: upgrading the schema failed, nothing changed: "
                          f"{failure(engine, exc)}") from None


# what libpq says when the server wants a password and got none, or a wrong one
_NO_PASSWORD = ("no password supplied", "password authentication failed")


def failure(engine: Engine, exc: SQLAlchemyError) -> str:
    """Why a database operation failed, with what to fix where a connection is at fault."""
    return failure_cause(exc) + _connection_fix(engine, exc)


def _connection_fix(engine: Engine, exc: SQLAlchemyError) -> str:
    """'; ' and what to fix where PostgreSQL cannot be reached, refuses the login for want of the right password
    (where that comes from) or loses the connection; else ''."""
    key = engine.get_execution_options().get(CONFIG_KEY, "database")
    if any(words in str(exc) for words in _NO_PASSWORD):
        return (f"; the password of user {engine.url.username} comes from PGPASSWORD or ~/.pgpass (PGPASSFILE names "
                f"another file), or from the URL of config key {key}")
    if str(getattr(exc, "orig", "")).startswith("connection failed"):  # psycopg: no server answered there
        return f"; the server is down or the host and port of config key {key} are wrong"
    if getattr(exc, "connection_invalidated", False):  # SQLAlchemy: the session broke (psycopg's `broken`)
        return (f"; the connection to the server of config key {key} was lost (the server stopped or restarted, or "
                "the network cut it)")
    return ""


def failure_cause(exc: SQLAlchemyError) -> str:
    cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    if cause == "database is locked":  # SQLite's busy timeout (5 s unless the URL says ?timeout=) ran out
        cause += " (another process held the database longer than the busy timeout; ?timeout=SECONDS on the URL waits longer)"
    return cause


@contextmanager
def transaction(engine: Engine, what: str, writes: bool = False) -> Iterator[Connection]:
    """One transaction; a database failure becomes a LedgerError naming the database and `what`, nothing kept.
    `writes`: one that reads and then writes, begun as `writing` begins it."""
    try:
        with writing(engine) if writes else engine.begin() as conn:
            yield conn
    except SQLAlchemyError as exc:
        raise LedgerError(f"{database_name(engine)}: {what} failed, nothing changed: {failure(engine, exc)}") from None


def fetch_rows(engine: Engine, query, what: str) -> list:
    """All rows of a query; a failure is one sentence naming the database and what was read."""
    try:
        with engine.connect() as conn:
            return list(conn.execute(query).all())
    except SQLAlchemyError as exc:
        raise LedgerError(f"{database_name(engine)}: reading {what} failed: {failure(engine, exc)}") from None


def read_frame(engine: Engine, query, what: str, columns: list[str], dates: Sequence[str] = ()) -> pd.DataFrame:
    """All rows of a query as a DataFrame, the columns named in `dates` as datetime.date (see `frame_of`)."""
    return frame_of(fetch_rows(engine, query, what), columns, dates)


def frame_of(rows: Iterable, columns: list[str], dates: Sequence[str] = ()) -> pd.DataFrame:
    """Rows as a DataFrame, from plain tuples (pandas probes SQLAlchemy rows key by key, ten times slower on a big
    day's workload rows), the `dates` columns as datetime.date whichever type the database handed back.

    pandas is imported here, when a frame is made: readers of plain rows, such as `billing report`, start
    without it (tests/cli/test_cli_imports.py)."""
    import pandas as pd

    frame = pd.DataFrame([tuple(row) for row in rows], columns=columns)
    for column in dates:
        frame[column] = pd.to_datetime(frame[column]).dt.date
    return frame


def fetch(engine: Engine, query: Select) -> list[dict]:
    """The rows of a read-only query as dicts (column label -> value), for report queries."""
    return [dict(row._mapping) for row in fetch_rows(engine, query, "the ledger")]
