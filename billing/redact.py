"""Credentials in URLs are never printed, logged or stored.

Every URL in the config may carry a user and password (`http://user:secret@host`
for a Prometheus behind basic auth, a Pushgateway, a database), and errors
quote URLs, ours and those of the libraries underneath. So everything billing
writes for people — error sentences, log lines, `billing check` lines, the
directory note kept in the ledger — passes through `redact`, which hides the
password the way SQLAlchemy hides a database URL's: `http://user:***@host`.
"""

from __future__ import annotations

import re

HIDDEN = "***"
_SCHEME = r"[a-zA-Z][a-zA-Z0-9+.-]*://"
# scheme://user:password@ — the password up to the last @ before a space or the next URL. A password typed with
# / ? # or @ unescaped ends the authority early for a URL parser, not for a reader, so those are hidden with it;
# the price is that `host:port/path@x` is taken for credentials too and loses its path in the text.
_CREDENTIALS = re.compile(rf"(?P<start>\b{_SCHEME}[^\s:/?#@]*):(?:(?!{_SCHEME})\S)*@")


def redact(text: str) -> str:
    """The text with the password of every URL in it replaced by ***; user names stay, like SQLAlchemy's."""
    return _CREDENTIALS.sub(lambda match: f"{match['start']}:{HIDDEN}@", text)
