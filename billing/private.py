"""Files holding people's names, email addresses and bills, readable by billing's own user only.

The SQLite ledger (it keeps a snapshot of the directory) and the outbox's
messages are created 0600, and the directories billing creates for them
0700, whatever the umask (022 in most containers would make them readable
by every local user). The HTML reports are 0640 in 0750 directories: their
web server reads them as a member of billing's group (cronjob/reports.yaml),
nobody else may. Files and directories that already exist are the
operator's and keep their modes, but for files billing writes whole again.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
REPORT_FILE_MODE, REPORT_DIRECTORY_MODE = 0o640, 0o750  # the reports: billing's user and group


def private_directory(path: Path, mode: int = DIRECTORY_MODE) -> None:
    """Create `path` and its missing parents, each 0700 (or `mode`); raises OSError."""
    missing = []
    for directory in (path, *path.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:  # another run made it meanwhile; or a file is in the way
            if not directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(directory)) from None
            continue
        directory.chmod(mode)  # the umask may have taken more bits away than 077


def create_private_file(path: Path) -> None:
    """Create `path` empty and 0600 unless it exists (SQLite then writes into it, its journals take its mode)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(descriptor, FILE_MODE)
    finally:
        os.close(descriptor)


def write_private_file(path: Path, content: bytes, mode: int = FILE_MODE) -> None:
    """Write `path` whole, 0600 (or `mode`) whether it is new or replaced."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(descriptor, mode)
        file.write(content)


def write_whole(path: Path, content: bytes, mode: int = REPORT_FILE_MODE,
                directory_mode: int = REPORT_DIRECTORY_MODE) -> None:
    """Write whole or not at all, creating the directories: a reader never sees half a file. The partial file is
    this writer's own: two runs writing the same file at once would otherwise move it away under each other."""
    private_directory(path.parent, directory_mode)
    partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    write_private_file(partial, content, mode)
    os.replace(partial, path)
