"""The live LDAP directory, read whole once per run.

People and teams are read with two paged searches, so that neither a server
size limit (OpenLDAP's `sizelimit`) nor Active Directory's 1,000-entry pages
can truncate the directory, and the entries go to `build_directory` exactly
as the LDIF reader's do. The configured URLs are a failover list: each is
tried in order until one connects, negotiates TLS, binds and answers both
searches; if none does, the error names every URL and its cause. TLS
certificates are always validated (ldap3 does not, unless told to).
"""

from __future__ import annotations

import logging
import math
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from ldap3 import NONE, SUBTREE, Connection, Server, Tls
from ldap3.core.exceptions import (
    LDAPCertificateError,
    LDAPException,
    LDAPSASLPrepError,
    LDAPSocketOpenError,
    LDAPStartTLSError,
)
from ldap3.utils.conv import escape_filter_chars

from billing.config import DirectoryConfig, untrusted_certificate
from billing.directory.people import Directory, DirectoryError, Entry, build_directory

log = logging.getLogger(__name__)

PAGE_SIZE = 500  # within OpenLDAP's common sizelimit of 500 and AD's MaxPageSize of 1,000
PAGED_RESULTS = "1.2.840.113556.1.4.319"  # RFC 2696 control OID
INVALID_CREDENTIALS = 49  # LDAP result codes
SIZE_LIMIT_EXCEEDED = 4
SIZE_LIMIT_HINT = (
    "; the server lets this account read no more even page by page"
    " (on OpenLDAP allow it with: limits dn.exact=\"<bind_dn>\" size.prtotal=unlimited)"
)


def read_ldap(config: DirectoryConfig) -> Directory:
    """The whole directory from the first server in `url` that answers."""
    failures = []
    for url in config.urls:
        try:
            with _session(url, config) as connection:
                return read_entries(connection, url, config)
        except DirectoryError as exc:
            failures.append(exc)
            if url != config.urls[-1]:
                log.warning("%s; trying the next server", exc)
    down = all(isinstance(failure, Unreachable) for failure in failures)
    if len(failures) == 1 and not down:
        raise failures[0]  # of its own kind: a wrong password, an ambiguous directory
    said = str(failures[0]) if len(failures) == 1 else "no directory server could be read: " + "; ".join(
        str(failure) for failure in failures)
    raise DirectoryError(f"{said}; the directory is down or {config.key('url')} is wrong" if down else said)


class Unreachable(DirectoryError):
    """No LDAP server answers at a URL (refused, timed out, no such host)."""


class WrongPassword(DirectoryError):
    """The server refused a bind's DN or password (invalidCredentials)."""


def authenticate(config: DirectoryConfig, uid: str, password: str) -> str:
    """The person's uid as the directory spells it, if `password` binds as them; else WrongPassword.

    Their DN is found with the configured bind account in people.base by the
    uid attribute, the uid escaped so that `*` or `)(` in it are only
    characters; an empty password is refused here, since LDAP would take it
    as an unauthenticated bind and succeed.
    """
    if not uid or not password:
        raise WrongPassword("a user name and a password are needed")
    failures = []
    for url in config.urls:
        try:
            try:
                dn, canonical = _person_dn(url, config, uid)
            except WrongPassword:
                _bind_as_nobody(url, config, password)
                raise
            with _session(url, config, dn, password):
                return canonical
        except WrongPassword:
            raise
        except DirectoryError as exc:
            failures.append(str(exc))
    raise DirectoryError("no directory server could check the password: " + "; ".join(failures))


def _bind_as_nobody(url: str, config: DirectoryConfig, password: str) -> None:
    """The bind a known person's wrong password costs, as a DN no entry has (the server refuses it as it refuses a
    wrong password): an unknown user answered after the search alone took half the time, which told who exists."""
    try:
        with _session(url, config, f"cn=no person,{config.people.base}", password):
            pass
    except (WrongPassword, DirectoryError):
        pass


def _person_dn(url: str, config: DirectoryConfig, uid: str) -> tuple[str, str]:
    """(DN, uid) of the one person entry with this uid; WrongPassword when there is none (no hint which)."""
    p = config.people
    search_filter = f"(&{p.filter}({p.uid_attribute}={escape_filter_chars(uid)}))"
    try:
        with _session(url, config) as connection:
            found = _search(connection, url, p.base, search_filter, [p.uid_attribute])
    except WrongPassword as exc:  # the bind account's, not the person's: the configuration is wrong
        raise DirectoryError(str(exc)) from None
    if len(found) != 1:
        raise WrongPassword(f"{len(found)} people entries have {p.uid_attribute} {uid!r}")
    return found[0].dn, found[0].first(p.uid_attribute)


def read_entries(connection: Connection, url: str, config: DirectoryConfig) -> Directory:
    """People and teams through an open, bound connection (two paged searches)."""
    p, t = config.people, config.teams
    people_attributes = [p.uid_attribute, p.name_attribute, p.mail_attribute, p.member_of_attribute,
                         p.accounts_attribute]
    team_attributes = [t.name_attribute, t.member_attribute, t.lead_attribute,
                       *filter(None, [t.cost_center_attribute, t.budget_attribute, t.accounts_attribute])]
    people = _search(connection, url, p.base, p.filter, people_attributes)
    teams = _search(connection, url, t.base, t.filter, team_attributes)
    log.info("directory %s: %d people entries, %d team entries", url, len(people), len(teams))
    return build_directory(people, teams, config)


