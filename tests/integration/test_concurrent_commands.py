"""`billing invoice import` killed (SIGKILL) at each of its write points and retried, and each writing command beside
a second one at once, as real processes on SQLite and PostgreSQL (docs/faults.md, "Killed, then retried" and "Two
commands at once").

A race on PostgreSQL is made deterministic by holding, in a connection of the test, the lock the commands take (the
advisory lock of the month's first day): both commands are started, seen waiting in pg_locks, then let go.
"""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import Engine, select, text

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.tables import closed_months, invoices, month_closings, statement_lines
from billing.ledger.write import replace_day
from tests.collect.test_invoices import row, write_export
from tests.helpers.locks import waiting
from tests.helpers.processes import Command
from tests.integration.test_faults import DAY, PREVIOUS, world  # noqa: F401 (fixture)
from tests.integration.test_kills import billing, ledger, outbox, points, trial

OCT = date(2026, 10, 1)
OCTOBER = "2026-10-01T00:00:00Z"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledgers(request, tmp_path) -> Iterator[Callable[[str], str]]:
    """`ledgers(name)`: the URL of a new empty ledger database of its own (SQLite, or a database on PostgreSQL)."""
    if request.param == "sqlite":
        yield lambda name: f"sqlite:///{tmp_path / f'{name}.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    names: list[str] = []

    def create(name: str) -> str:
        names.append(server.create_database())
        return server.url(names[-1])

    yield create
    for name in names:
        server.drop_database(name)


def october(tmp_path: Path, name: str, database: str) -> tuple[str, str]:
    """(config, ledger url): a ledger holding October 20 (alice 3.00 of GPU for robotics on jaguar), not closed."""
    config, url, _ = trial(tmp_path, name, "http://127.0.0.1:9", mail={"enabled": False}, database=database)
    replace_day(open_ledger(url), date(2026, 10, 20), DayBill(PREVIOUS), "USD")
    return config, url


def recovering(tmp_path: Path, name: str, database: str) -> tuple[str, str]:
    """`october`, with cluster jaguar recovering its cost from its invoice."""
    config, url = october(tmp_path, name, database)
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["recover"] = {"invoice_match": {"Tags.cluster": "jaguar"}}
    Path(config).write_text(yaml.safe_dump(settings))
    return config, url


def bills(tmp_path: Path) -> tuple[Path, Path]:
    """October's bill of jaguar in two files: 40.00 + 5.00 of its and 9.99 of another cluster's, then 15.00."""
    return (write_export(tmp_path / "part-1.csv", [row("40.00", "jaguar", "USD", period=OCTOBER),
                                                   row("5.00", "jaguar", "USD", period=OCTOBER),
                                                   row("9.99", "heron", "USD", period=OCTOBER)]),
            write_export(tmp_path / "part-2.csv", [row("15.00", "jaguar", "USD", period=OCTOBER)]))


def recorded(file: Path, cost: float, rows_read: int, rows_matched: int) -> tuple:
    """An invoices row as one import of `file` by finance leaves it (its checksum worked out here)."""
    return (file.name, hashlib.sha256(file.read_bytes()).hexdigest(), cost, rows_read, rows_matched, "finance")


def kept(url: str) -> list[tuple]:
    """October's invoice of jaguar, a row per file as `recorded` writes it."""
    return sorted(tuple(r) for r in rows(url, select(
        invoices.c.file_name, invoices.c.sha256, invoices.c.billed_cost, invoices.c.rows_read, invoices.c.rows_matched,
        invoices.c.imported_by).where(invoices.c.month == OCT, invoices.c.cluster == "jaguar")))


def rows(url: str, query) -> list:
    engine = open_ledger(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(query).all())
    finally:
        engine.dispose()


IMPORT = ("invoice", "import", "--cluster", "jaguar", "--month", "2026-10", "--by", "finance")  # October's of jaguar


def importing(config: str, file: Path, *flags: str, kill_at: int = 0) -> Command:
    """The import as a process of its own."""
    return billing(*IMPORT, *flags, str(file), "--config", config, kill_at=kill_at)


