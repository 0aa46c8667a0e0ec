"""A `billing` command in a process of its own, killed (SIGKILL) at a chosen point of its database writes.

`python -m tests.killed_command [--kill-at POINT] [--lease SECONDS] ARGS…` runs `billing ARGS…`. It counts every
statement it sends to the ledger that may change it (all but SELECT and PRAGMA) and every commit, and kills itself
with SIGKILL just before point number POINT (1-based) reaches the database, as `kill -9` or the kernel's OOM
killer would; without `--kill-at` it never kills and writes `points: N` last on stderr. `--lease` shortens the
claim of a message (billing/notify/deliveries.py CLAIM_SECONDS) so that a retry takes over at once what a killed
run left in flight. The database, the store and the mail server are real; only the moment is chosen.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

from sqlalchemy import Engine, event

import billing.notify.deliveries
from billing.cli import main


def kill_at_point(kill_at: int) -> Callable[[], int]:
    """From now on, count every statement that may change a database (all but SELECT and PRAGMA: a kill before a
    read leaves what a kill after the write before it leaves) and every commit, and SIGKILL this process just before
    point number `kill_at` (1-based; 0 never). Returns how many points have passed."""
    points = 0

    def statement(connection, cursor, sql: str, *rest) -> None:
        if not sql.lstrip().upper().startswith(("SELECT", "PRAGMA")):
            point()

    def point(*rest) -> None:
        nonlocal points
        points += 1
        if points == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    event.listen(Engine, "before_cursor_execute", statement)
    event.listen(Engine, "commit", point)
    return lambda: points


def run(kill_at: int, args: list[str]) -> None:
    passed = kill_at_point(kill_at)
    try:
        main(args)
    finally:
        print(f"points: {passed()}", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--lease", type=float)
    options, command = parser.parse_known_args()
    if options.lease is not None:
        billing.notify.deliveries.CLAIM_SECONDS = options.lease
    run(options.kill_at, command)