@contextmanager
def _session(url: str, config: DirectoryConfig, user: str | None = None, password: str | None = None
             ) -> Iterator[Connection]:
    """A bound, read-only connection to one server, unbound afterwards; as `user` or else as bind_dn."""
    fix = "" if user else _account_fix(config)  # a person's login names no key
    user, password = (user, password) if user else (config.bind_dn or None, config.bind_password or None)
    tls = Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=config.ca_file or None)
    server = Server(url, tls=tls, connect_timeout=config.connect_timeout, get_info=NONE)
    connection = Connection(
        server,
        user=user,
        password=password,
        receive_timeout=math.ceil(config.timeout),  # ldap3 packs it as whole seconds
        read_only=True,
        raise_exceptions=False,
    )
    if url.lower().startswith("ldap://") and not config.starttls and password:
        log.warning("directory %s: the bind password is sent unencrypted (use ldaps:// or starttls: true)", url)
    try:
        _bind(connection, url, config, user, fix)
        yield connection
    finally:
        with suppress(LDAPException):  # the connection is gone already; nothing is left to release
            connection.unbind()


def _account_fix(config: DirectoryConfig) -> str:
    """'; ' and the keys that give the configured account's DN and password, for its bind refused."""
    key = config.key
    if not config.bind_dn:
        return f"; set {key('bind_dn')} and {key('bind_password_env')} or _file for an account that may read"
    return f"; check {key('bind_dn')} and {config.secret_source('bind_password')}"


def _bind(connection: Connection, url: str, config: DirectoryConfig, user: str | None, fix: str) -> None:
    """Open, StartTLS where configured, and bind; `fix` says which keys give the account, for a bind refused."""
    try:
        connection.open()
        if config.starttls and not connection.start_tls():
            raise _starttls_refused(url, config, _result(connection))
        if not connection.bind():
            who = f"as {user}" if user else "anonymously"
            wrong = connection.result["result"] == INVALID_CREDENTIALS
            error = WrongPassword if wrong else DirectoryError
            raise error(f"directory {url}: binding {who} failed ({'wrong bind DN or password: ' if wrong else ''}"
                        f"{_result(connection)}){fix}")
    except LDAPSASLPrepError:  # a password no directory can hold (a NUL, say): wrong, not an outage
        raise WrongPassword(f"directory {url}: binding as {user} refused: the password holds characters SASLprep "
                            "prohibits") from None
    except LDAPException as exc:
        cause = _cause(exc)
        if isinstance(exc, LDAPStartTLSError) and not cause.startswith("TLS"):  # raised even without raise_exceptions
            raise _starttls_refused(url, config, cause) from None
        if isinstance(exc, LDAPSocketOpenError) and not cause.startswith("TLS"):
            raise Unreachable(f"directory {url}: connection failed ({cause})") from None
        tls = f"; {untrusted_certificate(config)}" if "certificate verify failed" in cause else ""
        raise DirectoryError(f"directory {url}: connection failed ({cause}){tls}") from None


def _starttls_refused(url: str, config: DirectoryConfig, why: str) -> DirectoryError:
    """The error for a server that will not upgrade the connection to TLS: the keys that choose TLS."""
    return DirectoryError(f"directory {url}: StartTLS was refused ({why}); give the server's ldaps:// address in "
                          f"{config.key('url')}, or set {config.key('starttls')}: false where the network may read "
                          "the bind password")


def _search(connection: Connection, url: str, base: str, search_filter: str, attributes: list[str]) -> list[Entry]:
    """Every entry below base matching the filter, page by page; a cut-short answer is an error."""
    what = f"directory {url}: searching {base} for {search_filter}"
    entries: list[Entry] = []
    cookie = None
    while True:
        try:
            connection.search(
                base,
                search_filter,
                SUBTREE,
                attributes=[a for a in attributes if a],
                paged_size=PAGE_SIZE,
                paged_cookie=cookie,
            )
        except LDAPException as exc:
            raise DirectoryError(f"{what} failed ({_cause(exc)})") from None
        result = connection.result
        if result["result"] != 0:
            hint = SIZE_LIMIT_HINT if result["result"] == SIZE_LIMIT_EXCEEDED else ""
            raise DirectoryError(f"{what} failed after {len(entries)} entries ({_result(connection)}){hint}")
        entries.extend(_entry(r) for r in connection.response if r["type"] == "searchResEntry")
        cookie = result.get("controls", {}).get(PAGED_RESULTS, {}).get("value", {}).get("cookie")
        if not cookie:
            return entries


def _entry(response: dict) -> Entry:
    """A search result as a plain Entry: lower-case names, values decoded as UTF-8."""
    attributes = response["raw_attributes"].items()
    return Entry(response["dn"], {name.lower(): [v.decode("utf-8", "replace") for v in vs] for name, vs in attributes})


def _result(connection: Connection) -> str:
    """The server's answer in words, e.g. `invalidCredentials: ...`."""
    result = connection.result or {}
    message = (result.get("message") or "").strip()
    return f"{result.get('description', 'no answer')}{': ' + message if message else ''}"


def _cause(exc: LDAPException) -> str:
    """ldap3's exception text without its nesting, TLS failures said plainly."""
    text = str(exc)
    if tls := re.search(r"\[(?:SSL|X509): \w+\] (.*?) \(_ssl", text):
        return f"TLS failed: {tls.group(1)}"
    if isinstance(exc, LDAPCertificateError):
        return "TLS failed: the server's certificate does not name this host"
    return re.sub(r"^socket connection error while opening: |\[Errno \d+\] ", "", text)
