"""`billing serve`'s HTTP security: who is asking, and what guards the asking.

A trusted proxy's header (`web.auth: header`) or a signed-in session (`web.auth: ldap`) says who is asking;
`Guard` answers only requests naming a host it answers to from no other site's page, believes forwarded headers only
from `web.trusted_proxies` (judged by the TCP peer), signs a person in by an LDAP bind (serve's login form and
`billing mcp`'s HTTP Basic alike), keeps the sessions a logout ends and the login throttle (one SQLite file serve
and mcp may share), and puts the security headers on every answer; the forms carry CSRF tokens. The pages and the API
(billing/web/app.py) ask `Guard.identity()` and know nothing of how it is checked.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import secrets
import sqlite3
import threading
import time
import unicodedata
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # Flask itself only where serve answers a request: billing mcp's HTTP Basic needs none of it
    from flask import Flask, Response

from billing.config import ConfigError, DirectoryConfig, WebConfig
from billing.directory.ldap import WrongPassword, authenticate
from billing.directory.people import DirectoryError
from billing.private import create_private_file

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HSTS_SECONDS = 365 * 86400  # how long a browser that came over TLS keeps to it
UID = re.compile(r"[^\x00-\x1f\x7f]{1,253}")  # a user id: any printable text a directory may hold


class LoginThrottle:
    """Failed logins per user and per address; after `attempts` within `window` seconds both are locked out.

    Kept in an SQLite database: a file (web.login_throttle_file) that `billing serve` and `billing mcp --http` beside
    it both open, so that serve's login form and mcp's HTTP Basic count in one throttle; else in the process's
    memory. Not in the ledger: serve and mcp read it as a read-only role (web.database). Times are the wall clock's,
    which both processes share. Bounded: a key keeps its last `attempts` failures only, and failures that left the
    window are dropped at each new one.
    """

    def __init__(self, attempts: int, window: float, path: str = "", clock=time.time) -> None:
        self.attempts, self.window, self.clock = attempts, window, clock
        self._lock = threading.Lock()  # one connection, shared by the server's threads
        try:
            if path:
                create_private_file(Path(path))  # user names and addresses: billing's user's only
                if Path(path).stat().st_uid != os.geteuid():  # another user's could forget failures at will
                    raise ConfigError(f"web.login_throttle_file {path} belongs to another user; name a file in a "
                                      "directory only billing's user writes")
            self._db = sqlite3.connect(path or ":memory:", timeout=10, check_same_thread=False, isolation_level=None)
            self._db.execute("CREATE TABLE IF NOT EXISTS failures (key TEXT NOT NULL, at REAL NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS failures_key ON failures (key, at)")
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"web.login_throttle_file {path} cannot be opened: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(DISTINCT key) FROM failures").fetchone()[0]

    def claim(self, keys: list[str]) -> tuple[float, list[int]]:
        """An attempt to sign in: (seconds to wait, []) while any key is locked out; else (0, the rows that count
        the attempt as failed until `forgive` takes them back). Counted before the directory answers, in one
        transaction with the check, so that guesses sent at once (or to serve and mcp at once) are counted too."""
        now = self.clock()
        with self._lock, self._db:  # one transaction: the other process sees all of it or none
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM failures WHERE at <= ?", (now - self.window,))
            oldest = [self._db.execute(
                "SELECT min(at), count(*) FROM (SELECT at FROM failures WHERE key = ? ORDER BY at DESC LIMIT ?)",
                (key, self.attempts)).fetchone() for key in keys]
            wait = max((at + self.window - now for at, count in oldest if count >= self.attempts), default=0.0)
            if wait > 0:
                return wait, []
            rows: list[int] = []
            for key in keys:
                inserted = self._db.execute("INSERT INTO failures VALUES (?, ?) RETURNING rowid", (key, now))
                rows.append(inserted.fetchone()[0])
                self._db.execute("DELETE FROM failures WHERE key = ? AND rowid NOT IN (SELECT rowid FROM failures "
                                 "WHERE key = ? ORDER BY at DESC LIMIT ?)", (key, key, self.attempts))
            return 0.0, rows

    def forgive(self, rows: list[int]) -> None:
        """An attempt that was no wrong password (the right one, or a directory that could not say) counts not."""
        with self._lock, self._db:
            self._db.executemany("DELETE FROM failures WHERE rowid = ?", [(row,) for row in rows])


class Sessions:
    """The signed-in sessions this process issued, so that a logout ends the session itself, not only the
    browser's copy of its cookie; kept in the process, so a restart signs everyone out.
    Bounded: expired sessions are dropped, and beyond `most` the oldest."""

    def __init__(self, lifetime: float, clock=time.monotonic, most: int = 100_000) -> None:
        self.lifetime, self.clock, self.most = lifetime, clock, most
        self._expiry: dict[str, float] = {}  # id -> when it expires, oldest first
        self._lock = threading.Lock()

    def start(self) -> str:
        now, identifier = self.clock(), secrets.token_urlsafe(24)
        with self._lock:
            while self._expiry and (len(self._expiry) >= self.most or next(iter(self._expiry.values())) <= now):
                del self._expiry[next(iter(self._expiry))]
            self._expiry[identifier] = now + self.lifetime
        return identifier

    def alive(self, identifier: str) -> bool:
        with self._lock:
            return self._expiry.get(identifier, -math.inf) > self.clock()

    def end(self, identifier: str) -> None:
        with self._lock:
            self._expiry.pop(identifier, None)


def login_key(uid: str) -> str:
    """A uid as the directory's caseIgnoreMatch compares it (RFC 4518, near enough): compatibility forms folded
    (fullwidth, mathematical letters), case ignored, runs of spaces as one and none at the ends. The throttle
    keys on it, so that no spelling of a locked uid gets guesses of its own."""
    return " ".join(unicodedata.normalize("NFKC", uid).casefold().split())


def shown_uid(uid: str) -> str:
    """A uid as the log shows it: at most 64 characters, so that no login fills the log."""
    return uid if len(uid) <= 64 else uid[:64] + f"... ({len(uid)} characters)"


def _host_of(authority: str) -> str | None:
    """The host name of a Host header or an origin's authority (`[::1]:8090` is ::1), lower case; None if none."""
    try:
        return urlsplit(f"//{authority}").hostname
    except ValueError:  # an unclosed [ and the like
        return None


