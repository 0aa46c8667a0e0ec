"""`billing serve` against a real SQLite ledger through Flask's test client.

The ledger is tests/helpers/report_ledger.py (figures worked out by hand there); the
directory snapshot stored with it says who leads which team. Every route is
asked by every kind of visitor, and the answer's status is compared with
what docs/spec.md "Self-service: billing serve" allows.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import socket
import sqlite3
from datetime import date

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.charge.bill import DayBill
from billing.cli import main
from billing.config import Config, ConfigError
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.publish.budgets import read_budget_status
from billing.web.app import create_app
from billing.web.security import Guard, LoginThrottle, Refused, Sessions, login_key
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.html_tables import read_page
from tests.helpers.journals import WORKED, allocated  # noqa: F401 (a fixture)
from tests.helpers.report_ledger import DAY, ROWS, TEAM_MONTH, frame, write_ledger
from tests.helpers.serve import (  # noqa: F401 (pytest fixtures)
    MATRIX,
    RANGE,
    TRUSTED,
    UNTRUSTED,
    VISITORS,
    client,
    get,
    ledger_url,
    store_directory,
    web_config,
)
from tests.helpers.workload_ledger import BY_WORKLOAD, FIRST, LAST, fill

# By hand from tests/helpers/report_ledger.py, 2026-11-01 to 2026-11-20
ALICE_RANGE = "37.20"  # 12.00 (Nov 19) + 24.00 + 1.20 (Nov 20)
BOB_RANGE = "14.75"  # 2.95 (Nov 19) + 5.90 + 5.90 (Nov 20, split between his two teams)
ALL_RANGE = "67.27"


@pytest.mark.parametrize("route", MATRIX)
def test_who_may_see_what(client, route):
    statuses = [get(client, route, visitor).status_code for visitor in VISITORS]
    assert dict(zip(VISITORS, statuses)) == dict(zip(VISITORS, MATRIX[route]))


@pytest.mark.parametrize("route", [*MATRIX, "/login"])
def test_without_a_user_or_from_an_untrusted_address_every_route_is_401(client, route):
    nobody = get(client, route, None)
    outsider = get(client, route, "root", address=UNTRUSTED)
    assert nobody.status_code == 401 if route != "/login" else nobody.status_code == 404  # header auth: no form
    assert outsider.status_code == 401 if route != "/login" else outsider.status_code == 404
    if route.startswith("/api/"):
        assert "X-Forwarded-User" in nobody.json["error"]
        assert "web.trusted_proxies" in outsider.json["error"] and UNTRUSTED in outsider.json["error"]


def test_health_needs_no_user(client):
    assert get(client, "/healthz", None).status_code == 200


def test_trusted_proxies_are_configurable(ledger_url):
    app = create_app(web_config(ledger_url, trusted_proxies=["10.0.0.0/8"])).test_client()
    assert get(app, "/me", "alice", address=UNTRUSTED).status_code == 200
    assert get(app, "/me", "alice", address=TRUSTED).status_code == 401  # loopback no longer trusted


@pytest.mark.parametrize("host, origin, status", [
    ("localhost:8080", None, 200),  # the defaults: loopback by name and address
    ("127.0.0.1", None, 200),
    ("[::1]:8080", "http://[::1]:8080", 200),
    ("BILLING.example.org", "https://billing.example.org", 200),  # reports_url's host, in any case
    ("billing.example.org", "https://assistant.example.net", 200),  # in web.allowed_origins
    ("billing.example.org", "https://assistant.example.net:8443", 403),  # another origin
    ("billing.example.org", "null", 403),  # a sandboxed page's
    ("attacker.example", None, 403),
    ("localhost", "http://attacker.example", 403),
    ("", None, 403),
])
def test_a_request_names_a_host_billing_answers_to_from_no_other_sites_page(ledger_url, host, origin, status):
    config = web_config(ledger_url, allowed_origins=["https://assistant.example.net"]).model_copy(
        update={"reports_url": "https://billing.example.org/"})
    client = create_app(config).test_client()
    headers = {"Host": host, "X-Forwarded-User": "alice", **({"Origin": origin} if origin else {})}
    answer = client.get(f"/me?{RANGE}", headers=headers, environ_base={"REMOTE_ADDR": TRUSTED})
    assert answer.status_code == status
    assert client.get("/healthz", headers={"Host": "10.2.3.4:8080"}).status_code == 200  # the kubelet's probe


@pytest.mark.parametrize("key, value, says", [
    ("allowed_hosts", ["billing.example.org:443"], "'billing.example.org:443' is not a host name or address"),
    ("allowed_hosts", ["https://billing.example.org"], "is not a host name or address"),
    ("allowed_origins", ["https://assistant.example.net/chat"], "is not an origin like https://"),
    ("allowed_origins", ["assistant.example.net"], "is not an origin like https://"),
])
def test_allowed_hosts_and_origins_are_names_and_origins(ledger_url, key, value, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        web_config(ledger_url, **{key: value})


@pytest.mark.parametrize("lines, status, says", [
    ([b"j\xc3\xb6rg"], 200, "jörg"),  # UTF-8, as every proxy sends it
    ([b"j\xf6rg"], 400, "the X-Forwarded-User header is not UTF-8; the proxy must send the user id as UTF-8"),
    ([b"alice, root"], 400, "the X-Forwarded-User header is given more than once (or holds a comma); the proxy "
                            "must send one user id"),
])
def test_the_user_header_is_one_uid_in_utf8(client, lines, status, says):
    """WSGI hands serve each byte as one character: b"j\xc3\xb6rg" would read "jÃ¶rg"; waitress joins two lines
    of the header with a comma."""
    answer = client.get(f"/me?{RANGE}", headers={"X-Forwarded-User": lines[0].decode("latin-1")},
                        environ_base={"REMOTE_ADDR": TRUSTED})
    assert answer.status_code == status
    assert says in html.unescape(answer.get_data(as_text=True))


def test_a_persons_page_shows_their_share_only(client):
    page = get(client, f"/me?{RANGE}", "bob").text
    assert f"{BOB_RANGE} USD" in page
    assert "alice" not in page and "stray" not in page  # nobody else's namespace


def test_waste_is_shown_to_whom_it_belongs(client):
    mine = get(client, f"/me?{RANGE}", "alice").text
    assert re.search(r"<td>alice</td><td class=\"num\">3.50 GPU-h</td><td class=\"num\">–</td>", mine)
    assert 'id="waste"' not in get(client, f"/me?{RANGE}", "bob").text  # nothing measured of bob's
    team = get(client, f"/teams/robotics?{RANGE}", "carol").text
    assert "3.50 GPU-h" in team and "stray" not in team


def test_a_forwarded_for_header_does_not_make_an_address_trusted(client):
    answer = client.get("/me", headers={"X-Forwarded-User": "alice", "X-Forwarded-For": TRUSTED},
                        environ_base={"REMOTE_ADDR": UNTRUSTED})
    assert answer.status_code == 401


def test_uids_match_without_regard_to_case(client):
    page = get(client, f"/me?{RANGE}", "ALICE").text
    assert f"{ALICE_RANGE} USD" in page and "Your costs, alice" in page


def test_the_me_page_figures_are_the_last_days(client):
    page = get(client, f"/me?{RANGE}", "alice").text
    assert re.search(r'id="day-total">25.20 USD<', page)  # Nov 20: 24.00 + 1.20
    assert re.search(r'id="month-total">37.20 USD<', page)
    assert "2026-11-02 to 2026-11-09" in page  # never billed, listed rather than counted as zero


def test_someone_without_costs_is_told_so_not_shown_zero(client):
    page = get(client, f"/me?{RANGE}", "mallory").text
    assert "The ledger holds no costs of namespaces owned by mallory." in page
    assert 'id="range-total"' not in page


def test_csv_is_what_the_page_shows(client):
    rows = list(csv.DictReader(io.StringIO(get(client, f"/teams/robotics?{RANGE}&by=person&format=csv", "carol").text)))
    costs = {row["person"]: round(float(row["cost"]), 2) for row in rows}
    # alice 12.00 + 24.00 + 1.20; bob's robotics share 5.90; team namespaces 12.00 + 1.50
    assert costs == {"alice": 37.20, "bob": 5.90, "": 13.50}
    assert round(sum(costs.values()), 2) == float(TEAM_MONTH["robotics"])
    page = get(client, f"/teams/robotics?{RANGE}", "carol").text
    assert f"{TEAM_MONTH['robotics']} USD" in page and "by=person&amp;format=csv" in page


def test_the_api_answers_in_the_report_shape(client):
    answer = get(client, f"/api/v1/costs?{RANGE}&person=bob&by=team", "bob").json
    assert answer["person"] == "bob" and answer["from"] == "2026-11-01" and answer["to"] == "2026-11-20"
    assert {row["team"]: round(row["cost"], 2) for row in answer["rows"]} == {"robotics": 5.90, "vision": 8.85}
    assert round(answer["total_cost"], 2) == float(BOB_RANGE)
    assert date(2026, 11, 2).isoformat() in answer["missing_days"]
    everything = get(client, f"/api/v1/costs?{RANGE}", "root").json
    assert round(everything["total_cost"], 2) == float(ALL_RANGE) and everything["rows"][0].keys() >= {
        "day", "cluster", "namespace", "owner", "resource", "gpu_model", "quantity", "unit_price", "cost"}


def test_serve_answers_the_same_question_as_billing_report(ledger_url, tmp_path):
    """serve's API and CSV downloads assembled their own answer: a team's JSON had no budget and no price changes,
    which `billing report --format json` gives for the same question."""
    prices = MINIMAL_CONFIG["clusters"][0]["prices"]
    settings = {**MINIMAL_CONFIG, "currency": "USD", "database": ledger_url, "web": {"admins": ["root"]},
                "budgets": {"monthly": {"robotics": 100}},
                "clusters": [{**MINIMAL_CONFIG["clusters"][0],  # new prices from 2026-11-10, inside the range
                              "prices": [{**prices, "from": "2026-01-01"}, {**prices, "from": "2026-11-10"}]}]}
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(settings))
    app = create_app(Config.model_validate(settings)).test_client()

    def report(*options: str) -> str:
        said = CliRunner().invoke(main, ["report", "--team", "robotics", "--from", "2026-11-01", "--to", "2026-11-20",
                                         "--by", "person", *options, "--config", str(path)])
        assert said.exit_code == 0, said.output
        return said.stdout_bytes.decode()  # as written: CSV lines end in CRLF

    served = get(app, f"/api/v1/costs?{RANGE}&team=robotics&by=person", "carol").json
    assert served == json.loads(report("--format", "json"))
    assert served["budget"] == 100 and served["month_to_date"] == pytest.approx(float(TEAM_MONTH["robotics"]))
    assert served["price_changes"] == [{"cluster": "jaguar", "from": "2026-11-10"}]
    assert get(app, f"/teams/robotics?{RANGE}&by=person&format=csv", "carol").text == report("--format", "csv")


@pytest.mark.parametrize("route, says", [
    ("/api/v1/costs?by=cost", "'cost' is not one of namespace, team, person, workload or label:NAME"),
    ("/api/v1/costs?by=label:project", "'project': it is not in the config key cost_labels, which is empty"),
    ("/api/v1/costs?from=2026-11-31", "'2026-11-31' is not a date"),
    ("/api/v1/costs?from=2026-11-20&to=2026-11-01", "ends (2026-11-01) before it starts"),
    ("/api/v1/costs?from=2024-01-01&to=2026-11-01", "longer than 366 days"),
    ("/api/v1/costs?owner=bob", "unknown query parameter 'owner'"),
    ("/api/v1/costs?team=robotics&person=alice", "not both"),
])
def test_bad_questions_are_400_with_a_sentence(client, route, says):
    answer = get(client, route, "root")
    assert answer.status_code == 400 and says in answer.json["error"]


@pytest.mark.parametrize("route, name", [
    (f"/me?{RANGE}&from=2026-11-02", "from"), (f"/teams/robotics?{RANGE}&to=2026-11-19", "to"),
    (f"/all?{RANGE}&format=csv&by=team&by=cluster", "by"), (f"/api/v1/costs?{RANGE}&team=robotics&team=vision", "team"),
    (f"/api/v1/costs?{RANGE}&person=alice&person=bob", "person"),
])
def test_a_parameter_given_twice_is_400_naming_it(client, route, name):
    """`from=A&from=B` took the first and answered 200 for a range nobody asked for alone."""
    answer = get(client, route, "root")
    assert answer.status_code == 400
    assert f"the query parameter '{name}' is given 2 times; give it once" in html.unescape(answer.text)


@pytest.mark.parametrize("route, user, sentence", [
    ("/all", "bob", "bob is not in web.admins, so cannot see all teams."),
    ("/teams/vision", "alice", "alice is not a lead of team 'vision'"),
    ("/nowhere", "bob", "no page is at /nowhere."),
])
def test_an_error_page_says_one_sentence_as_it_was_said(client, route, user, sentence):
    """The page capitalised the sentence's first letter, a uid's too ("Bob is not in web.admins"), and ended
    werkzeug's own two sentences with a second full stop."""
    page = get(client, route, user)
    said = html.unescape(re.search(r'<p class="warning" role="alert" id="error">(.*?)</p>', page.text)[1])
    assert said.startswith(sentence) and said.endswith(".") and not said.endswith("..")
    assert said.count(". ") == 0


