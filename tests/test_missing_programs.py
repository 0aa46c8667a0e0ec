"""A server program this machine lacks: its tests are skipped with the reason, and fail in CI (tests/conftest.py)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import pytest
from fixtures.servers import require_program

@pytest.fixture
def server():
    require_program("no-such-program-billing")

def test_a_fixture_needs_it(server):
    pass

def test_the_test_needs_it():
    require_program("no-such-program-billing")
"""


@pytest.mark.parametrize("ci", [False, True])
def test_a_missing_program_skips_but_fails_in_ci(tmp_path, ci):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_needs_a_server.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true" if ci else ""}
    result = subprocess.run([sys.executable, "-m", "pytest", "-rsf", "-p", "no:cacheprovider", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "program 'no-such-program-billing' is not installed" in result.stdout
    if ci:
        # the fixture's failure is an error in setup, the test's a failure: neither is skipped
        assert result.returncode == 1 and "skipped" not in result.stdout, result.stdout
        assert "1 failed" in result.stdout and "1 error" in result.stdout
        assert "CI=true requires every integration server to be installed" in result.stdout
    else:
        assert "2 skipped" in result.stdout and result.returncode == 0, result.stdout
