"""Each writing command killed with SIGKILL (`kill -9`, the OOM killer) at several points, then retried.

A command runs as a process of its own (tests/killed_command.py) that kills itself just before its n-th write
statement or commit reaches the database; the retry runs without a kill. After it the ledger must hold exactly
what one run without a kill leaves (every table, times aside), and the work must be done once: each message in
the outbox once, each received once by a real SMTP server but the one in flight at the kill. docs/faults.md
"Killed, then retried" is the promise tested here; `db upgrade` killed at every point:
tests/integration/test_schema_atomic.py.
"""

from __future__ import annotations

import signal
from collections import Counter
from datetime import date, datetime
from email import message_from_bytes, policy
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import create_engine, select

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.tables import deliveries, metadata
from billing.ledger.write import replace_day
from tests.helpers.processes import Command
from tests.integration.test_faults import DAY, PREVIOUS, configure, database, wait_for, world  # noqa: F401 (fixtures)

ADMINS = [f"admin-{n}@example.org" for n in range(1, 7)]


def billing(*args: str, kill_at: int = 0, lease: float | None = None) -> Command:
    """`billing ARGS` as a process of its own, killed before write point `kill_at` (0: never)."""
    options = [f"--kill-at={kill_at}"] + ([f"--lease={lease}"] if lease is not None else [])
    return Command("tests.killed_command", *options, *args)


def finish(process: Command) -> tuple[int, str]:
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def points(*args: str) -> int:
    """Run the command to its end; how many write points it had."""
    status, err = finish(billing(*args))
    assert status == 0, err
    return int(err.strip().splitlines()[-1].removeprefix("points: "))


def killed_then_retried(*args: str, kill_at: int) -> None:
    status, err = finish(billing(*args, kill_at=kill_at))
    assert status == -signal.SIGKILL, err
    status, err = finish(billing(*args, lease=0.2))  # a claim left in flight is taken over at once
    assert status == 0, err


