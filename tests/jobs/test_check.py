"""`billing check` with dependencies that need no server: LDIF, SQLite, an outbox, a mocked Prometheus."""

from __future__ import annotations

import json
import re
import sys
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import responses
from click.testing import CliRunner

from billing.cli import main
from billing.config import load_config
from billing.jobs.check import (
    CheckFailure,
    CheckWarning,
    accounts_consistent,
    accounts_expiring,
    accounts_named,
    accounts_today,
    allocations_drawable,
    coldfront_allocations,
)
from billing.ledger.database import open_ledger
from billing.ledger.read import days_billed
from fixtures.servers import free_port
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.jobs import LDIF, stub_collection

PROMETHEUS = "http://prometheus.test:9090"
VECTOR_1 = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1"]}]}}


@pytest.fixture
def config(write_config, tmp_path: Path):
    """A config file with LDIF as its directory and an SQLite ledger; keys can be replaced."""
    (tmp_path / "people.ldif").write_text(LDIF)

    def write(prometheus: str = PROMETHEUS, **changes) -> str:
        cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": prometheus}}
        defaults = {"database": f"sqlite:///{tmp_path / 'ledger.db'}", "directory": {"ldif": str(tmp_path / "people.ldif")}}
        return str(write_config(clusters=[cluster], **{**defaults, **changes}))

    return write


def check(config: str):
    return CliRunner().invoke(main, ["check", "--config", config])


def lines(output: str) -> dict[str, str]:
    """dependency -> its line, e.g. "database" -> "ok    database  sqlite:///... (3 ms)"."""
    return {line[6:26].strip(): line for line in output.splitlines()}


BUILDINFO = {"status": "success", "data": {"version": "2.53.1", "revision": "x", "goVersion": "go1.22.5"}}


def renames(*found: str) -> dict:
    """An answer of stores.renames_query: a series per (family, label) the scrape renamed."""
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"found": f}, "values": [[0, "1"]]} for f in found]}}


ODD_PODS = ("qos_class", "init_container_status_running")  # what request_rule warns of


def every_series(request) -> tuple[int, dict, str]:
    """vector(1) to every instant query, and to the preflight's every family it asks about (one series per
    `found` branch)."""
    query = parse_qs(request.body)["query"][0]
    branches = re.findall(r'"found", "(\w+)"', query)
    if not branches:
        return 200, {}, json.dumps(VECTOR_1)
    found = [{"metric": {"found": branch}, "value": [1, "1"]} for branch in branches]
    return 200, {}, json.dumps({"status": "success", "data": {"resultType": "vector", "result": found}})


def every_series_no_odd_pod(request) -> tuple[int, dict, str]:
    """vector(1) and every series the bill needs there; no pod kube-state-metrics cannot tell billing about."""
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    odd = any(word in parse_qs(request.body)["query"][0] for word in ODD_PODS)
    return (200, {}, json.dumps(empty)) if odd else every_series(request)


def a_store_with_every_series() -> None:
    """The mocked store: vector(1), every series the bill needs, no odd pod, no label renamed, Prometheus 2."""
    responses.add_callback(responses.POST, f"{PROMETHEUS}/api/v1/query", callback=every_series_no_odd_pod)
    responses.post(f"{PROMETHEUS}/api/v1/query_range", json=renames())
    responses.get(f"{PROMETHEUS}/api/v1/status/buildinfo", json=BUILDINFO)


@responses.activate
def test_everything_reachable(config, tmp_path):
    a_store_with_every_series()
    path = config(email={"enabled": True, "outbox_dir": str(tmp_path / "outbox")})
    (tmp_path / "outbox").mkdir()
    assert CliRunner().invoke(main, ["db", "upgrade", "--config", path]).exit_code == 0  # the ledger, made
    result = check(path)
    assert result.exit_code == 0, result.output
    found = lines(result.stdout)
    assert list(found) == ["config", "prices jaguar", "prometheus jaguar", "series jaguar", "requests jaguar",
                           "held jaguar", "workloads jaguar", "figures jaguar", "storage jaguar", "directory", "database",
                           "email"]
    assert all(line.startswith("ok    ") for line in found.values())
    assert f"{PROMETHEUS} answered vector(1); the store is Prometheus 2.53.1" in found["prometheus jaguar"]
    assert "every series the bill needs has samples on " in found["series jaguar"]
    assert "1 people, 1 teams (1 with a lead)" in found["directory"]
    assert "0 days billed" in found["database"]
    assert f"outbox directory {tmp_path / 'outbox'}, which is writable" in found["email"]
    assert all(line.endswith(" ms)") or line.endswith(" s)") for line in found.values())