def in_process(config: str, file: Path, *flags: str):
    """The import in this process (quicker, for what is not killed)."""
    return CliRunner().invoke(main, [*IMPORT, *flags, str(file), "--config", config])


def outcome(process: Command) -> tuple[int, str]:
    """(exit status, what it said on stdout and stderr)."""
    out, err = process.communicate(timeout=300)
    return process.returncode, out + err


# --- invoice import killed, then retried


def test_an_invoice_import_killed_at_each_write_point_then_retried_records_each_file_once(ledgers, tmp_path):
    """Killed before any of its write points (its one transaction: the begin, the insert, the commit), the import
    leaves the month as it was, and its retry records the file once; with --add (killed before its commit), a
    second file is added once. A retry after the commit finds the very file (name and content) recorded: it exits
    0 saying so and changes nothing."""
    first, second = bills(tmp_path)
    one = [recorded(first, 45.00, 3, 2)]  # by hand: 40.00 + 5.00 of jaguar's 2 rows of 3
    both = sorted(one + [recorded(second, 15.00, 1, 1)])
    config, url = recovering(tmp_path, "count", ledgers("count"))
    total = points(*IMPORT, str(first), "--config", config)
    assert total >= 2  # the insert and the commit at least
    trials = [((), [], first, one, point) for point in range(1, total + 1)] + [(("--add",), one, second, both, total)]
    for flags, before, file, after, point in trials:
        config, url = recovering(tmp_path, f"killed{''.join(flags)}-at-{point}", ledgers(f"k{''.join(flags)}{point}"))
        if before:
            assert in_process(config, first).exit_code == 0
        status, said = outcome(importing(config, file, *flags, kill_at=point))
        assert status == -signal.SIGKILL, said
        assert kept(url) == before, (flags, point)
        retry = in_process(config, file, *flags)
        assert retry.exit_code == 0 and "imported the invoice" in retry.output, retry.output
        assert kept(url) == after, (flags, point)
        again = in_process(config, file, *flags)  # the retry of an import that had committed
        assert again.exit_code == 0, again.output
        checksum = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
        assert f"has {file.name} (sha256 {checksum}…) imported already; nothing changed" in again.output
        assert kept(url) == after


# --- a second command at once



