"""What every test may use: a configuration file from MINIMAL_CONFIG, and integration servers that are
skipped where their program is missing (failed in CI, where every integration test must run)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
import yaml

from fixtures.servers import MissingProgram
from tests.helpers.config import MINIMAL_CONFIG


@pytest.fixture(autouse=True)
def _garbage_collector_as_python_sets_it():
    """`billing run` and `billing backfill` set the garbage collector for a night (billing.jobs.run); asked in-process,
    the tests after them get it back as it was."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.fixture
def write_config(tmp_path: Path):
    """Write MINIMAL_CONFIG with some keys replaced; return the file's path."""

    def write(**changes) -> Path:
        path = tmp_path / "billing.yaml"
        path.write_text(yaml.safe_dump({**MINIMAL_CONFIG, **changes}))
        return path

    return write


def missing_program(exc: MissingProgram) -> None:
    """Skip the test (fail it under CI=true) for a missing program; a module-scoped fixture calls it itself, so that
    every test of the module is skipped, not only the first (pytest keeps the fixture's exception for the others)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{exc}; CI=true requires every integration server to be installed", pytrace=False)
    pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A server fixture whose program is missing skips the test (fails it in CI)."""
    try:
        return (yield)
    except MissingProgram as exc:
        missing_program(exc)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test that starts a server whose program is missing is skipped (failed in CI)."""
    try:
        return (yield)
    except MissingProgram as exc:
        missing_program(exc)


# The longest test modules, longest first (--durations, one module at a time: 1 to 2 minutes each). pytest-xdist
# hands whole modules to its workers in the order collected (--dist loadfile --no-loadscope-reorder in
# pyproject.toml): these first, then the other integration modules, then the quick unit modules that even out the
# workers' ends, so that no worker starts a long module while the other runs out of work. A module missing here or no
# longer slow costs time, never a result.
LONGEST = ("test_demo_recordings.py", "test_collect_prometheus.py", "test_live_stores.py", "test_capacity_prometheus.py",
           "test_schema_atomic.py", "test_live_scrape.py", "test_kills.py", "test_pages_in_chromium.py",
           "test_concurrent_commands.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first, then the other integration tests, then the unit tests (each module's in order)."""
    def rank(item: pytest.Item) -> tuple[int, bool]:
        name = item.path.name
        return (LONGEST.index(name) if name in LONGEST else len(LONGEST), "integration" not in item.path.parts)

    items.sort(key=rank)
