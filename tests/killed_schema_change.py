"""A process that creates or upgrades a ledger schema and is killed (SIGKILL) at a chosen point.

`python -m tests.killed_schema_change open|upgrade URL POINT`: the process counts
every statement it sends to the database that may change it (all but SELECT
and PRAGMA: a kill before a read leaves what a kill after the write before it
leaves) and every commit, and kills itself with SIGKILL just before point
number POINT (1-based) reaches the database, as `kill -9` or the kernel's OOM
killer would; POINT 0 never kills and prints how many points there were. The
database is real; only the moment is chosen.
"""

from __future__ import annotations

import sys

from billing.ledger.database import open_ledger, upgrade_schema
from tests.killed_command import kill_at_point


def main(action: str, url: str, kill_at: int) -> None:
    passed = kill_at_point(kill_at)
    if action == "open":
        open_ledger(url).dispose()
    else:
        upgrade_schema(url)
    print(passed())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