@responses.activate
def test_the_store_is_detected_once_per_cluster_for_every_line(config):
    """Each line that read the day's series (series, requests, workloads) asked which store answers and how its
    labels are named again: four buildinfo and three label-rename queries where one of each says it."""
    a_store_with_every_series()
    result = check(config())
    assert {"series jaguar", "requests jaguar", "workloads jaguar"} <= set(lines(result.stdout)), result.output
    asked = [call.request.url.split("?")[0].removeprefix(PROMETHEUS) for call in responses.calls]
    renames_asked = [call for call in responses.calls if call.request.url.endswith("/api/v1/query_range")
                     and '"found"' in parse_qs(str(call.request.body))["query"][0]]  # the held line asks ranges too
    assert (asked.count("/api/v1/status/buildinfo"), len(renames_asked)) == (1, 1)


@responses.activate
def test_label_renames_are_shown_per_family(config):
    """Detected renames (a scrape with honor_labels: false) warn: the bill reads them right, other tools do not."""
    responses.add_callback(responses.POST, f"{PROMETHEUS}/api/v1/query", callback=every_series)
    responses.post(f"{PROMETHEUS}/api/v1/query_range",
                   json=renames("kube-state-metrics/namespace", "kube-state-metrics/pod", "DCGM/pod"))
    responses.get(f"{PROMETHEUS}/api/v1/status/buildinfo", json=BUILDINFO)
    result = check(config())
    assert result.exit_code == 0, result.output
    series = lines(result.stdout)["series jaguar"]
    assert series.startswith("WARN  ")
    assert "kube-state-metrics labels read from exported_namespace, exported_pod (a scrape with honor_labels: false" \
        in series and "DCGM labels read from exported_pod" in series


@responses.activate
def test_a_prometheus_that_answers_nonsense_fails(config):
    responses.post(f"{PROMETHEUS}/api/v1/query", json={"status": "success", "data": {"resultType": "vector", "result": []}})
    result = check(config())
    assert result.exit_code == 1
    assert lines(result.stdout)["prometheus jaguar"].startswith("FAIL  ")


def test_each_unreachable_dependency_is_its_own_failing_line(config, tmp_path):
    port = free_port()
    email = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": port}
    path = config(prometheus=f"http://127.0.0.1:{port}", email=email)
    (tmp_path / "people.ldif").unlink()
    result = check(path)
    assert result.exit_code == 1
    found = lines(result.stdout)
    assert found["config"].startswith("ok    ") and found["database"].startswith("WARN  ")
    assert f"Prometheus of cluster jaguar at http://127.0.0.1:{port} is unreachable" in found["prometheus jaguar"]
    assert "; the store is down or clusters[0].prometheus.url is wrong (" in found["prometheus jaguar"]
    assert "series jaguar" not in found  # not asked again where the store did not answer
    assert "people.ldif cannot be read" in found["directory"]
    assert f"SMTP server 127.0.0.1:{port} is unreachable (Connection refused); the server is down or " \
           "email.smtp_host and smtp_port are wrong (" in found["email"]
    assert all(found[d].startswith("FAIL  ") for d in ("prometheus jaguar", "directory", "email"))


@responses.activate
def test_check_creates_nothing(config, tmp_path):
    """No SQLite file, no ledger tables, no outbox, no output_dir: a check looks and says what a run would make."""
    responses.add_callback(responses.POST, f"{PROMETHEUS}/api/v1/query", callback=every_series)
    responses.post(f"{PROMETHEUS}/api/v1/query_range", json=renames())
    responses.get(f"{PROMETHEUS}/api/v1/status/buildinfo", json=BUILDINFO)
    path = config(database=f"sqlite:///{tmp_path / 'data' / 'ledger.db'}", output_dir=str(tmp_path / "reports"),
                  email={"enabled": True, "outbox_dir": str(tmp_path / "mail" / "outbox")})
    before = sorted(tmp_path.rglob("*"))

    result = check(path)
    assert result.exit_code == 0, result.output  # warnings only: the first run makes them
    assert sorted(tmp_path.rglob("*")) == before
    found = lines(result.stdout)
    assert found["database"].startswith("WARN  ")
    assert f"the file {tmp_path / 'data' / 'ledger.db'} does not exist yet (the first billing run creates it)" \
        in found["database"]
    assert found["email"].startswith("ok    ")
    assert (f"messages go to the outbox directory {tmp_path / 'mail' / 'outbox'}, which the first run creates "
            f"(in {tmp_path}, which is writable)") in found["email"]

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ledger.db").touch()  # an empty file: SQLite's new database, no tables
    database = lines(check(path).stdout)["database"]
    assert database.startswith("WARN  ") and "holds no ledger tables yet" in database
    assert (tmp_path / "data" / "ledger.db").stat().st_size == 0