@pytest.mark.parametrize("route", ["/me?to=0001-01-05", "/teams/robotics?to=0001-01-05", "/all?to=0001-01-05",
                                   "/all?from=9999-12-01&to=9999-12-31", "/api/v1/costs?to=0001-01-05"])
def test_dates_outside_what_a_ledger_can_hold_are_400_not_500(client, route):
    """A report reaches back a month before `to`: from year 1 that was an OverflowError, a 500."""
    answer = get(client, route, "root")
    assert answer.status_code == 400, answer.text
    assert "is not a day between 1970-01-01 and 9999-12-30" in answer.text


@pytest.mark.parametrize("value, sentence", [
    ("2026-02-30", "'2026-02-30' is not a date like 2026-11-20"),
    ("20261120", "'20261120' is not a date like 2026-11-20"),
    ("1969-12-31", "'1969-12-31' is not a day between 1970-01-01 and 9999-12-30"),
    ("9999-12-31", "'9999-12-31' is not a day between 1970-01-01 and 9999-12-30"),
])
def test_serve_and_the_command_line_refuse_the_same_days_in_the_same_words(client, ledger_url, tmp_path, value,
                                                                            sentence):
    """One date parser (billing.days.parse_day): serve took days to 2999-12-31, the command line to 9999-12-30."""
    config = tmp_path / "billing.yaml"
    config.write_text(yaml.safe_dump({**MINIMAL_CONFIG, "database": ledger_url}))
    said = CliRunner().invoke(main, ["report", "--all-teams", "--to", value, "--config", str(config)])
    answer = get(client, f"/api/v1/costs?to={value}", "root")
    assert said.exit_code == 2 and sentence in said.output
    assert answer.status_code == 400 and answer.json["error"] == f"to={sentence}"


