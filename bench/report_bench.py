"""How fast does `billing report --team T` answer on a year of a big ledger?

Builds a ledger of DAYS days x NAMESPACES namespaces (4 in 5 personal, a
tenth of their owners on two teams, 60 teams, a third of the namespaces
using GPUs of one of three models, two clusters) with bulk inserts, in SQLite
and in PostgreSQL, then times the report of one team over the default range
(month to date) and over the whole year, in-process (query and formatting)
and as a whole command (`python -m billing`, interpreter start included).

    python bench/report_bench.py                      # SQLite, then PostgreSQL on a throwaway server
    python bench/report_bench.py --postgres postgresql+psycopg://user@host/db
    python bench/report_bench.py --days 3 --skip-postgres   # a quick try of the script itself

The target is under one second for each report.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import yaml
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from billing.cli import main  # noqa: E402
from billing.ledger.database import open_ledger  # noqa: E402
from billing.ledger.tables import LEDGER_COLUMNS  # noqa: E402
from fixtures.servers import start_postgres  # noqa: E402
from tests.helpers.config import MINIMAL_CONFIG  # noqa: E402

DAYS = 365
NAMESPACES = 5_000
TEAMS = 60
LAST_DAY = date.today() - timedelta(days=1)
MODELS = {"NVIDIA-H100-80GB-HBM3": 2.4, "NVIDIA-A100-SXM4-80GB": 1.6, "": 1.1}
PRICES = {"jaguar": (0.012, 0.0015), "ibis": (0.034, 0.0045)}
TEAM = "team-07"
COLUMNS = ", ".join(LEDGER_COLUMNS)  # the order ledger_rows yields
DAY_COLUMNS = "day, completed_at, rows"


def namespaces(rng: random.Random) -> list[tuple[str, str, list[str], str | None, str | None]]:
    """(namespace, cluster, teams, owner, gpu_model or None) for the whole year."""
    result = []
    for n in range(NAMESPACES):
        cluster = "jaguar" if n % 3 else "ibis"
        model = rng.choice(list(MODELS)) if n % 3 == 0 else None
        if n % 5 == 0:
            result.append((f"team-{n % TEAMS:02d}-{n}", cluster, [f"team-{n % TEAMS:02d}"], None, model))
        else:
            teams = [f"team-{n % TEAMS:02d}"] + ([f"team-{(n + 1) % TEAMS:02d}"] if n % 10 == 1 else [])
            result.append((f"user{n}", cluster, teams, f"user{n}", model))
    return result


def billed_days(days: int) -> list[date]:
    """The last `days` days, oldest first."""
    return [LAST_DAY - timedelta(days=days - 1 - d) for d in range(days)]


def ledger_rows(days: int, computed_at: datetime) -> Iterator[tuple]:
    """Every chargeback row of the days, in the order of LEDGER_COLUMNS."""
    rng = random.Random(7)
    spaces = namespaces(rng)
    for day in billed_days(days):
        for namespace, cluster, teams, owner, model in spaces:
            share = 1 / len(teams)
            cpu_price, memory_price = PRICES[cluster]
            usage = [("cpu", "", rng.uniform(1, 200), cpu_price), ("memory", "", rng.uniform(4, 800), memory_price)]
            if model is not None:
                usage.append(("gpu", model, rng.uniform(0, 48), MODELS[model]))
            for team in teams:
                for resource, gpu_model, hours, price in usage:
                    quantity = hours * share
                    yield (day, cluster, namespace, team, owner, resource, gpu_model, quantity, price,
                           quantity * price, "USD", computed_at, quantity * price)  # no discount: list cost = cost


def build_sqlite(url: str, days: int) -> int:
    engine = open_ledger(url)
    computed_at = datetime.now(timezone.utc)
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute("PRAGMA synchronous = OFF")
        marks = ", ".join("?" * len(LEDGER_COLUMNS))
        rows = ((r[0].isoformat(), *r[1:11], r[11].isoformat(sep=" "), *r[12:]) for r in ledger_rows(days, computed_at))
        cursor.executemany(f"INSERT INTO chargeback ({COLUMNS}) VALUES ({marks})", rows)
        count = cursor.rowcount
        cursor.executemany(
            f"INSERT INTO completed_days ({DAY_COLUMNS}) VALUES (?, ?, 0)",
            [(day.isoformat(), computed_at.isoformat(sep=" ")) for day in billed_days(days)],
        )
        cursor.execute("ANALYZE")
        connection.commit()
    finally:
        connection.close()
    return count


def build_postgres(url: str, days: int) -> int:
    engine = open_ledger(url)
    computed_at = datetime.now(timezone.utc)
    connection = engine.raw_connection()
    count = 0
    try:
        cursor = connection.cursor()
        with cursor.copy(f"COPY chargeback ({COLUMNS}) FROM STDIN") as copy:
            for row in ledger_rows(days, computed_at):
                copy.write_row(row)
                count += 1
        with cursor.copy(f"COPY completed_days ({DAY_COLUMNS}) FROM STDIN") as copy:
            for day in billed_days(days):
                copy.write_row((day, computed_at, 0))
        connection.commit()
        connection.driver_connection.autocommit = True
        cursor.execute("VACUUM ANALYZE")  # what autovacuum does to a ledger between nightly runs
    finally:
        connection.close()
    return count


def config_file(directory: Path, url: str) -> Path:
    """The tests' minimal config with this ledger and the ledger's currency."""
    path = directory / f"billing-{url.split(':')[0]}.yaml"
    path.write_text(yaml.safe_dump({**MINIMAL_CONFIG, "database": url, "currency": "USD"}))
    return path


def best_of(runs: int, action) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def time_reports(name: str, config: Path, days: int) -> None:
    everything = ["--from", billed_days(days)[0].isoformat(), "--to", LAST_DAY.isoformat()]
    for label, extra in (("default range", []), (f"{days} days", everything)):
        args = ["report", "--team", TEAM, "--config", str(config), *extra]

        def in_process(args: list[str] = args) -> None:
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 0, result.output

        def command(args: list[str] = args) -> None:
            subprocess.run([sys.executable, "-m", "billing", *args], check=True, capture_output=True, cwd=ROOT)

        print(f"{name:<10}  {label:<13}  in-process {best_of(3, in_process):6.3f} s   "
              f"whole command {best_of(3, command):6.3f} s", flush=True)


def startup() -> None:
    """What every command pays before it does anything: `billing --version`."""
    version = best_of(3, lambda: subprocess.run([sys.executable, "-m", "billing", "--version"], check=True,
                                                capture_output=True, cwd=ROOT))
    print(f"startup     billing --version  {version:6.3f} s (part of every whole command)", flush=True)


def bench(name: str, url: str, build, directory: Path, days: int) -> None:
    start = time.perf_counter()
    rows = build(url, days)
    print(f"{name:<10}  built {rows:,} rows in {time.perf_counter() - start:.1f} s", flush=True)
    time_reports(name, config_file(directory, url), days)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", help="URL of an empty PostgreSQL database to use instead of starting a server")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--days", type=int, default=DAYS, help=f"days of ledger (default {DAYS})")
    options = parser.parse_args()
    startup()
    with tempfile.TemporaryDirectory(prefix="report-bench-") as scratch:
        directory = Path(scratch)
        bench("sqlite", f"sqlite:///{directory / 'ledger.db'}", build_sqlite, directory, options.days)
        if options.postgres:
            bench("postgresql", options.postgres, build_postgres, directory, options.days)
        elif not options.skip_postgres:
            server = start_postgres()  # a throwaway server, as the integration tests start it
            try:
                bench("postgresql", server.url(server.create_database()), build_postgres, directory, options.days)
            finally:
                server.stop()


if __name__ == "__main__":
    main_bench()