def test_a_missing_secret_is_its_dependencys_failing_line(write_config, tmp_path, monkeypatch):
    """Secrets are read where they are used: each missing one fails its own dependency, the rest are checked."""
    for name in ("NO_TOKEN", "NO_LDAP_PASSWORD", "NO_SMTP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SMTP_USER", "billing")
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": PROMETHEUS, "bearer_token_env": "NO_TOKEN"}}
    path = write_config(clusters=[cluster], database=f"sqlite:///{tmp_path / 'ledger.db'}",
                        directory={"url": f"ldap://127.0.0.1:{free_port()}", "bind_password_env": "NO_LDAP_PASSWORD"},
                        email={"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": free_port(),
                               "username_env": "SMTP_USER", "password_file": str(tmp_path / "no-such-file")})
    result = check(str(path))
    assert result.exit_code == 2, result.output  # a secret the config names is missing: as `billing run` exits
    found = lines(result.stdout)
    assert found["config"].startswith("ok    ")
    assert found["prometheus jaguar"].startswith("FAIL  ") and (
        "clusters[0].prometheus: bearer_token_env names the environment variable NO_TOKEN, which is not set"
        in found["prometheus jaguar"])
    assert found["directory"].startswith("FAIL  ") and (
        "directory: bind_password_env names the environment variable NO_LDAP_PASSWORD, which is not set"
        in found["directory"])
    assert found["email"].startswith("FAIL  ") and (
        f"email: password_file {tmp_path / 'no-such-file'} cannot be read (No such file or directory)" in found["email"])
    assert found["database"].startswith("WARN  ")


@responses.activate
def test_an_unreachable_database_fails(config):
    responses.post(f"{PROMETHEUS}/api/v1/query", json=VECTOR_1)
    result = check(config(database=f"postgresql+psycopg://billing@127.0.0.1:{free_port()}/billing"))
    assert result.exit_code == 1
    database = lines(result.stdout)["database"]
    assert database.startswith("FAIL  ") and "127.0.0.1" in database


@pytest.mark.parametrize("text", ["clusters: []\n", "timezone: Mars/Olympus\n", "nonsense: [\n"])
def test_an_invalid_config_exits_2_before_checking_anything(tmp_path, text):
    path = tmp_path / "billing.yaml"
    path.write_text(text)
    result = check(str(path))
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.startswith("billing: ")


def test_check_says_which_price_set_prices_the_day(write_config, tmp_path):
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": PROMETHEUS}}
    sets = [{**cluster["prices"], "from": "2026-01-01"}, {**cluster["prices"], "from": "2026-11-20"},
            {**cluster["prices"], "from": "2027-01-01"}]
    path = str(write_config(clusters=[{**cluster, "prices": sets}], database=f"sqlite:///{tmp_path / 'ledger.db'}"))
    checked = {day: lines(CliRunner().invoke(main, ["check", "--date", day, "--config", path]).stdout)["prices jaguar"]
               for day in ("2026-11-19", "2026-11-20", "2025-12-31")}
    assert "2026-11-19 is priced with the set from 2026-01-01; the next from 2026-11-20" in checked["2026-11-19"]
    assert "2026-11-20 is priced with the set from 2026-11-20; the next from 2027-01-01" in checked["2026-11-20"]
    assert checked["2025-12-31"].startswith("FAIL  ") and (
        "clusters[0].prices: no price set is in force on 2025-12-31; the first is from 2026-01-01" in checked["2025-12-31"])


def accounts_section(*assignments: dict, **keys) -> dict:
    return {"names": {"G-1": "NSF CNS-2231", "G-2": "NIH R01", "RC": "Research computing"},
            "assignments": list(assignments), "default_account": "RC", "revenue_account": "RC",
            "revenue_object_code": "4500", "default_object_code": "6400", **keys}