@pytest.mark.parametrize("route", ["/all?from=3000-01-01&to=3000-01-02", "/all?from=9999-12-01&to=9999-12-30",
                                   "/api/v1/costs?from=9999-12-01&to=9999-12-30"])
def test_the_last_day_the_command_line_takes_serve_takes_too(client, route):
    """A page reaches a month back and a day past its range: 9999-12-30 still leaves the calendar whole."""
    assert get(client, route, "root").status_code == 200


def test_names_differing_only_in_case_are_the_ledgers_names_for_an_admin_too(client):
    team = get(client, f"/api/v1/costs?{RANGE}&team=ROBOTICS&by=person", "root").json
    assert team["team"] == "robotics" and round(team["total_cost"], 2) > 0
    person = get(client, f"/api/v1/costs?{RANGE}&person=BOB", "root").json
    assert person["person"] == "bob" and round(person["total_cost"], 2) == float(BOB_RANGE)
    assert "Team robotics" in get(client, f"/teams/ROBOTICS?{RANGE}", "root").text


def test_an_unknown_name_is_404_without_naming_anyone_else(client):
    """Suggesting the closest names (as `billing report` does on the command line) would tell a signed-in
    person who else has costs."""
    answer = get(client, f"/api/v1/costs?{RANGE}", "alicia")
    assert answer.status_code == 404 and answer.json["error"] == "no person named 'alicia' in the ledger"
    answer = get(client, f"/api/v1/costs?{RANGE}&team=robotic", "root")
    assert answer.status_code == 404 and answer.json["error"] == "no team named 'robotic' in the ledger"


