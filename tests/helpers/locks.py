"""Waiting, in a PostgreSQL test, until a command's sessions wait for a lock the test holds."""

from __future__ import annotations

import time

from sqlalchemy import Engine, text


def waiting(engine: Engine, sessions: int) -> None:
    """Until `sessions` sessions of the database wait for a lock (a minute at most: commands start slowly on a busy
    machine)."""
    for _ in range(600):
        with engine.connect() as conn:
            if conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar_one() >= sessions:
                return
        time.sleep(0.1)
    raise AssertionError(f"{sessions} session(s) never waited for a lock")