@pytest.mark.parametrize("weasyprint_loads", [True, False])
@responses.activate
def test_accounts_lines_name_what_ends_soon_and_the_teams_with_no_account(config, monkeypatch, weasyprint_loads):
    if not weasyprint_loads:  # as an image without Pango, where WeasyPrint's import fails
        monkeypatch.setitem(sys.modules, "weasyprint", None)
    a_store_with_every_series()
    today = date.today()  # the check's today in the config's zone (UTC)
    # alice's own grant ends in 10 days, within the 30 of the default notice (the next one, in 90, is not);
    # robotics' account ended in January
    path = config(accounts=accounts_section(
        {"person": "alice", "account": "G-1", "from": "2026-01-01", "to": (today + timedelta(days=10)).isoformat()},
        {"person": "alice", "account": "G-2", "from": (today + timedelta(days=11)).isoformat(),
         "to": (today + timedelta(days=90)).isoformat()},
        {"team": "robotics", "account": "G-2", "from": "2026-01-01", "to": "2026-01-31"}),
        account_invoices={"issuer": "Research Computing"})
    checked = check(path)
    found = lines(checked.stdout)
    if weasyprint_loads:
        assert found["invoices"].startswith("ok    invoices              WeasyPrint lays out the invoices per account "
                                            "as PDF (a test page: ")
    else:
        assert found["invoices"].startswith("FAIL  invoices              cannot lay out the invoices as PDF: "
                                            "WeasyPrint does not load (")
        assert checked.exit_code == 2
    assert found["accounts"].startswith("ok    ")
    assert "3 accounts, 3 assignments: percentages add up to 100 on every day, none overlapping" in found["accounts"]
    assert found["accounts expiring"].startswith("WARN  ")
    assert (f"1 ending within 30 days: person alice on G-1 (NSF CNS-2231, 100 %) last charged "
            f"{today + timedelta(days=10)}") in found["accounts expiring"]
    assert found["accounts today"].startswith("WARN  ")
    assert (f"1 of 1 teams have no account valid on {today}, so their charges go to the default account RC unless "
            f"a namespace's or person's does: robotics") in found["accounts today"]


def test_accounts_lines_say_all_is_well_and_refuse_percentages_of_another_source(write_config, tmp_path):
    (tmp_path / "people.ldif").write_text(LDIF)
    path = write_config(directory={"ldif": str(tmp_path / "people.ldif")},
                        accounts=accounts_section({"team": "robotics", "account": "G-1", "from": "2026-01-01"}))
    loaded = load_config(path)
    section = loaded.accounts
    assert accounts_expiring(section, date(2026, 11, 29)) == "none ending within 30 days (accounts.expiry_notice_days)"
    assert accounts_today(loaded, section, date(2026, 11, 29)) == "all 1 teams have an account valid on 2026-11-29"
    # assignments the config would refuse, as a source other than the config could hand them on
    uneven = section.model_copy(update={"assignments": [
        section.assignments[0].model_copy(update={"percent": Decimal(60)})]})
    with pytest.raises(CheckFailure, match=r"team robotics's accounts add up to 60 % on 2026-01-01"):
        accounts_consistent(uneven)


@responses.activate
def test_the_coldfront_line_counts_the_allocations_that_pay_and_their_accounts(write_config, tmp_path, monkeypatch):
    monkeypatch.setenv("COLDFRONT_TOKEN", "t0ken")
    (tmp_path / "people.ldif").write_text(LDIF)
    site = "https://coldfront.test"
    config = load_config(write_config(directory={"ldif": str(tmp_path / "people.ldif")}, accounts=accounts_section(),
                                      coldfront={"url": site, "token_env": "COLDFRONT_TOKEN",
                                                 "namespace_attribute": "Kubernetes namespace",
                                                 "account_attribute": "Account"}))
    assert config.accounts is not None
    responses.get(f"{site}/api/projects/", json=[{"id": 1, "title": "Holography", "pi": "cgray"}])
    responses.get(f"{site}/api/allocations/?allocation_attributes=true", json=[{
        "id": 4, "project": "Holography", "status": "Active", "allocation_attributes": [
            {"allocation_attribute_type": "Kubernetes namespace", "value": "robotics-sim"},
            {"allocation_attribute_type": "Account", "value": "G-1"},
            {"allocation_attribute_type": "Account", "value": "G-2"}]}])
    assert coldfront_allocations(config, config.accounts) == (
        f"ColdFront {site}: 1 allocations pay for 1 namespaces and teams, charged to 2 accounts, all in accounts.names")