@pytest.mark.parametrize("route", ["/me?team=vision", "/me?by=team&format=csv", "/me?by=namespace",
                                   "/me?format=pdf", "/all?from=yesterday"])
def test_pages_refuse_parameters_they_do_not_take(client, route):
    answer = get(client, route, "root")
    assert answer.status_code == 400 and 'role="alert"' in answer.text


@pytest.mark.parametrize("path, location", [
    ("/2026-11-20/index.html", "/all?from=2026-11-20&to=2026-11-20"),
    ("/2026-11-20/teams/robotics.html", "/teams/robotics?from=2026-11-20&to=2026-11-20"),
    ("/index.html", "/me"),
])
def test_the_links_of_emails_lead_to_serves_pages(client, path, location):
    """Emails link to the static pages' addresses below reports_url; where reports_url is `billing serve` (as in
    cronjob/billing.yaml) those answered 404."""
    answer = get(client, path, "root")
    assert answer.status_code == 303 and answer.headers["Location"] == location
    assert get(client, location, "root").status_code == 200


@pytest.mark.parametrize("path", ["/2026-11-20/teams/nobody.html", "/2026-13-40/index.html", "/x/index.html"])
def test_a_page_address_of_no_page_is_404(client, path):
    assert get(client, path, "root").status_code == 404
    assert get(client, "/2026-11-20/teams/robotics.html", None).status_code == 401  # no team names to strangers


