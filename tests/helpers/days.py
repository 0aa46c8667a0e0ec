"""The billing day the server tests ask about."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

DAY = datetime(2026, 11, 20, tzinfo=ZoneInfo("UTC")).timestamp()