@contextmanager
def held(url: str, *locks: str) -> Iterator[Engine]:
    """PostgreSQL: the advisory lock of October's first day (the lock closing, reopening and importing October
    take, and a run of that day) held by the test, with `locks` (statements) taken too, until the block ends."""
    engine = open_ledger(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": OCT.toordinal()})
            for lock in locks:
                conn.execute(text(lock))
            yield engine
    finally:
        engine.dispose()


MONTH = ("close", "--month", "2026-10", "--by", "test")  # October's close, with CLOSE or REOPEN
CLOSE, REOPEN = ("--allow-missing",), ("--reopen",)


def month_command(config: str, *flags: str) -> Command:
    return billing(*MONTH, *flags, "--config", config)


def log(url: str) -> list[str]:
    """October's closes and reopens, in order."""
    return [action for action, in rows(url, select(month_closings.c.action).where(month_closings.c.month == OCT)
                                             .order_by(month_closings.c.logged_at))]


def statement(url: str) -> list[tuple]:
    return [tuple(r) for r in rows(url, select(statement_lines.c.team, statement_lines.c.amount)
                                   .where(statement_lines.c.month == OCT))]


def test_two_imports_of_a_month_at_once_record_one_file_once(postgres_url, tmp_path):
    """Three imports of October's invoice wait together for a close of October in progress (the test's lock), then
    go one by one: the first records its file; the same file again says it was imported already (exit 0), the
    other file is refused as a month imported before (exit 2). Never two files, never one twice."""
    first, second = bills(tmp_path)
    config, url = recovering(tmp_path, "race", postgres_url)
    with held(url) as engine:
        processes = {name: importing(config, file) for name, file in [("first", first), ("again", first),
                                                                      ("second", second)]}
        waiting(engine, 3)
    said = {name: outcome(process) for name, process in processes.items()}
    [winner] = [name for name, (status, output) in said.items() if "imported the invoice of" in output]
    file = second if winner == "second" else first
    assert kept(url) == [recorded(first, 45.00, 3, 2) if file == first else recorded(second, 15.00, 1, 1)]
    for name, (status, output) in said.items():
        if name == winner:
            assert status == 0, output
        elif {name, winner} == {"first", "again"}:
            assert status == 0 and "imported already; nothing changed" in output, output
        else:
            assert status == 2 and f"was imported from {file.name}" in output, output


def test_two_closes_of_a_month_at_once_close_it_once(postgres_url, tmp_path):
    """Both wait for the test's lock (a run of October 1, say); one closes October, the other then finds it closed
    and changes nothing: one statement (by hand: robotics 3.00, alice's GPU hours), one close in the log."""
    config, url = october(tmp_path, "race", postgres_url)
    with held(url) as engine:
        closes = [month_command(config, *CLOSE) for _ in range(2)]
        waiting(engine, 2)
    said = sorted(outcome(process) for process in closes)
    assert said[0][0] == 0 and "closed 2026-10 (by test)" in said[0][1], said
    assert said[1][0] == 2 and "2026-10 was closed on" in said[1][1], said
    assert statement(url) == [("robotics", 3.00)]
    assert log(url) == ["close"]


def test_a_reopen_during_a_close_waits_for_it_then_reopens(postgres_url, tmp_path):
    """A close of October waits (the test's lock); a reopen started after it waits behind it, then reopens what it
    closed, rather than answering "is not closed" while the close is about to commit."""
    config, url = october(tmp_path, "race", postgres_url)
    with held(url) as engine:
        closing = month_command(config, *CLOSE)
        waiting(engine, 1)
        reopening = month_command(config, *REOPEN)
        waiting(engine, 2)
    closed, reopened = outcome(closing), outcome(reopening)
    assert closed[0] == 0, closed
    assert reopened[0] == 0 and "reopened 2026-10 (by test)" in reopened[1], reopened
    assert rows(url, select(closed_months)) == [] and statement(url) == []
    assert log(url) == ["close", "reopen"]


def test_two_reopens_of_a_month_at_once_reopen_it_once(postgres_url, tmp_path):
    """October closed; two reopens at once, the month's mark locked by the test as well: one reopens it, the other
    then finds it not closed (exit 2). Before, neither waited for the other: both deleted the month's mark and both
    logged a reopen."""
    config, url = october(tmp_path, "race", postgres_url)
    assert CliRunner().invoke(main, [*MONTH, *CLOSE, "--config", config]).exit_code == 0
    with held(url, "SELECT * FROM closed_months FOR UPDATE") as engine:
        reopens = [month_command(config, *REOPEN) for _ in range(2)]
        waiting(engine, 2)
    said = sorted(outcome(process) for process in reopens)
    assert said[0][0] == 0 and "reopened 2026-10" in said[0][1], said
    assert said[1][0] == 2 and "2026-10 is not closed" in said[1][1], said
    assert log(url) == ["close", "reopen"]


def test_a_backfill_and_a_run_of_one_of_its_days_at_once_bill_and_mail_each_day_once(prometheus_server, world,  # noqa: F811
                                                                                     tmp_path):
    """On SQLite, started together (how their writes interleave is the scheduler's): whichever writes November 20
    last replaces the other's rows, and the day's summaries go out once; the ledger and outbox are those of the
    backfill alone."""
    server = prometheus_server(world)
    backfill = ("backfill", "--from", "2026-11-19", "--to", str(DAY.date), "--email")
    config, reference, reference_outbox = trial(tmp_path, "reference", server.url)
    alone = CliRunner().invoke(main, [*backfill, "--config", config])
    assert alone.exit_code == 0, alone.output
    config, url, box = trial(tmp_path, "race", server.url)
    both = [billing(*backfill, "--config", config), billing("run", "--date", str(DAY.date), "--config", config)]
    for status, said in map(outcome, both):
        assert status == 0, said
    assert ledger(url) == ledger(reference)
    assert list(outbox(box)) == list(outbox(reference_outbox))
