"""`billing serve` on PostgreSQL and with logins checked by a real slapd.

The ledger and the expected figures are those of tests/helpers/report_ledger.py; the
authorisation matrix is the one tests/web/test_app.py asks of a SQLite ledger.
Logins bind as the person over ldaps:// with the test CA, as billing reads
the directory.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text

from billing.charge.bill import DayBill
from billing.config import Config, DirectoryConfig
from billing.directory.ldap import WrongPassword, authenticate
from billing.ledger.database import LedgerError, open_ledger
from billing.ledger.write import replace_day
from billing.web.app import create_app
from fixtures.directory import BASE, directory_ldif
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.report_ledger import DAY, fill_ledger, frame, write_ledger
from tests.helpers.serve import MATRIX, VISITORS, get, store_directory

PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "carol": "carol-pw-3"}
SESSION_KEY = "k" * 16 + "session-key-not-for-pages"  # 41 characters
BIND_PASSWORD = "billing-bind-secret"


def test_the_authorisation_matrix_holds_on_postgresql(postgres_url):
    client = create_app(Config.model_validate({
        **MINIMAL_CONFIG, "currency": "USD", "database": store_directory(fill_ledger(postgres_url)),
        "web": {"admins": ["root"]}})).test_client()
    for route, statuses in MATRIX.items():
        assert [get(client, route, visitor).status_code for visitor in VISITORS] == statuses, route
    assert "37.20 USD" in get(client, "/me?from=2026-11-01&to=2026-11-20", "alice").text


def reader_grants(database: str) -> list[str]:
    """The GRANTs docs/serve.md tells operators to run, for this database."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    (sql,) = re.findall(r"```sql\n(.*?)```", docs, flags=re.DOTALL)
    return [s.strip().replace("DATABASE billing", f"DATABASE {database}") for s in sql.split(";") if s.strip()]


def test_the_documented_read_only_role_serves_the_pages_and_cannot_write(postgres_server, postgres_url):
    database = postgres_url.rsplit("/", 1)[1]
    for statement in ("CREATE ROLE billing LOGIN", "CREATE ROLE billing_reader LOGIN"):
        with contextlib.suppress(psycopg.errors.DuplicateObject):  # roles are the server's, shared by the tests
            postgres_server.execute(statement)
    postgres_server.execute(f"ALTER DATABASE {database} OWNER TO billing")
    owner_url = postgres_url.replace("postgres@", "billing@")
    with create_engine(postgres_url).begin() as admin:  # as the superuser, in the ledger's database
        for statement in reader_grants(database):
            if not statement.startswith("CREATE ROLE"):
                admin.execute(text(statement))
    store_directory(fill_ledger(owner_url))  # tables created by billing, after the grants
    reader_url = postgres_url.replace("postgres@", "billing_reader@")
    client = create_app(Config.model_validate({
        **MINIMAL_CONFIG, "currency": "USD", "database": owner_url,
        "web": {"admins": ["root"], "database": reader_url}})).test_client()
    for route in ("/healthz", "/me?from=2026-11-01&to=2026-11-20", "/all", "/teams/robotics", "/api/v1/costs"):
        assert get(client, route, "alice" if route.startswith("/me") else "root").status_code == 200, route
    with pytest.raises(LedgerError, match="permission denied"):
        replace_day(open_ledger(reader_url), DAY, DayBill(frame([])), "USD")


def ldif_with_passwords() -> str:
    ldif = directory_ldif(["alice", "bob", "carol", "billing"], {"robotics": ["alice", "bob", "carol"]},
                          leads={"robotics": ["carol"]})
    for uid, password in {**PASSWORDS, "billing": BIND_PASSWORD}.items():
        ldif = ldif.replace(f"uid: {uid}\n", f"uid: {uid}\nuserPassword: {password}\n")
    return ldif


@pytest.fixture
def directory(slapd_server, test_ca):
    return slapd_server(ldif_with_passwords(), tls=test_ca)


def ldap_app(tmp_path, monkeypatch, url: str, ca_file: str, **web):
    monkeypatch.setenv("BILLING_SESSION_KEY", SESSION_KEY)
    monkeypatch.setenv("BILLING_BIND_PASSWORD", BIND_PASSWORD)
    config = Config.model_validate({
        **MINIMAL_CONFIG, "currency": "USD", "database": write_ledger(tmp_path / "ledger.db"),
        "directory": {"url": url, "ca_file": ca_file, "bind_dn": f"uid=billing,ou=people,{BASE}",
                      "bind_password_env": "BILLING_BIND_PASSWORD", "people": {"base": f"ou=people,{BASE}"}},
        "web": {"auth": "ldap", "session_key_env": "BILLING_SESSION_KEY", "login_attempts": 3, **web}})
    return create_app(config).test_client()


@pytest.fixture
def client(tmp_path, monkeypatch, directory, test_ca):
    return ldap_app(tmp_path, monkeypatch, directory.ldaps_url, str(test_ca.ca_cert))


