"""The command starts at once: billing.cli imports no heavy library, each command only what it needs (issue 45).

Each case runs in an interpreter of its own, since this one has long imported
everything; what counts is which modules are in sys.modules afterwards.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.report_ledger import write_ledger

WORKTREE = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "sqlalchemy", "numpy", "flask", "pydantic")
# what a report does without: the collectors (and requests behind them), Alembic, Flask, the directory's LDAP and
# LDIF; pandas and numpy (its rows are plain, summed by the database); the export's FOCUS rows, the statements, the
# day's pages and, but for --format html, Jinja2
NOT_FOR_A_REPORT = ("billing.collect", "billing.charge.pricing", "requests", "alembic", "flask", "ldap3", "ldif",
                    "pandas", "numpy", "billing.publish.focus", "billing.publish.statement", "billing.publish.dayview",
                    "billing.publish.pages", "jinja2")

# `billing *args` if any are given, then the names of every module imported, on the last line
IMPORTED = """
import sys
import billing.cli
if sys.argv[1:]:
    try:
        billing.cli.main(sys.argv[1:], prog_name="billing")
    except SystemExit as exit:
        if exit.code:
            sys.exit(f"billing exited with status {exit.code}")
print(*sys.modules)
"""


def imported(watched: tuple[str, ...], *args: str) -> list[str]:
    """Which of the `watched` modules and their submodules a fresh interpreter holds after `billing *args`."""
    result = subprocess.run([sys.executable, "-c", IMPORTED, *args], capture_output=True, text=True, cwd=WORKTREE,
                            env={**os.environ, "PYTHONPATH": str(WORKTREE)}, timeout=120)
    assert result.returncode == 0, result.stderr
    return sorted(name for name in result.stdout.splitlines()[-1].split()  # after what billing printed
                  if any(name == module or name.startswith(module + ".") for module in watched))


def test_importing_the_cli_imports_no_heavy_library():
    assert imported(HEAVY) == []


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["report", "--help"], ["statement", "--help"],
                                  ["export", "--help"], ["db", "upgrade", "--help"]])
def test_version_and_help_import_no_heavy_library_and_not_the_config(args):
    assert imported((*HEAVY, "billing.config"), *args) == []


def test_a_report_imports_neither_the_collectors_nor_pandas_nor_the_pages(tmp_path, write_config):
    config = write_config(database=write_ledger(tmp_path / "ledger.db"), currency="USD")
    args = ["report", "--team", "robotics", "--from", "2026-11-19", "--to", "2026-11-20", "--config", str(config)]
    assert imported(NOT_FOR_A_REPORT, *args) == []


def test_billing_mcp_imports_neither_flask_nor_waitress_nor_prometheus_client():
    """billing mcp answers over the MCP SDK: serve's web server and its metrics are not its to load."""
    code = "import sys, billing.web.mcp_server; print(*sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=WORKTREE,
                            env={**os.environ, "PYTHONPATH": str(WORKTREE)}, timeout=120)
    assert result.returncode == 0, result.stderr
    watched = ("flask", "waitress", "prometheus_client", "billing.web.app")
    assert sorted(name for name in result.stdout.split()
                  if any(name == module or name.startswith(module + ".") for module in watched)) == []