def test_a_team_page_shows_its_budget_as_the_reports_do(ledger_url):
    config = Config.model_validate({**MINIMAL_CONFIG, "currency": "USD", "database": ledger_url,
                                    "web": {"admins": ["root"]}, "budgets": {"monthly": {"robotics": 100}}})
    page = read_page(get(create_app(config).test_client(), f"/teams/robotics?{RANGE}", "carol").text)
    status = read_budget_status(open_ledger(ledger_url), "robotics", DAY, 100.0)
    assert (page.texts["budget-amount"], page.texts["budget-spent"]) == ("100.00 USD", f"{TEAM_MONTH['robotics']} USD")
    assert page.texts["budget-forecast"] == f"{status.forecast:,.2f} USD"
    vision = read_page(get(create_app(config).test_client(), f"/teams/vision?{RANGE}", "root").text)
    assert "budget-amount" not in vision.texts  # no budget, no section


def test_hsts_only_where_the_browser_came_over_tls(client):
    def hsts(address: str, proto: str | None) -> str | None:
        headers = {"X-Forwarded-User": "alice", **({"X-Forwarded-Proto": proto} if proto else {})}
        answer = client.get(f"/me?{RANGE}", headers=headers, environ_base={"REMOTE_ADDR": address})
        return answer.headers.get("Strict-Transport-Security")
    assert hsts(TRUSTED, "https") == "max-age=31536000"  # the proxy terminated TLS
    assert hsts(TRUSTED, None) is None and hsts(TRUSTED, "http") is None
    assert hsts(UNTRUSTED, "https") is None  # anyone may send the header; only the proxy is believed


def test_pages_allow_no_script_and_no_caching(client):
    answer = get(client, f"/all?{RANGE}", "root")
    assert "script-src" not in answer.headers["Content-Security-Policy"]
    assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert answer.headers["Cache-Control"] == "no-store"
    assert "<script" not in answer.text


