"""The demo's three days billed once per test session (per xdist worker): the three modules using them only read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from billing.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The demo's three days billed in a directory of their own; returns that directory."""
    tmp_path = tmp_path_factory.mktemp("demo")
    os.symlink(ROOT / "fixtures", tmp_path / "fixtures")  # the config's paths are relative to the repository
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(main, ["backfill", "--config", "fixtures/demo/billing.yaml",
                                           "--from", "2026-11-16", "--to", "2026-11-18", "--email"])
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return tmp_path