def ledger(url: str) -> dict[str, list[tuple]]:
    """Every table, each row without what differs from run to run (the times when written, claimed, delivered,
    and a message's Message-ID), sorted."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {table.name: sorted((tuple(value for name, value in row._mapping.items()
                                              if name != "message_id" and not isinstance(value, datetime))
                                        for row in conn.execute(select(table))), key=repr)
                    for table in metadata.sorted_tables}
    finally:
        engine.dispose()


def outbox(directory: Path) -> dict[str, str]:
    """File name -> Message-ID of every message in the outbox."""
    return {path.name: str(message_from_bytes(path.read_bytes(), policy=policy.default)["Message-ID"])
            for path in sorted(directory.glob("*.eml"))}


def trial(tmp_path: Path, name: str, prometheus_url: str, mail: dict | None = None,
          database: str = "") -> tuple[str, str, Path]:
    """(config, ledger url, outbox) of a trial of its own: an empty ledger with its schema (SQLite, or `database`),
    and a config mailing the admins to an outbox (or `mail`)."""
    folder = tmp_path / name
    folder.mkdir()
    url = database or f"sqlite:///{folder / 'ledger.db'}"
    open_ledger(url).dispose()
    email = mail or {"enabled": True, "outbox_dir": str(folder / "outbox"), "admins": ADMINS}
    return configure(folder, url, prometheus_url, email=email), url, folder / "outbox"


def spread(total: int, messages: int) -> list[int]:
    """Four points of a command's writes: the first (the ledger untouched, as while collecting), inside the
    ledger's write, half way through mailing `messages` (before a message is recorded: it is in flight), and the
    last (the last message's record's commit)."""
    return [1, (total - 4 * messages) // 2, total - 2 * messages - 1, total]


def test_run_killed_while_writing_the_ledger_or_mailing_then_retried(prometheus_server, world, tmp_path):  # noqa: F811
    server = prometheus_server(world)
    args = ("run", "--date", str(DAY.date))
    config, reference, reference_outbox = trial(tmp_path, "reference", server.url)
    total = points(*args, "--config", config)
    assert total > 4 * len(ADMINS)  # the day's write, then four points per message: claim, commit, record, commit
    for point in spread(total, len(outbox(reference_outbox))):
        config, url, box = trial(tmp_path, f"killed-at-{point}", server.url)
        killed_then_retried(*args, "--config", config, kill_at=point)
        assert ledger(url) == ledger(reference), point
        assert list(outbox(box)) == list(outbox(reference_outbox)), point  # each message once


def test_backfill_killed_at_points_then_retried(prometheus_server, world, tmp_path):  # noqa: F811
    server = prometheus_server(world)
    args = ("backfill", "--from", "2026-11-19", "--to", str(DAY.date), "--email")
    config, reference, reference_outbox = trial(tmp_path, "reference", server.url)
    total = points(*args, "--config", config)
    last_day = [name for name in outbox(reference_outbox) if name.startswith(str(DAY.date))]
    # the two points inside the work (a day's write, a message in flight); the run's test has the first and last
    for point in spread(total, len(last_day))[1:3]:
        config, url, box = trial(tmp_path, f"killed-at-{point}", server.url)
        killed_then_retried(*args, "--config", config, kill_at=point)
        assert ledger(url) == ledger(reference), point
        assert list(outbox(box)) == list(outbox(reference_outbox)), point


OCTOBER_DAY = date(2026, 10, 20)


def october(tmp_path: Path, name: str, *closed: str) -> tuple[str, str]:
    """(config, ledger url): a ledger holding one day of October, after `closed` commands (`close`, `reopen`)."""
    config, url, _ = trial(tmp_path, name, "http://127.0.0.1:9", mail={"enabled": False})
    replace_day(open_ledger(url), OCTOBER_DAY, DayBill(PREVIOUS), "USD")
    for command in closed:
        assert CliRunner().invoke(main, [*month_command(command), "--config", config]).exit_code == 0
    return config, url


def month_command(command: str) -> tuple[str, ...]:
    return ("close", "--month", "2026-10", "--by", "test", "--allow-missing") if command == "close" else \
        ("close", "--month", "2026-10", "--by", "test", "--reopen")


def test_close_and_reopen_killed_then_retried(tmp_path):
    """Each is one transaction: killed at its first write or before its commit, the month is as before; the retry
    closes (or reopens) it once."""
    for command, before in [("close", ()), ("reopen", ("close",))]:
        config, reference = october(tmp_path, f"{command}-reference", *before)
        total = points(*month_command(command), "--config", config)
        for point in (1, total):
            config, url = october(tmp_path, f"{command}-killed-at-{point}", *before)
            killed_then_retried(*month_command(command), "--config", config, kill_at=point)
            assert ledger(url) == ledger(reference), (command, point)


def test_a_run_killed_while_mailing_over_smtp_and_its_retry_deliver_each_summary_once(prometheus_server, world,  # noqa: F811
                                                                                        smtp_server, tmp_path,
                                                                                        database):  # noqa: F811
    """Issue 44.5: delivery was recorded only after the whole batch, so the CronJob's retry after a kill at
    message 3 sent none of the unsent ones ("went out before, or another run is sending them"), and a run after
    the claims' 15 minutes sent every one again.

    The server keeps each message as it arrives and answers 250 a second later; the run is killed when the third
    has arrived, waiting for that 250. The third is the one SMTP cannot make exactly-once: the retry takes it over
    and sends it again with its first Message-ID, marked taken over in the ledger."""
    server, smtp = prometheus_server(world), smtp_server(delay=1.0)
    mail = {"enabled": True, "smtp_host": smtp.host, "smtp_port": smtp.port, "starttls": False, "admins": ADMINS,
            "team_leads": False}
    config, url, _ = trial(tmp_path, "smtp", server.url, mail, database)
    args = ("run", "--date", str(DAY.date), "--config", config)
    process = billing(*args)
    wait_for(lambda: len(smtp.messages) == 3 or process.poll() is not None, "the third message to arrive")
    process.kill()
    assert finish(process)[0] == -signal.SIGKILL
    [in_flight] = smtp.messages[2].rcpt_tos

    smtp.delay = 0.0  # only the message in flight at the kill needed the slow answer
    status, err = finish(billing(*args, lease=0.2))  # the CronJob's retry (its lease shortened: no wait)
    assert status == 0, err
    received = Counter(recipient for message in smtp.messages for recipient in message.rcpt_tos)
    assert received == {**dict.fromkeys(ADMINS, 1), in_flight: 2}
    twice = {str(message_from_bytes(m.data, policy=policy.default)["Message-ID"]) for m in smtp.messages
             if m.rcpt_tos == [in_flight]}
    assert len(twice) == 1  # the same message, as a mail store that knows its Message-ID shows it: once
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(deliveries.c.address, deliveries.c.delivered_at, deliveries.c.taken_over_at)).all()
    engine.dispose()
    assert sorted(row.address for row in rows) == sorted(ADMINS) and all(row.delivered_at for row in rows)
    assert [row.address for row in rows if row.taken_over_at] == [in_flight]
