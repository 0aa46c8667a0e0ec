"""Commands of the integration tests in processes of their own, forked from one that imported billing already.

The tests that kill a command at each of its write points (test_schema_atomic, test_kills,
test_concurrent_commands) start some three hundred processes, and a new Python spends about a second importing
pandas, SQLAlchemy, Alembic and billing before its first statement. Each command is forked instead from
multiprocessing's fork server, which imported them once: still a process of its own, with its own database
connections, that dies of SIGKILL as under `kill -9`, only without that second.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import multiprocessing.context
import multiprocessing.forkserver
import os
import runpy
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what the commands import before their first statement (a name missing here costs time, nothing else)
# (not the commands' own modules: runpy runs those afresh as __main__)
PRELOAD = ["pandas", "sqlalchemy.dialects.sqlite", "sqlalchemy.dialects.postgresql.psycopg", "psycopg",
           "alembic.command", "click", "billing.cli", "billing.config", "billing.jobs.run",
           "billing.jobs.backfill", "billing.jobs.metrics", "billing.ledger.database", "billing.ledger.write",
           "billing.notify.deliveries", "billing.publish.answers", "billing.collect.invoices", __name__]
# The fork server sends a child's exit status once, and whichever reader comes first takes it: a start() polls every
# child of the process, so one in another thread (test_schema_atomic starts four at a time) left the waiting reader
# nothing, which multiprocessing then reports as 255. Starts and reads of a status take turns.
_turns = threading.Lock()


class Command:
    """`python -m MODULE ARGS…` as subprocess.Popen runs it from the repository's root, in this process's environment,
    with what the tests ask of a Popen: pid, returncode, poll(), kill() and communicate(timeout)."""

    def __init__(self, module: str, *args: str):
        self._module = module
        self._output = tempfile.TemporaryDirectory(prefix="billing-command-")
        self._out, self._err = Path(self._output.name, "out"), Path(self._output.name, "err")
        self._out.touch()
        self._err.touch()
        # daemon: one a failed test left running is stopped when the tests end, not waited for
        self._process = _fork_server().Process(target=_main, args=(module, list(args), dict(os.environ), self._out,
                                                                   self._err), daemon=True)
        with _turns:
            self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, -9 when killed by SIGKILL; None while it runs."""
        with _turns:
            return self._process.exitcode

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self._process.kill()

    def communicate(self, timeout: float) -> tuple[str, str]:
        """What it wrote on stdout and stderr, once it ended; killed, and subprocess.TimeoutExpired, after `timeout`."""
        if not multiprocessing.connection.wait([self._process.sentinel], timeout):
            self._process.kill()
            multiprocessing.connection.wait([self._process.sentinel])
            raise subprocess.TimeoutExpired(f"python -m {self._module}", timeout)
        try:
            return self._out.read_text(), self._err.read_text()
        finally:
            self._output.cleanup()


@functools.cache
def _fork_server() -> multiprocessing.context.ForkServerContext:
    """The fork server of this test process, started with PRELOAD imported from this repository (first on its
    path, as for `python -m` run from its root)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([path] if path else [])])
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = path
    return context


def _main(module: str, args: list[str], environment: dict[str, str], out: Path, err: Path) -> None:
    """In the forked process: the caller's environment, stdout and stderr to the files, then the module as
    `python -m` runs it (its SystemExit is the exit status)."""
    os.environ.clear()
    os.environ.update(environment)
    for fd, path in ((1, out), (2, err)):
        file = os.open(path, os.O_WRONLY)
        os.dup2(file, fd)
        os.close(file)
    os.chdir(ROOT)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
