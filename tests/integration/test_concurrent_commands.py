"""`billing invoice import` killed (SIGKILL) at each of its write points and retried, and each writing command beside
a second one at once, as real processes on SQLite and PostgreSQL (docs/faults.md, "Killed, then retried" and "Two
commands at once").

A race on PostgreSQL is made deterministic by holding, in a connection of the test, the lock the commands take (the
advisory lock of the month's first day): both commands are started, seen waiting in pg_locks, then let go.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import Engine, delete, select, text

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.tables import closed_months, invoices, month_closings, statement_lines
from billing.ledger.write import replace_day
from tests.collect.test_invoices import row, write_export
from tests.integration.test_faults import DAY, PREVIOUS, world  # noqa: F401 (fixture)
from tests.integration.test_kills import billing, finish, ledger, outbox, points, trial
from tests.integration.test_statement_postgres import waiting

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


def recovering(tmp_path: Path, name: str, database: str) -> tuple[str, str]:
    """(config, ledger url) of a trial of its own whose cluster jaguar recovers its cost from its invoice; its ledger has
    October 20 run (PREVIOUS: alice 3.00 on jaguar)."""
    config, url, _ = trial(tmp_path, name, "http://127.0.0.1:9", mail={"enabled": False}, database=database)
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["recover"] = {"invoice_match": {"Tags.cluster": "jaguar"}}
    Path(config).write_text(yaml.safe_dump(settings))
    replace_day(open_ledger(url), date(2026, 10, 20), DayBill(PREVIOUS), "USD")
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


def importing(config: str, file: Path, *flags: str, kill_at: int = 0) -> subprocess.Popen:
    """`billing invoice import` of October's bill of jaguar by finance, as a process of its own."""
    return billing("invoice", "import", "--cluster", "jaguar", "--month", "2026-10", "--by", "finance", *flags,
                   str(file), "--config", config, kill_at=kill_at)


def outcome(process: subprocess.Popen) -> tuple[int, str]:
    """(exit status, what it said on stdout and stderr)."""
    out, err = process.communicate(timeout=300)
    return process.returncode, out + err


# --- invoice import killed, then retried


def test_an_invoice_import_killed_before_its_first_write_or_its_commit_then_retried_records_each_file_once(
        ledgers, tmp_path):
    """Killed before its first write or before its commit (its one transaction), the import leaves the month as it
    was, and its retry records the file once; with --add, a second file is added once. A retry after the commit
    finds the very file (name and content) recorded: it exits 0 saying so and changes nothing."""
    first, second = bills(tmp_path)
    one = [recorded(first, 45.00, 3, 2)]  # by hand: 40.00 + 5.00 of jaguar's 2 rows of 3
    both = sorted(one + [recorded(second, 15.00, 1, 1)])
    config, url = recovering(tmp_path, "count", ledgers("count"))
    total = points("invoice", "import", "--cluster", "jaguar", "--month", "2026-10", "--by", "finance", str(first),
                   "--config", config)
    assert total >= 2  # the insert and the commit at least
    for flags, before, file, after in [((), [], first, one), (("--add",), one, second, both)]:
        for point in (1, total):
            config, url = recovering(tmp_path, f"killed{''.join(flags)}-at-{point}", ledgers(f"k{''.join(flags)}{point}"))
            if before:
                assert in_process(config, first).exit_code == 0
            status, said = outcome(importing(config, file, *flags, kill_at=point))
            assert status == -signal.SIGKILL, said
            assert kept(url) == before, (flags, point)
            status, said = outcome(importing(config, file, *flags))
            assert status == 0, said
            assert kept(url) == after, (flags, point)
        again = in_process(config, file, *flags)  # the retry of an import that had committed
        assert again.exit_code == 0, again.output
        checksum = recorded(file, 0, 0, 0)[1]
        assert f"has {file.name} (sha256 {checksum[:12]}…) imported already; nothing changed" in again.output
        assert kept(url) == after


def in_process(config: str, file: Path, *flags: str):
    """The import in this process (quicker, for what is not killed)."""
    return CliRunner().invoke(main, ["invoice", "import", "--cluster", "jaguar", "--month", "2026-10", "--by",
                                     "finance", *flags, str(file), "--config", config])
