"""--log-format json: every line a cluster log agent reads is one JSON object."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from billing.logs import JsonFormatter
from tests.helpers.config import MINIMAL_CONFIG

WORKTREE = Path(__file__).resolve().parents[2]


def test_a_record_becomes_one_json_line_with_its_extra_fields():
    record = logging.makeLogRecord({
        "name": "billing.jobs.run", "levelno": logging.INFO, "levelname": "INFO",
        "msg": "%s: %d ledger rows", "args": ("2026-11-20", 7),
        "created": datetime(2026, 11, 21, 1, 30, 5, 250000, tzinfo=timezone.utc).timestamp(),
        "day": "2026-11-20", "rows": 7,
    })
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-11-21T01:30:05.250+00:00",
        "level": "INFO",
        "logger": "billing.jobs.run",
        "message": "2026-11-20: 7 ledger rows",
        "day": "2026-11-20",
        "rows": 7,
    }


def test_a_traceback_stays_inside_the_one_line():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.makeLogRecord({"levelname": "ERROR", "msg": "failed", "exc_info": sys.exc_info()})
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed"
    assert entry["exception"].startswith("Traceback") and entry["exception"].endswith("RuntimeError: boom")


@pytest.fixture
def billing(write_config, tmp_path):
    """billing(*options): `billing *options run` in a process of its own, so its logging setup is production's.

    The cluster's recorded answers are an empty directory: the first query fails the run."""
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"replay": str(tmp_path)}}
    path = write_config(clusters=[cluster], database=f"sqlite:///{tmp_path / 'ledger.db'}")

    def run(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from billing.cli import main; main()", *options,
             "run", "--date", "2026-11-20", "--config", str(path)],
            capture_output=True, text=True, cwd=WORKTREE, env={**os.environ, "PYTHONPATH": str(WORKTREE)}, timeout=60,
        )

    return run


def test_a_failed_run_logs_json_lines_only(billing):
    result = billing("--log-format", "json")
    assert result.returncode == 1
    entries = [json.loads(line) for line in result.stderr.splitlines()]  # fails on any line that is not JSON
    assert entries[0]["level"] == "INFO" and entries[0]["message"].startswith("billing 2026-11-20 (")
    assert entries[-1]["level"] == "ERROR"
    assert entries[-1]["message"].startswith("recorded answers of cluster jaguar")
    for entry in entries:
        datetime.fromisoformat(entry["time"])


def test_text_is_the_default(billing):
    result = billing()
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert " INFO billing 2026-11-20 (" in lines[0]
    assert lines[-1].startswith("billing: recorded answers of cluster jaguar")