def login(client, uid: str, password: str, address: str = "127.0.0.1", forwarded_for: str | None = None):
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    form = client.get("/login", environ_base={"REMOTE_ADDR": address}, headers=headers).text
    token = form.split('name="csrf" value="')[1].split('"')[0]
    return client.post("/login", data={"uid": uid, "password": password, "csrf": token},
                       environ_base={"REMOTE_ADDR": address}, headers=headers)


def test_without_a_login_pages_are_401_with_the_form(client):
    answer = client.get("/me")
    assert answer.status_code == 401 and 'action="/login"' in answer.text
    assert client.get("/api/v1/costs").status_code == 401


def test_a_login_gives_a_strict_expiring_cookie_and_the_persons_page(client):
    answer = login(client, "alice", PASSWORDS["alice"])
    assert answer.status_code == 303 and answer.headers["Location"] == "/me"
    cookie = answer.headers["Set-Cookie"]
    assert all(part in cookie for part in ("HttpOnly", "Secure", "SameSite=Strict", "Expires="))
    assert "37.20 USD" in client.get("/me?from=2026-11-01&to=2026-11-20").text
    assert client.get("/teams/robotics").status_code == 403  # alice is no lead


def test_a_login_without_the_form_token_is_refused_even_with_no_session_at_all(client):
    """Login CSRF: with no cookie the session's token and a missing form field were both empty, so a page
    elsewhere could sign a browser in as the attacker with a plain POST."""
    answer = client.post("/login", data={"uid": "alice", "password": PASSWORDS["alice"]})
    assert answer.status_code == 400 and "form has expired" in answer.text
    assert client.post("/login", data={"uid": "alice", "password": PASSWORDS["alice"], "csrf": ""}).status_code == 400
    assert client.get("/me").status_code == 401


def test_a_lead_found_in_the_snapshot_sees_the_team(tmp_path, monkeypatch, directory, test_ca):
    client = ldap_app(tmp_path, monkeypatch, directory.ldaps_url, str(test_ca.ca_cert))
    store_directory(f"sqlite:///{tmp_path / 'ledger.db'}")  # carol leads robotics
    login(client, "carol", PASSWORDS["carol"])
    assert client.get("/teams/robotics").status_code == 200


@pytest.mark.parametrize("uid, password", [
    ("alice", "wrong"),
    ("alice", ""),  # LDAP would take an empty password as an unauthenticated bind, and succeed
    ("al*", PASSWORDS["alice"]),  # unescaped, (uid=al*) would find alice and her password would fit
    ("*)(uid=*", PASSWORDS["alice"]),
    ("alice)(|(uid=*", PASSWORDS["alice"]),
    ("*", PASSWORDS["bob"]),
    ("nobody", "x"),
])
def test_wrong_passwords_and_filter_injection_do_not_log_in(client, uid, password):
    answer = login(client, uid, password)
    assert answer.status_code == 401 and "Wrong user name or password." in answer.text
    assert client.get("/me").status_code == 401


def test_failed_logins_lock_out_the_user_and_the_address(client):
    for _ in range(3):
        assert login(client, "alice", "wrong", address="192.0.2.1").status_code == 401
    locked = login(client, "alice", PASSWORDS["alice"], address="192.0.2.2")  # right password, other address
    assert locked.status_code == 429 and "too many failed logins" in locked.text
    for uid in ("x1", "x2", "x3"):
        login(client, uid, "wrong", address="192.0.2.3")
    assert login(client, "bob", PASSWORDS["bob"], address="192.0.2.3").status_code == 429
    assert login(client, "bob", PASSWORDS["bob"], address="192.0.2.4").status_code == 303


@pytest.mark.parametrize("look_alike", ["\uff43arol", "c\uff41rol", "\U0001d41carol", " carol ", "CAROL"])
def test_a_locked_uid_stays_locked_under_any_spelling_the_directory_takes_as_the_same(client, look_alike):
    """The directory's caseIgnoreMatch takes fullwidth and other compatibility forms (and extra spaces) as the
    same uid; keyed on casefold() alone, each spelling had guesses of its own against carol."""
    for attempt in range(3):  # from three addresses: only the user is locked, not the address
        assert login(client, "carol", "wrong", address=f"192.0.2.{10 + attempt}").status_code == 401
    answer = login(client, look_alike, PASSWORDS["carol"], address="192.0.2.20")
    assert answer.status_code == 429 and "too many failed logins" in answer.text


def test_a_nul_in_the_password_is_a_wrong_password_and_counts(client):
    """The directory client refuses it (SASLprep) before any bind: that was reported as an outage, 503, and
    never counted, so such guesses were unthrottled."""
    for _ in range(3):
        answer = login(client, "alice", "x\x00y", address="192.0.2.30")
        assert answer.status_code == 401 and "Wrong user name or password." in answer.text
    assert login(client, "alice", PASSWORDS["alice"], address="192.0.2.31").status_code == 429