def test_names_are_escaped(tmp_path):
    rows = {DAY: [("jaguar", "<b>x</b>", "<script>t</script>", None, "cpu", "", 1.0, 1.0, 1.0)]}
    app = create_app(web_config(write_ledger(tmp_path / "l.db", rows))).test_client()
    page = get(app, f"/all?from={DAY}&to={DAY}", "root").text
    assert "<script>t" not in page and "&lt;script&gt;t" in page


def test_an_unreachable_database_is_503_without_its_password(ledger_url):
    down = create_engine("postgresql+psycopg://billing:hunter2-secret@127.0.0.1:9/ledger?connect_timeout=2")
    broken = create_app(web_config(ledger_url), engine=down).test_client()
    for route in ("/healthz", "/me", "/api/v1/costs"):
        answer = get(broken, route, "alice")
        assert answer.status_code == 503, route
        assert "hunter2" not in answer.text and "127.0.0.1:9" in answer.text


def test_login_throttle_locks_out_and_forgets():
    now = [0.0]
    throttle = LoginThrottle(attempts=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.claim(["user:alice"])[0] == 0  # each a wrong password: never forgiven
    assert throttle.claim(["user:alice"]) == (60, [])
    assert throttle.claim(["user:bob"])[0] == 0
    now[0] = 60.0
    assert throttle.claim(["user:alice"])[0] == 0


def test_guesses_sent_at_once_are_counted_before_the_directory_answers():
    """Counted only once the directory had said "wrong", ten guesses sent together all passed a throttle of 3."""
    throttle = LoginThrottle(attempts=3, window=60, clock=lambda: 0.0)
    at_once = [throttle.claim(["user:carol", "address:198.51.100.7"]) for _ in range(10)]
    assert [wait for wait, _ in at_once] == [0, 0, 0, *[60] * 7]
    throttle.forgive(at_once[0][1])  # the first was the right password: it counts not
    assert throttle.claim(["user:carol"])[0] == 0 and throttle.claim(["user:carol"])[0] == 60


def test_the_throttle_forgets_what_left_its_window_and_keeps_a_few_failures_per_key():
    """Bounded: ten failures of each of 200 addresses are held as three of each, and none once they left."""
    now = [0.0]
    throttle = LoginThrottle(attempts=3, window=60, clock=lambda: now[0])
    for address in range(200):
        throttle.claim([f"address:{address}"] * 10)  # ten failures each, of which the last three are kept
    assert len(throttle) == 200 and throttle.claim(["address:7"])[0] == 60
    assert throttle._db.execute("SELECT count(*) FROM failures").fetchone()[0] == 600
    now[0] = 61
    throttle.claim(["address:x"])
    assert len(throttle) == 1 and throttle.claim(["address:7"])[0] == 0


def test_serve_and_mcp_beside_it_count_in_one_throttle_file(tmp_path):
    """Two throttles on one file, as the two processes of the pod: failures counted by either lock out both."""
    path = str(tmp_path / "logins.sqlite")
    serve, mcp = LoginThrottle(3, 60, path), LoginThrottle(3, 60, path)
    for throttle in (serve, mcp, serve):
        assert throttle.claim(["user:carol"])[0] == 0
    assert 59 < mcp.claim(["user:carol"])[0] <= 60 and serve.claim(["user:dave"])[0] == 0
    assert (tmp_path / "logins.sqlite").stat().st_mode & 0o777 == 0o600  # user names and addresses


def test_a_throttle_that_cannot_count_refuses_the_login(ledger_url, monkeypatch):
    config = web_config(ledger_url)
    guard = Guard(config.web)

    def locked(keys):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(guard.throttle, "claim", locked)
    with pytest.raises(Refused, match="^logins cannot be counted at the moment; try again later$"):
        guard.sign_in(config.directory, "alice", "right", "127.0.0.1")


def test_a_throttle_file_of_another_user_is_refused(tmp_path, monkeypatch):
    """Whoever may write the file may forget failures: it must be billing's user's own."""
    (tmp_path / "logins.sqlite").touch()
    monkeypatch.setattr("os.geteuid", lambda: 4242)
    with pytest.raises(ConfigError, match=f"^web.login_throttle_file {tmp_path}/logins.sqlite belongs to another "
                                          "user; name a file in a directory only billing's user writes$"):
        LoginThrottle(3, 60, str(tmp_path / "logins.sqlite"))


def test_a_throttle_file_that_cannot_be_opened_is_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match=f"^web.login_throttle_file {tmp_path}/no/logins.sqlite cannot be opened: "
                                          "No such file or directory$"):
        LoginThrottle(3, 60, str(tmp_path / "no" / "logins.sqlite"))


