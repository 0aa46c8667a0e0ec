"""How fast does `billing serve` answer on a big ledger?

Builds report_bench's ledger (5,000 namespaces, 60 teams, two clusters; 60
days by default) in SQLite and in PostgreSQL, stores a directory snapshot of
its people and teams (each team led by one person), and times each page
through Flask's test client (queries, summing and rendering; no network):
a person's page, a lead's team page, the admins' all-teams page and the JSON
API, over the default range (month to yesterday).

    python bench/serve_bench.py                 # SQLite, then PostgreSQL on a throwaway server
    python bench/serve_bench.py --days 3 --skip-postgres
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report_bench import NAMESPACES, TEAMS, best_of, build_postgres, build_sqlite, namespaces  # noqa: E402
from billing.config import Config  # noqa: E402
from billing.directory.people import Directory, Person, Team, directory_to_json  # noqa: E402
from billing.ledger.database import open_ledger  # noqa: E402
from billing.ledger.tables import directory_snapshots  # noqa: E402
from billing.web.app import create_app  # noqa: E402
from fixtures.servers import start_postgres  # noqa: E402
from tests.helpers.config import MINIMAL_CONFIG  # noqa: E402

PERSON, LEAD, ADMIN = "user1", "user7", "admin"  # user7 owns a namespace of team-07 and leads it
PAGES = [("person", PERSON, "/me"), ("lead", LEAD, "/teams/team-07"), ("admin", ADMIN, "/all"),
         ("api, admin", ADMIN, "/api/v1/costs?by=team")]


def store_directory(url: str) -> int:
    """The snapshot a nightly run would leave: every owner, every team, the first member its lead."""
    spaces = namespaces(random.Random(7))
    owners = sorted({owner for _, _, _, owner, _ in spaces if owner})
    members: dict[str, list[str]] = {f"team-{n:02d}": [] for n in range(TEAMS)}
    for _, _, teams, owner, _ in spaces:
        for team in teams if owner else []:
            members[team].append(owner)
    teams = {name: Team(name, tuple(people), (LEAD,) if name == "team-07" else tuple(people[:1]))
             for name, people in members.items()}
    directory = Directory({uid: Person(uid, uid, f"{uid}@example.org") for uid in owners}, teams)
    engine = open_ledger(url)
    with engine.begin() as connection:
        connection.execute(directory_snapshots.insert().values(taken_at=datetime.now(timezone.utc),
                                                               content=directory_to_json(directory)))
    return len(owners)


def bench(name: str, url: str, build, days: int) -> None:
    start = time.perf_counter()
    rows = build(url, days)
    people = store_directory(url)
    print(f"{name:<10}  built {rows:,} rows ({NAMESPACES:,} namespaces, {people:,} people) "
          f"in {time.perf_counter() - start:.1f} s", flush=True)
    config = Config.model_validate({**MINIMAL_CONFIG, "database": url, "currency": "USD",
                                    "web": {"admins": [ADMIN]}})
    client = create_app(config).test_client()
    for label, uid, path in PAGES:
        def ask(uid: str = uid, path: str = path) -> None:
            answer = client.get(path, headers={"X-Forwarded-User": uid}, environ_base={"REMOTE_ADDR": "127.0.0.1"})
            assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])

        print(f"{name:<10}  {label:<11} {path:<24} {best_of(3, ask):6.3f} s", flush=True)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--days", type=int, default=60, help="days of ledger (default 60)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as scratch:
        bench("sqlite", f"sqlite:///{Path(scratch) / 'ledger.db'}", build_sqlite, options.days)
        if not options.skip_postgres:
            server = start_postgres()
            try:
                bench("postgresql", server.url(server.create_database()), build_postgres, options.days)
            finally:
                server.stop()


if __name__ == "__main__":
    main_bench()