def test_the_accounts_directory_line_counts_what_the_directory_charges(write_config, tmp_path):
    (tmp_path / "people.ldif").write_text(LDIF + "departmentNumber: G-1\ndepartmentNumber: G-2\n")  # robotics' entry
    config = load_config(write_config(directory={"ldif": str(tmp_path / "people.ldif"),
                                                 "teams": {"accounts_attribute": "departmentNumber"}},
                                      accounts=accounts_section()))
    assert config.accounts is not None
    assert accounts_named(config, config.accounts) == (
        "1 teams and people charged to 2 accounts by the directory's teams.accounts_attribute departmentNumber, all in "
        "accounts.names")


def test_allocations_line_names_a_cluster_that_weighs_no_su_and_fails_what_the_config_would_refuse(write_config):
    weighed = {**MINIMAL_CONFIG["clusters"][0], "prices": [
        {"from": "2026-01-01", "service_units": {"price": 0.12, "weights": {"gpu": 10}}},
        {"from": "2026-12-01", "cpu_core_hour": 0.03, "memory_gib_hour": 0.004, "gpu_hour": 2.7}]}
    su = {"account": "G-1", "from": "2026-11-01", "to": "2026-11-30", "service_units": 10_000}
    accounts = accounts_section({"team": "robotics", "account": "G-1", "from": "2026-01-01"})
    loaded = load_config(write_config(clusters=[weighed], accounts=accounts, allocations=[su]))
    assert allocations_drawable(loaded, loaded.accounts) == (
        "1 allocations, each of a known account, none overlapping, every one of SU weighed everywhere")
    # the same allocation running into December, priced without SU
    into_december = load_config(write_config(clusters=[weighed], accounts=accounts,
                                             allocations=[{**su, "to": "2026-12-31"}]))
    with pytest.raises(CheckWarning, match=r"G-1's allocation of 2026-11-01 to 2026-12-31 is of SU and cluster "
                                           r"jaguar has price sets without service_units in its period"):
        allocations_drawable(into_december, into_december.accounts)
    # allocations the config would refuse, as a source other than the config could hand them on
    twice = loaded.model_copy(update={"allocations": [loaded.allocations[0], loaded.allocations[0].model_copy(
        update={"account": "G-9"})] * 2})
    with pytest.raises(CheckFailure, match=r"allocations\[1\].account 'G-9' is not in accounts.names.*allocations\[2\] "
                                           r"gives account G-1 an allocation from 2026-11-01"):
        allocations_drawable(twice, loaded.accounts)


ROBOTICS = {"team": "robotics", "account": "G-1", "from": "2026-01-01"}
PREPAID = {"account": "G-1", "from": "2026-11-01", "to": "2026-11-30", "amount": 100}
# each a config `billing run` refuses (exit 2, the ledger untouched); the first none, as a control
ACCOUNTS_PARITY = {
    "as it should be": {"accounts": accounts_section(ROBOTICS), "allocations": [PREPAID]},
    "a team in another case": {"accounts": accounts_section({**ROBOTICS, "team": "Robotics"})},
    "a team the directory does not hold": {"accounts": accounts_section({**ROBOTICS, "team": "visoin"})},
    "a person the directory does not hold": {"accounts": accounts_section({"person": "zed", "account": "G-1",
                                                                             "from": "2026-01-01"})},
    "a namespace in capitals": {"accounts": accounts_section({"namespace": "Robotics-Sim", "account": "G-1",
                                                               "from": "2026-01-01"})},
    "an unknown account": {"accounts": accounts_section({**ROBOTICS, "account": "G-9"})},
    "an account in another case": {"accounts": accounts_section({**ROBOTICS, "account": "g-1"})},
    "an account id YAML reads as a number": {"accounts": accounts_section({**ROBOTICS, "account": 5349})},
    "two ids differing in case": {"accounts": accounts_section(ROBOTICS, names={"G-1": "NSF", "g-1": "NSF",
                                                                                 "RC": "Research computing"})},
    "valid from after valid to": {"accounts": accounts_section({**ROBOTICS, "to": "2025-12-31"})},
    "percentages adding to 99.9999": {"accounts": accounts_section(
        {**ROBOTICS, "percent": "33.3333"}, {**ROBOTICS, "account": "G-2", "percent": "33.3333"},
        {**ROBOTICS, "account": "RC", "percent": "33.3333"})},
    "a percentage of 99.999999": {"accounts": accounts_section({**ROBOTICS, "percent": 99.999999})},
    "a percentage NaN": {"accounts": accounts_section({**ROBOTICS, "percent": "NaN"})},
    "an allocation of an unknown account": {"accounts": accounts_section(ROBOTICS),
                                            "allocations": [{**PREPAID, "account": "NIH"}]},
    "an allocation ending before it starts": {"accounts": accounts_section(ROBOTICS),
                                              "allocations": [{**PREPAID, "to": "2026-10-31"}]},
    "an allocation of 1e400": {"accounts": accounts_section(ROBOTICS), "allocations": [{**PREPAID, "amount": "1e400"}]},
}


