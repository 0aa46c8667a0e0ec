"""Programs that tests run: skipped where one is missing, but CI must have them all."""

from __future__ import annotations

import os
import shutil

import pytest


def need(program: str) -> str:
    """The path of `program`; a skip locally when it is not installed, a failure under CI=true."""
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{program} is not installed, and CI must run this test")
        pytest.skip(f"{program} is not installed")
    return path
