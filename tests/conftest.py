"""What every test may use: a configuration file from MINIMAL_CONFIG, and integration servers that are
skipped where their program is missing (failed in CI, where every integration test must run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from fixtures.servers import MissingProgram
from tests.helpers.config import MINIMAL_CONFIG


@pytest.fixture
def write_config(tmp_path: Path):
    """Write MINIMAL_CONFIG with some keys replaced; return the file's path."""

    def write(**changes) -> Path:
        path = tmp_path / "billing.yaml"
        path.write_text(yaml.safe_dump({**MINIMAL_CONFIG, **changes}))
        return path

    return write


def _missing(exc: MissingProgram) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{exc}; CI=true requires every integration server to be installed", pytrace=False)
    pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A server fixture whose program is missing skips the test (fails it in CI)."""
    try:
        return (yield)
    except MissingProgram as exc:
        _missing(exc)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test that starts a server whose program is missing is skipped (failed in CI)."""
    try:
        return (yield)
    except MissingProgram as exc:
        _missing(exc)