@pytest.mark.parametrize("case", list(ACCOUNTS_PARITY))
@responses.activate
def test_check_fails_exactly_where_the_run_refuses_an_accounts_config(config, tmp_path, monkeypatch, case):
    a_store_with_every_series()
    stub_collection(monkeypatch)
    path = config(output_dir=str(tmp_path / "reports"), **ACCOUNTS_PARITY[case])
    checked = check(path)
    run = CliRunner().invoke(main, ["run", "--date", "2026-11-17", "--config", path])
    refused = case != "as it should be"
    assert (checked.exit_code, run.exit_code) == ((2, 2) if refused else (0, 0)), (checked.output, run.output)
    assert days_billed(open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}"))[0] == (0 if refused else 1)
    assert not refused or not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


@responses.activate
def test_an_allocation_nothing_draws_on_is_a_warning_of_check_and_of_the_run_alike(config, tmp_path, monkeypatch,
                                                                                   caplog):
    a_store_with_every_series()
    stub_collection(monkeypatch)
    today = date.today()  # the check's today in the config's zone (UTC), as the run's day below
    held = {**PREPAID, "account": "G-2", "from": (today - timedelta(days=1)).isoformat(),
            "to": (today + timedelta(days=1)).isoformat()}  # robotics is charged to G-1 alone
    path = config(output_dir=str(tmp_path / "reports"), accounts=accounts_section(ROBOTICS), allocations=[held])
    said = (f"allocations[0] (G-2's allocation of {held['from']} to {held['to']}): no assignment, directory entry or "
            f"ColdFront allocation charges account G-2 on {{}}, so nothing draws on it: assign the account, or correct "
            f"the allocation's")
    checked = check(path)
    assert checked.exit_code == 0 and lines(checked.stdout)["accounts today"].startswith("WARN  ")
    assert said.format(today) in lines(checked.stdout)["accounts today"]
    run = CliRunner().invoke(main, ["run", "--date", str(today - timedelta(days=1)), "--config", path])
    assert run.exit_code == 0, run.output
    assert f"ALLOCATION NOT DRAWN: {said.format(today - timedelta(days=1))}" in caplog.messages


@responses.activate
def test_a_namespace_no_cluster_billed_is_a_warning_of_check_and_of_the_run_alike(config, tmp_path, monkeypatch,
                                                                                 caplog):
    """The stubbed night bills namespace alice: an assignment of `alcie` is a typo that would charge nothing."""
    a_store_with_every_series()
    stub_collection(monkeypatch)
    today = date.today()  # the check's today in the config's zone (UTC)
    path = config(output_dir=str(tmp_path / "reports"), accounts=accounts_section(
        ROBOTICS, {"namespace": "alcie", "account": "G-2", "from": "2026-01-01"},
        {"namespace": "alice", "account": "G-2", "from": "2026-01-01"}))
    said = ("accounts.assignments[1].namespace: no cluster has billed a namespace 'alcie' (the closest: {}): correct "
            "it if it is a typo; until a cluster bills it, the assignment charges nothing")
    before = lines(check(path).stdout)["accounts namespaces"]
    assert before.startswith("ok    ") and "no day billed yet: the namespaces are looked up once one is" in before
    run = CliRunner().invoke(main, ["run", "--date", str(today - timedelta(days=1)), "--config", path])
    assert run.exit_code == 0, run.output
    assert f"ACCOUNT NAMESPACE NOT BILLED: {said.format('alice')}" in caplog.messages
    checked = check(path)
    assert checked.exit_code == 0 and lines(checked.stdout)["accounts namespaces"].startswith("WARN  ")
    assert said.format("alice") in lines(checked.stdout)["accounts namespaces"]
