"""Files with people's data are 0600 and the directories billing makes for them 0700, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from billing.private import create_private_file, private_directory, write_private_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask 022", "umask 000", "umask 277"])
def umask(request):
    """Run the test under this umask (process-wide), then restore the previous one."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def test_missing_directories_are_made_0700_existing_ones_are_left_alone(tmp_path, umask):
    tmp_path.chmod(0o755)
    private_directory(tmp_path / "a" / "b" / "c")
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700, 0o700, 0o700]
    assert mode(tmp_path) == 0o755
    private_directory(tmp_path / "a" / "b" / "c")  # again: nothing to do, no error


def test_a_new_file_is_0600_an_existing_one_is_not_touched(tmp_path, umask):
    create_private_file(tmp_path / "ledger.db")
    assert mode(tmp_path / "ledger.db") == 0o600 and (tmp_path / "ledger.db").read_bytes() == b""
    existing = tmp_path / "theirs.db"
    existing.write_bytes(b"data")
    existing.chmod(0o640)
    create_private_file(existing)
    assert mode(existing) == 0o640 and existing.read_bytes() == b"data"


def test_a_written_file_is_0600_also_when_it_replaces_a_readable_one(tmp_path, umask):
    path = tmp_path / "admins.eml"
    path.write_bytes(b"an older, longer message")
    path.chmod(0o644)
    write_private_file(path, b"new")
    assert mode(path) == 0o600 and path.read_bytes() == b"new"
