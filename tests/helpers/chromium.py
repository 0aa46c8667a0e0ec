"""Headless Chromium: screenshots of pages, and checks that they are not blank."""

from __future__ import annotations

import re
import subprocess

import pytest
from PIL import Image

from fixtures.servers import require_program

FLAGS = [  # headless as root needs these; the rest keep Chromium from reaching out
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]


@pytest.fixture(scope="module")
def chromium():
    return require_program("chromium")  # Debian package chromium; skipped if missing, except in CI


def screenshot(chromium: str, page, png, width: int, height: int, profile) -> list[str]:
    """Open the page (a file or a URL), write a screenshot, return the page's console messages."""
    run = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
         page if isinstance(page, str) else page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert png.exists(), run.stderr[-2000:]
    return [line for line in run.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def assert_not_blank(png):
    """Text, rules and bars leave many colours and a fair share of non-white pixels."""
    image = Image.open(png).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    inked = sum(count for count, rgb in colours if sum(rgb) < 3 * 235)
    assert len(colours) > 50, f"{png.name}: only {len(colours)} colours"
    assert inked / (image.width * image.height) > 0.01, f"{png.name}: almost all white"