def _origin_host(origin: str) -> str | None:
    """The host of an Origin header (`https://billing.example.org`); None for `null` and anything not http(s)."""
    scheme, _, authority = origin.partition("://")
    return _host_of(authority) if scheme.lower() in ("http", "https") and "/" not in authority else None


class Refused(Exception):
    """A request answered with an error status and one sentence."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status


class Guard:
    """The security of one application: trusted proxies, sessions, the login throttle and the answers' headers."""

    def __init__(self, web: WebConfig, public_urls: tuple[str, ...] = (), throttle: LoginThrottle | None = None) -> None:
        """`public_urls`: the addresses billing is reached at as configured (reports_url, mcp.resource), whose hosts
        it answers to besides web.allowed_hosts."""
        self.web = web
        self.hosts = {*web.allowed_hosts, *filter(None, (urlsplit(url).hostname for url in public_urls))}
        self.trusted = [ipaddress.ip_network(n, strict=False) for n in web.trusted_proxies]
        self.throttle = throttle or LoginThrottle(web.login_attempts, web.login_window, web.login_throttle_file)
        self.sessions = Sessions(web.session_lifetime)

    def protect(self, app: Flask) -> None:
        """Signed, HTTP-only, same-site cookies sent over TLS only."""
        app.config.update(
            SECRET_KEY=self.web.session_key or secrets.token_hex(32),  # header auth keeps no sessions
            SESSION_COOKIE_NAME="billing_session",
            SESSION_COOKIE_HTTPONLY=True,
            SESSION_COOKIE_SECURE=True,
            SESSION_COOKIE_SAMESITE="Strict",
            PERMANENT_SESSION_LIFETIME=timedelta(seconds=self.web.session_lifetime),
        )

    def is_trusted(self, address: str) -> bool:
        try:
            parsed = ipaddress.ip_address(address.strip())
        except ValueError:
            return False
        return any(parsed in network for network in self.trusted)

    def from_trusted_proxy(self) -> bool:
        from flask import request
        return self.is_trusted(request.remote_addr or "")

    def client_address(self) -> str:
        """Who is asking, of the Flask request being answered (see `client_of`)."""
        from flask import request
        return self.client_of(request.remote_addr or "", request.headers.get("X-Forwarded-For", ""))

    def client_of(self, peer: str, forwarded_for: str) -> str:
        """Who is asking: behind trusted proxies, the last address in X-Forwarded-For that is none of them
        (each proxy appends the address it saw; what a client wrote itself comes before), else the peer."""
        if not self.is_trusted(peer):
            return peer
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        return next((hop for hop in reversed(hops) if not self.is_trusted(hop)), peer)

    def sign_in(self, directory: DirectoryConfig, uid: str, password: str, client: str) -> str:
        """The person's uid as the directory spells it, if `password` binds as them: WrongPassword (counted against
        the uid and the client's address) if not, Refused(429) while either is locked out, Refused(503) when the
        directory cannot say. serve's login form and `billing mcp`'s HTTP Basic both sign in here."""
        shown = shown_uid(uid)
        keys = [f"user:{login_key(shown)}", f"address:{client}"]
        try:
            wait, claimed = self.throttle.claim(keys)
        except sqlite3.Error as exc:  # no count, no guess: a throttle that cannot count refuses
            log.error("login: the login throttle cannot count: %s", exc)
            raise Refused(503, "logins cannot be counted at the moment; try again later") from None
        if wait > 0:
            log.warning("login of %r from %s refused: locked out", shown, client,
                        extra={"uid": shown, "remote_addr": client})
            raise Refused(429, f"too many failed logins for this user or address; try again in "
                               f"{max(1, round(wait / 60))} minute(s)")
        try:
            if not UID.fullmatch(uid):  # no directory holds it: not worth asking, nor logging whole
                raise WrongPassword(f"no user id has {len(uid)} characters or control characters")
            canonical = authenticate(directory, uid, password)
        except WrongPassword as exc:  # the claimed rows stay: a failure
            log.warning("login of %r from %s failed: %s", shown, client, shown_uid(str(exc)),
                        extra={"uid": shown, "remote_addr": client})
            raise
        except DirectoryError as exc:
            self.throttle.forgive(claimed)
            log.error("login: %s", exc)
            raise Refused(503, "the directory cannot check passwords at the moment; try again later") from None
        self.throttle.forgive(claimed)
        log.info("login of %s from %s", canonical, client, extra={"uid": canonical, "remote_addr": client})
        return canonical

    def identity(self) -> str:
        """The signed-in uid, or Refused(401) saying why there is none."""
        from flask import request, session
        web = self.web
        if web.auth == "ldap":
            if "uid" not in session or not self.sessions.alive(session.get("id", "")):
                raise Refused(401, "sign in first")
            return session["uid"]
        value = request.headers.get(web.user_header)  # as WSGI reads bytes: one character per byte
        return self.proxy_user([] if value is None else [value.encode("latin-1")], request.remote_addr or "")

    def proxy_user(self, values: list[bytes], peer: str) -> str:
        """The uid in the proxy's header of a request from `peer`, given as the bytes of each line of it (serve and
        `billing mcp` alike); Refused(401) saying why there is none, Refused(400) for a header the proxy cannot have
        meant: given twice, or not UTF-8.

        A comma counts as a second line: waitress joins repeated lines with one (RFC 9110 allows it), so serve
        could not tell "alice, root" from two lines, and the header holds one uid."""
        header = self.web.user_header
        if not values:
            raise Refused(401, f"no user: the request has no {header} header from the authenticating proxy")
        if not self.is_trusted(peer):
            raise Refused(401, f"the {header} header is trusted only from web.trusted_proxies, not from {peer}")
        if len(values) > 1 or b"," in values[0]:
            raise Refused(400, f"the {header} header is given more than once (or holds a comma); the proxy must "
                               "send one user id")
        try:
            uid = values[0].decode().strip()
        except UnicodeDecodeError:
            raise Refused(400, f"the {header} header is not UTF-8; the proxy must send the user id as UTF-8") from None
        if not UID.fullmatch(uid):
            raise Refused(401, f"the {header} header holds no usable user id")
        return uid

    def check_host(self, host: str | None, origin: str | None) -> None:
        """Refused(403) unless the request names a host billing answers to (web.allowed_hosts, its public URLs') and
        comes from no other site's page: a page elsewhere whose name was pointed at billing's address (DNS
        rebinding: a local server, a `kubectl port-forward`) would otherwise ask with the browser's own access.
        A request without Origin comes from no browser's page elsewhere (assistants, curl, a proxy's probes)."""
        name = _host_of(host or "")
        if name not in self.hosts:
            raise Refused(403, f"billing does not answer to the host {host or ''!r}; its names are in "
                               "web.allowed_hosts")
        if origin is not None and origin.lower() not in self.web.allowed_origins and _origin_host(origin) not in self.hosts:
            raise Refused(403, f"billing does not answer pages of the origin {origin!r}; allow it in "
                               "web.allowed_origins")

    def add_headers(self, response: Response) -> None:
        """What every answer tells the browser: no scripts, no framing, no caching; TLS kept to once seen."""
        from flask import request
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"  # personal costs stay out of shared caches
        if request.is_secure or (self.from_trusted_proxy() and request.headers.get("X-Forwarded-Proto") == "https"):
            response.headers["Strict-Transport-Security"] = f"max-age={HSTS_SECONDS}"


def csrf_token() -> str:
    """A token of this browser session for the login and logout forms."""
    from flask import session
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


def check_csrf() -> None:
    """The form's token is the session's; a request with no session has none to match (login CSRF)."""
    from flask import request, session
    expected = session.get("csrf", "")
    if not expected or not secrets.compare_digest(request.form.get("csrf", ""), expected):
        raise Refused(400, "the form has expired; load the page again")
