"""Log lines for people (text) or for cluster log pipelines (JSON lines).

In a cluster, stderr is collected by a log agent (Fluent Bit, Vector,
Promtail, ...); one JSON object per line lets it index the level, the module
and the fields a message carries through `extra=` without parsing prose.
The formatter is a few lines of our own rather than a dependency, so the
field names below are exactly what docs/deploy.md promises.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

from billing.redact import redact

# Attributes every LogRecord has; anything else on a record came in through `extra=`.
_RECORD_ATTRIBUTES = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, `extra` fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class RedactingFormatter(logging.Formatter):
    """Another formatter's lines with the passwords of URLs hidden, whoever logged them (billing/redact.py)."""

    def __init__(self, inner: logging.Formatter):
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record))


def configure_logging(verbose: bool, log_format: str) -> None:
    """Send the program's log to stderr as text (the default) or as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(RedactingFormatter(JsonFormatter()))
    else:
        handler.setFormatter(RedactingFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s")))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retry chatter; failures surface as ours
    logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl." on every run
