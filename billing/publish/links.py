"""Where the day's pages live: their paths below `output_dir`, and their addresses below `reports_url`.

Pages and emails link with these, so a link always points where billing/publish/pages.py wrote the page.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from urllib.parse import quote, urlsplit, urlunsplit


def slug(name: str) -> str:
    """A file name for any name: `robotics`, or `a-b-1f3c9e2a` for `a/b` (the hash keeps names apart)."""
    safe = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_") or "x"
    if safe == name:
        return safe
    return f"{safe[:60]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def day_page(day: date) -> str:
    """The all-teams page of a day, relative to output_dir."""
    return f"{day.isoformat()}/index.html"


def team_page(day: date, team: str) -> str:
    """A team's page of a day, relative to output_dir."""
    return f"{day.isoformat()}/teams/{slug(team)}.html"


def page_url(reports_url: str, page: str) -> str:
    """The absolute address of a page (relative to output_dir) where `reports_url` publishes the reports;
    '' when reports_url is not set, so that an email shows no link rather than a broken one."""
    if not reports_url:
        return ""
    scheme, host, path, query, _ = urlsplit(reports_url)
    folder = path if path.endswith("/") else f"{path}/"
    return urlunsplit((scheme, host, folder + quote(page), query, ""))