def test_an_overlong_uid_is_refused_before_the_directory_and_logged_short(client, caplog):
    uid = "x" * 450_000
    with caplog.at_level("WARNING", logger="billing.web.app"):
        answer = login(client, uid, "wrong")
    assert answer.status_code == 401 and uid not in answer.text
    assert sum(len(record.getMessage()) for record in caplog.records) < 2_000


def test_behind_a_trusted_proxy_the_lockout_is_the_clients_address_not_the_proxys(client):
    """Keyed on the proxy's own address, a few failed logins behind an Ingress locked everyone out."""
    for uid in ("x1", "x2", "x3"):  # one client guesses; the Ingress at 127.0.0.1 forwards for it
        assert login(client, uid, "wrong", forwarded_for="198.51.100.7").status_code == 401
    assert login(client, "bob", PASSWORDS["bob"], forwarded_for="203.0.113.9").status_code == 303
    assert login(client, "bob", PASSWORDS["bob"], forwarded_for="198.51.100.7").status_code == 429
    # a client cannot pick its address by sending the header itself: the proxy appends the one it saw
    assert login(client, "bob", PASSWORDS["bob"], forwarded_for="203.0.113.9, 198.51.100.7").status_code == 429
    # and from an address that is no trusted proxy the header is not believed at all
    for uid in ("y1", "y2", "y3"):
        login(client, uid, "wrong", address="192.0.2.50", forwarded_for="203.0.113.10")
    assert login(client, "bob", PASSWORDS["bob"], forwarded_for="203.0.113.10").status_code == 303


def test_a_session_expires(tmp_path, monkeypatch, directory, test_ca):
    client = ldap_app(tmp_path, monkeypatch, directory.ldaps_url, str(test_ca.ca_cert), session_lifetime="1s")
    login(client, "alice", PASSWORDS["alice"])
    assert client.get("/me").status_code == 200
    time.sleep(2.1)
    assert client.get("/me").status_code == 401


def test_logout_needs_the_form_token_and_ends_the_session(client):
    login(client, "alice", PASSWORDS["alice"])
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 400
    page = client.get("/me").text
    copied = client.get_cookie("billing_session").value  # as someone who read it off the wire or the disk would
    token = page.split('name="csrf" value="')[1].split('"')[0]
    assert client.post("/logout", data={"csrf": token}).status_code == 303
    assert client.get("/me").status_code == 401
    # the cookie from before the logout is dead too: the server forgot the session, not only the browser
    client.set_cookie("billing_session", copied)
    assert client.get("/me").status_code == 401


def test_no_secret_in_any_page(client):
    pages = [client.get("/login").text, login(client, "alice", "wrong").text]
    login(client, "alice", PASSWORDS["alice"])
    for route in ("/me", "/me?format=csv&by=namespace", "/api/v1/costs", "/teams/robotics", "/all", "/healthz"):
        pages.append(client.get(route).text)
    for secret in (SESSION_KEY, BIND_PASSWORD, PASSWORDS["alice"]):
        assert not any(secret in page for page in pages)


def test_an_untrusted_certificate_or_a_dead_directory_is_503_not_a_wrong_password(tmp_path, monkeypatch, directory,
                                                                                 test_ca):
    untrusted = ldap_app(tmp_path, monkeypatch, directory.ldaps_url, "")  # the system CAs do not know the test CA
    answer = login(untrusted, "alice", PASSWORDS["alice"])
    assert answer.status_code == 503 and "directory cannot check passwords" in answer.text
    directory.stop()
    gone = ldap_app(tmp_path, monkeypatch, directory.ldaps_url, str(test_ca.ca_cert))
    assert login(gone, "alice", PASSWORDS["alice"]).status_code == 503


def test_an_unknown_user_is_answered_as_slowly_as_a_known_one_with_a_wrong_password(directory, test_ca, monkeypatch):
    """A known user's wrong password costs two binds (the bind account's search, then the person's); an unknown
    user's was answered after the first, in half the time, which told who has an account. Interleaved, so that
    the machine's load weighs on both alike."""
    monkeypatch.setenv("BILLING_BIND_PASSWORD", BIND_PASSWORD)
    config = DirectoryConfig.model_validate({
        "url": directory.ldaps_url, "ca_file": str(test_ca.ca_cert), "bind_dn": f"uid=billing,ou=people,{BASE}",
        "bind_password_env": "BILLING_BIND_PASSWORD", "people": {"base": f"ou=people,{BASE}"}})
    took: dict[str, list[float]] = {"alice": [], "nobody-here": []}
    for _ in range(7):
        for uid, times in took.items():
            started = time.perf_counter()
            with pytest.raises(WrongPassword):
                authenticate(config, uid, "wrong")
            times.append(time.perf_counter() - started)
    known, unknown = (statistics.median(times) for times in took.values())
    assert unknown > 0.75 * known, (known, unknown)