def test_sessions_end_expire_and_stay_bounded():
    now = [0.0]
    sessions = Sessions(lifetime=100, clock=lambda: now[0], most=3)
    first, second = sessions.start(), sessions.start()
    assert sessions.alive(first) and sessions.alive(second) and not sessions.alive("forged")
    sessions.end(first)
    assert not sessions.alive(first) and sessions.alive(second)
    third, fourth, fifth = sessions.start(), sessions.start(), sessions.start()
    assert not sessions.alive(second) and all(map(sessions.alive, (third, fourth, fifth)))  # the oldest went
    now[0] = 100.0
    assert not sessions.alive(fifth)


@pytest.mark.parametrize("uid, key", [("carol", "carol"), ("\uff43arol", "carol"), ("\U0001d41carol", "carol"),
                                      (" Carol  Smith ", "carol smith"), ("CAROL", "carol")])
def test_a_login_key_folds_what_the_directory_folds(uid, key):
    assert login_key(uid) == key


def test_serve_on_a_port_in_use_is_one_sentence_and_exit_1(ledger_url, tmp_path):
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump({**MINIMAL_CONFIG, "database": ledger_url}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port), "--config", str(tmp_path / "billing.yaml")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith(f"billing: billing serve cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in result.output


def test_serve_with_a_bad_web_section_is_exit_2(write_config):
    result = CliRunner().invoke(main, ["serve", "--config", str(write_config(web={"trusted_proxies": ["x"]}))])
    assert result.exit_code == 2 and "web.trusted_proxies" in result.output


def test_a_range_with_two_currencies_is_refused_not_added_up(tmp_path):
    """A page's day figures and trend are one figure a day: refused; the API's costs answer each currency's total
    (tests/publish/test_two_currencies.py). alice's November: 12.00 EUR on the 19th, 25.20 USD on the 20th."""
    url = write_ledger(tmp_path / "l.db")
    replace_day(open_ledger(url), date(2026, 11, 19), DayBill(frame(ROWS[date(2026, 11, 19)])), "EUR")
    app = create_app(web_config(url)).test_client()
    answer = get(app, f"/me?{RANGE}", "alice")
    assert answer.status_code == 400 and "EUR and USD" in answer.text
    answer = get(app, f"/api/v1/costs?{RANGE}", "alice")
    assert answer.status_code == 200 and answer.json["total_cost"] is None
    assert answer.json["total_costs"] == pytest.approx({"EUR": 12.00, "USD": 25.20})


@pytest.fixture(scope="module")
def workloads(tmp_path_factory):
    """A client over tests/helpers/workload_ledger.py's ledger (cost label `experiment`), with who leads which team."""
    url = f"sqlite:///{tmp_path_factory.mktemp('workloads') / 'ledger.db'}"
    engine = open_ledger(url)
    fill(engine)
    engine.dispose()
    config = Config.model_validate({**MINIMAL_CONFIG, "currency": "USD", "database": store_directory(url),
                                    "cost_labels": ["experiment"], "web": {"admins": ["root"]}})
    return create_app(config).test_client()


WORKLOAD_RANGE = f"from={FIRST}&to={LAST}"


def test_the_api_breaks_costs_down_by_workload_for_whom_may_see_them(workloads):
    alice = get(workloads, f"/api/v1/costs?{WORKLOAD_RANGE}&by=workload", "alice").json
    assert {(r["namespace"], r["workload"]): r["cost"] for r in alice["rows"]} == pytest.approx(
        {key: cost for key, cost in BY_WORKLOAD.items() if key[0] == "alice"})
    assert alice["days_without_breakdown"] == ["2026-11-02"]
    team = get(workloads, f"/api/v1/costs?{WORKLOAD_RANGE}&by=workload&team=robotics", "carol").json
    assert {(r["namespace"], r["workload"]): r["cost"] for r in team["rows"]} == pytest.approx(BY_WORKLOAD)
    assert get(workloads, f"/api/v1/costs?{WORKLOAD_RANGE}&by=workload&team=robotics", "alice").status_code == 403
    assert get(workloads, f"/api/v1/costs?{WORKLOAD_RANGE}&by=workload&person=alice", "bob").status_code == 403
    labelled = get(workloads, f"/api/v1/costs?{WORKLOAD_RANGE}&by=label:experiment&person=bob", "bob").json
    assert [(r["namespace"], r["label_experiment"], round(r["cost"], 2)) for r in labelled["rows"]] == [
        ("bob", "exp-1", 11.80)]  # both halves of his namespace, one per team


def test_person_and_team_pages_show_workloads_when_the_range_has_them(workloads, client):
    page = get(workloads, f"/me?{WORKLOAD_RANGE}", "alice").text
    assert 'id="by-workload"' in page and "Job/train-a" in page and "2026-11-02 had costs without a breakdown" in page
    rows = list(csv.DictReader(io.StringIO(
        get(workloads, f"/teams/robotics?{WORKLOAD_RANGE}&by=workload&format=csv", "carol").text)))
    assert {(r["namespace"], r["workload"]): float(r["cost"]) for r in rows} == pytest.approx(BY_WORKLOAD)
    assert 'id="by-workload"' in get(workloads, f"/teams/robotics?{WORKLOAD_RANGE}", "carol").text
    # a range no workload row breaks down: the table would only repeat the namespaces
    assert 'id="by-workload"' not in get(client, f"/me?{RANGE}", "alice").text


def test_a_long_workload_table_shows_the_most_expensive_and_sums_the_others(workloads, monkeypatch):
    monkeypatch.setattr("billing.web.app.PAGE_WORKLOADS", 2)
    rows = read_page(get(workloads, f"/me?{WORKLOAD_RANGE}", "alice").text).tables["by-workload"]
    # alice's four rows: train-a 15.12, not broken down 12.00, notebook 10.08, nightly 2.40 (tests/helpers/workload_ledger.py)
    assert [(row[0], row[1], row[-1]) for row in rows[1:]] == [
        ("alice", "Job/train-a", "15.12"), ("alice", "(not broken down)", "12.00"),
        ("", "2 other workloads (in the CSV)", "12.48"), ("Total", "", "39.60")]


def test_a_member_who_is_no_lead_is_told_where_their_own_costs_are(client):
    answer = get(client, f"/teams/robotics?{RANGE}", "alice")  # on robotics, not its lead
    assert answer.status_code == 403 and "your own costs are on /me" in answer.text


def test_the_team_page_and_the_all_teams_page_show_the_allocations_balance(allocated):
    """docs/billing.md's worked month in serve: NIH-R01's 80.00 drawn by vision by November 20, 4.08 beyond it."""
    config = Config.model_validate({**MINIMAL_CONFIG, "currency": "USD", "database": str(allocated.url),
                                    "web": {"admins": ["root"]},
                                    "accounts": WORKED.model_dump(by_alias=True, mode="json", exclude_defaults=True),
                                    "allocations": [{"account": "NIH-R01", "from": "2026-11-01", "to": "2027-10-31",
                                                     "amount": 80.0}]})
    client = create_app(config).test_client()
    for path in ("/teams/vision", "/all"):
        page = get(client, f"{path}?from=2026-11-01&to=2026-11-20", "root").text
        assert 'id="allocations"' in page and "80.00 USD" in page and "4.08 USD (charged)" in page, path
    assert 'id="allocations"' not in get(client, "/teams/nlp?from=2026-11-01&to=2026-11-20", "root").text
