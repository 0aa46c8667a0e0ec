"""Faults and bad input, end to end through `billing run`, with misbehaving stand-ins.

Prometheus is a real HTTP server on loopback that answers badly on purpose
(so urllib3's real retries and timeouts run); the ledger is a real SQLite
file, locked by a real second process. Each fault test first records a
previous run of the day and checks that the failed run left it exactly as it
was, exited 1 and said one sentence naming the cause. Faults of real servers
(Prometheus stopped, PostgreSQL stopped, SIGTERM, concurrent runs) are in
tests/integration/test_faults.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import date

import pandas as pd
import pytest
from click.testing import CliRunner

import billing.collect.day
from billing import frames
from billing.charge.bill import DayBill
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from tests.helpers.config import MINIMAL_CONFIG, stub_node_metrics
from tests.helpers.faults import (
    EMPTY_ANSWER,
    Reply,
    every_family,
    failure_sentence,
    ledger_state,
    silent_server,
    stub_server,
)
from tests.helpers.jobs import LDIF

DAY = date(2026, 11, 20)

# The previous run of the day, which every failed run must leave as it is.
PREVIOUS = pd.DataFrame(
    [("jaguar", "alice", "robotics", "alice", "gpu", "", 3.0, 1.0, 3.0, 3.0),
     ("jaguar", "team-robotics", "robotics", None, "cpu", "", 100.0, 0.01, 1.0, 1.0)],
    columns=frames.ROWS.columns,
)

# What the run collects when collection is not under test: a successful write would change the ledger.
USAGE = pd.DataFrame([("alice", "gpu", "", "", "", 10.0)], columns=frames.USAGE.columns)


@pytest.fixture
def ledger_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    replace_day(open_ledger(url), DAY, DayBill(PREVIOUS), "EUR")
    return url


@pytest.fixture
def configure(write_config, tmp_path, ledger_url):
    """configure(prometheus={...}, **top-level keys) -> path of a config on the previous run's ledger."""
    (tmp_path / "directory.ldif").write_text(LDIF)

    def configure(prometheus: dict | None = None, **changes) -> str:
        cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": prometheus or {"url": "http://127.0.0.1:9"}}
        settings = {"clusters": [cluster], "database": ledger_url, "output_dir": str(tmp_path / "reports"),
                    "directory": {"ldif": str(tmp_path / "directory.ldif")}, **changes}
        return str(write_config(**settings))

    return configure


@pytest.fixture
def fixed_usage(monkeypatch):
    """Collection succeeds with USAGE, for faults that come after it."""
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *_: ClusterUsage(context.cluster.name, USAGE, 1, 1, 1.0))
    stub_node_metrics(monkeypatch)


def run(config: str, day: str = str(DAY)):
    return CliRunner().invoke(main, ["run", "--date", day, "--config", config])


def assert_failed_and_kept(result, ledger_url: str, before: dict, *phrases: str) -> str:
    sentence = failure_sentence(result.exit_code, result.output)
    for phrase in phrases:
        assert phrase in sentence
    assert ledger_state(ledger_url) == before
    return sentence


def test_a_previous_run_is_what_the_faults_keep(ledger_url):
    state = ledger_state(ledger_url)
    assert [row[1:11] for row in state["chargeback"]] == [
        ("jaguar", "alice", "robotics", "alice", "gpu", "", 3.0, 1.0, 3.0, "EUR"),
        ("jaguar", "team-robotics", "robotics", None, "cpu", "", 100.0, 0.01, 1.0, "EUR"),
    ]
    assert [(row[0], row[2]) for row in state["completed_days"]] == [(DAY, 2)]


# --- Prometheus


def test_a_prometheus_that_never_answers_fails_after_the_configured_timeout(configure, ledger_url):
    before = ledger_state(ledger_url)
    with silent_server() as url:
        started = time.monotonic()
        result = run(configure({"url": url, "timeout": "0.5s", "retries": 1}))
        elapsed = time.monotonic() - started
    assert_failed_and_kept(
        result, ledger_url, before,
        f"Prometheus of cluster jaguar at {url} did not answer within the 0.5 s timeout in 2 attempt(s)",
        "; clusters[0].prometheus.timeout and retries allow it more",
    )
    assert elapsed < 10  # the configured 0.5 s per attempt, not the default 120 s


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_half_way_through_the_day_fails_after_the_retries(configure, ledger_url, status):
    before = ledger_state(ledger_url)
    # The first six queries are answered, so the day's first chunks are under way; then the server fails.
    with stub_server(every_family(lambda n, path, body: Reply() if n <= 6 else Reply(b'{"status":"error"}', status))) as server:
        result = run(configure({"url": server.url, "retries": 1}))
    assert_failed_and_kept(
        result, ledger_url, before,
        f"Prometheus of cluster jaguar at {server.url} kept failing after retries (too many {status} error responses)"
        ": the server behind clusters[0].prometheus.url is failing or overloaded; clusters[0].prometheus.retries (1) "
        "sets how often a query is asked again, with backoff, and clusters[0].prometheus.timeout (120 s) how long "
        "each attempt may take",
    )
    assert server.requests > 6 + 1  # a failed query was asked again


def test_once_a_chunk_failed_the_other_chunks_are_not_asked(configure, ledger_url):
    """A 15 s step cuts the day into 16 chunks; without stopping, each would be asked (and retried) in vain."""
    with stub_server(every_family(lambda n, path, body: Reply(b'{"status":"error"}', 503, delay=0.3))) as server:
        result = run(configure({"url": server.url, "retries": 0}, step="15s"))
    failure_sentence(result.exit_code, result.output)
    # The two chunks in flight, and at most one more that each worker took before the failure was seen.
    assert server.requests <= 4


@pytest.mark.parametrize(
    "reply, cause",
    [
        (Reply(b"<html><body>Sign in to continue</body></html>"), "answered something that is not a Prometheus JSON result"),
        (Reply(b'{"status":"success","data":{"result":null}}'), "answered something that is not a Prometheus JSON result"),
        (Reply(b'{"status":"success","data":{"result":[{"value":[1,"2"]}]}}'), "answered something that is not a Prometheus JSON result"),
        (Reply(EMPTY_ANSWER[:20], length=len(EMPTY_ANSWER)), "failed to answer (Connection broken: IncompleteRead"),
        (Reply(b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"alice"},'
               b'"value":[1795132800,"abc"]}]}}'),
         "answered a sample value that is no number ('abc', series {'namespace': 'alice'})"),
    ],
    ids=["html", "null-result", "series-without-labels", "cut-off", "value-not-a-number"],
)
def test_an_answer_that_is_not_prometheus_json_half_way_fails_the_run(configure, ledger_url, reply, cause):
    before = ledger_state(ledger_url)
    with stub_server(every_family(lambda n, path, body: Reply() if n <= 5 else reply)) as server:
        result = run(configure({"url": server.url}))
    assert_failed_and_kept(result, ledger_url, before, f"Prometheus of cluster jaguar at {server.url}", cause)


def test_an_instant_vector_answering_a_range_query_fails_naming_the_cluster(configure, ledger_url):
    vector = Reply(b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}')
    before = ledger_state(ledger_url)
    with stub_server(every_family(lambda n, path, body: vector if "query_range" in path else Reply())) as server:
        result = run(configure({"url": server.url}))
    assert_failed_and_kept(result, ledger_url, before, f"Prometheus of cluster jaguar at {server.url}",
                           "answered a range query with an instant vector")


def test_an_answer_larger_than_the_limit_is_refused_before_it_is_read_whole(configure, ledger_url):
    """A 105 MB answer took a run to 1.95 GB against the CronJob's 2 Gi; `max_answer_mib` bounds one answer."""
    series = b'{"metric":{"namespace":"n%d"},"value":[1795132800,"1"]}'
    huge = b'{"status":"success","data":{"resultType":"vector","result":[' + b",".join(
        series % i for i in range(40_000)) + b"]}}"  # about 2 MiB
    before = ledger_state(ledger_url)
    with stub_server(every_family(lambda n, path, body: Reply(huge) if n > 5 else Reply())) as server:
        result = run(configure({"url": server.url, "max_answer_mib": 1}))
    assert_failed_and_kept(result, ledger_url, before, f"Prometheus of cluster jaguar at {server.url}",
                           "answered more than the 1 MiB one answer may take (clusters[0].prometheus.max_answer_mib)")


@pytest.mark.parametrize(
    "answer, reason",
    [
        (b'{"status":"success","data":{"resultType":"vector","result":[]},'
         b'"warnings":["remote_read: error sending request: connection refused"]}',
         "answered only in part (remote_read: error sending request: connection refused)"),
        (b'{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}',
         "answered only in part (isPartial is true)"),
    ],
    ids=["warnings", "victoriametrics-isPartial"],
)
def test_an_answer_that_says_it_is_incomplete_is_refused(configure, ledger_url, answer, reason):
    before = ledger_state(ledger_url)
    with stub_server(every_family(lambda n, path, body: Reply() if n <= 3 else Reply(answer))) as server:
        result = run(configure({"url": server.url}))
    sentence = assert_failed_and_kept(result, ledger_url, before, f"at {server.url} {reason}")
    assert "the bill would be too low" in sentence


# --- the ledger


@pytest.fixture
def locking_process(ledger_url):
    """locking_process(mode) -> a second process holding `BEGIN <mode>` on the ledger until stopped."""
    started = []

    def lock(mode: str) -> subprocess.Popen:
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
             f"db.execute('BEGIN {mode}'); db.execute('DELETE FROM completed_days WHERE 0'); "
             "print('locked', flush=True); sys.stdin.read()",
             ledger_url.removeprefix("sqlite:///")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        started.append(holder)
        assert holder.stdout.readline() == "locked\n"
        return holder

    yield lock
    for holder in started:
        holder.stdin.close()
        holder.wait(10)


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE"])
def test_sqlite_locked_by_another_writer_longer_than_the_busy_timeout(
    configure, ledger_url, fixed_usage, locking_process, mode
):
    before = ledger_state(ledger_url)
    holder = locking_process(mode)
    result = run(configure(database=f"{ledger_url}?timeout=0.3"))
    holder.stdin.close()  # an exclusive lock keeps readers out too: compare once it is gone
    holder.wait(10)
    assert_failed_and_kept(
        result, ledger_url, before,
        f"database {ledger_url}?timeout=0.3", "database is locked (another process held the database longer than "
        "the busy timeout; ?timeout=SECONDS on the URL waits longer)",
    )
    assert run(configure()).exit_code == 0  # the lock gone, the same run succeeds


def test_a_sqlite_file_that_is_not_a_database(configure, fixed_usage, tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database\n" * 100)
    result = run(configure(database=f"sqlite:///{garbage}"))
    sentence = failure_sentence(result.exit_code, result.output)
    assert f"database sqlite:///{garbage}" in sentence and "file is not a database" in sentence
    assert garbage.read_bytes() == b"this is not a database\n" * 100


# --- reports


def test_an_output_dir_that_cannot_be_written_fails_before_anything_is_collected(
    configure, ledger_url, tmp_path, monkeypatch
):
    before = ledger_state(ledger_url)
    (tmp_path / "a-file").write_text("not a directory")
    collected = []
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda *args: collected.append(args))
    result = run(configure(output_dir=str(tmp_path / "a-file" / "reports")))
    assert_failed_and_kept(
        result, ledger_url, before, f"cannot write the reports to output_dir {tmp_path / 'a-file' / 'reports'}",
        "Not a directory",
    )
    assert collected == []


# --- bad input


def cluster(**prometheus) -> dict:
    return {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": "http://127.0.0.1:9", **prometheus}}


def prices(**changes) -> list[dict]:
    return [{**MINIMAL_CONFIG["clusters"][0], "prices": {**MINIMAL_CONFIG["clusters"][0]["prices"], **changes}}]


def recovered(monthly_cost: float) -> list[dict]:
    return [{**MINIMAL_CONFIG["clusters"][0], "recover": {"monthly_cost": monthly_cost}}]


@pytest.mark.parametrize(
    "text, cause",
    [
        ("timezone: UTC\nclusters: [\n  name: x\n", "is not valid YAML at line 4: expected ',' or ']'"),
        ("timezone: UTC\n\tcurrency: EUR\n", "is not valid YAML at line 2: found character '\\t'"),
        ("timezone: UTC: EUR\n", "is not valid YAML at line 1: mapping values are not allowed here"),
        ("{{{", "is not valid YAML at line 1"),
        ("", "is empty"),
        ("# only a comment\n", "is empty"),
        ("- a\n- list\n", "must hold a mapping of keys, not a list"),
        ("hello\n", "must hold a mapping of keys, not a text"),
        ("currency: EUR\ntimezone: UTC\ncurrency: USD\n", "is not valid YAML at line 3: the key 'currency' appears twice"),
        ("clusters:\n- name: a\n  prices: {gpu_hour: 1, gpu_hour: 3}\n",
         "is not valid YAML at line 3: the key 'gpu_hour' appears twice"),
    ],
    ids=["unclosed", "tab", "two-colons", "braces", "empty", "comment-only", "list", "scalar", "duplicate-key",
         "duplicate-nested-key"],
)
def test_malformed_yaml_is_a_config_error_naming_the_file(tmp_path, text, cause):
    path = tmp_path / "billing.yaml"
    path.write_text(text)
    result = run(str(path))
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"billing: config file {path} {cause}")


def test_a_config_file_that_is_not_text(tmp_path):
    path = tmp_path / "billing.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01binary")
    result = run(str(path))
    assert result.exit_code == 2
    assert result.output.strip() == f"billing: config file {path} is not UTF-8 text (byte 0xff at position 0)"


@pytest.mark.parametrize(
    "changes, key, words",
    [
        ({"clusters": "jaguar"}, "clusters", "valid list"),
        ({"clusters": [cluster(retries="many")]}, "clusters[0].prometheus.retries", "valid integer"),
        ({"clusters": [cluster(retries=-1)]}, "clusters[0].prometheus.retries", "greater than or equal to 0"),
        ({"clusters": [cluster(timeout=True)]}, "clusters[0].prometheus.timeout", "duration"),
        ({"clusters": [cluster(timeout=float("inf"))]}, "clusters[0].prometheus.timeout", "finite"),
        ({"step": float("inf")}, "step", "finite"),
        ({"step": float("nan")}, "step", "finite"),
        ({"clusters": prices(gpu_hour=float("inf"))}, "clusters[0].prices.gpu_hour", "finite"),
        ({"clusters": prices(gpu_models={"H100": float("nan")})}, "clusters[0].prices.gpu_models.H100", "finite"),
        ({"clusters": prices(cpu_core_hour=[1])}, "clusters[0].prices.cpu_core_hour", "valid number"),
        # money keys besides prices: what a cluster costs in a month, a team's budget
        ({"clusters": recovered(float("nan"))}, "clusters[0].recover.monthly_cost", "finite"),
        ({"clusters": recovered(float("inf"))}, "clusters[0].recover.monthly_cost", "finite"),
        ({"clusters": recovered(10**400)}, "clusters[0].recover.monthly_cost", "valid number"),
        ({"clusters": recovered(1e12)}, "clusters[0].recover.monthly_cost", "less than 1000000000000"),
        ({"budgets": {"monthly": {"robotics": float("inf")}}}, "budgets.monthly.robotics", "finite"),
        ({"budgets": {"monthly": {"robotics": 10**400}}}, "budgets.monthly.robotics", "valid number"),
        ({"database": 5}, "database", "valid string"),
        ({"clusters": [{**cluster(), "name": None}]}, "clusters[0].name", "valid string"),
        ({"namespaces": {"overrides": ["a", "b"]}}, "namespaces.overrides", "valid dictionary"),
        ({"email": {"admins": "a@example.org"}}, "email.admins", "valid list"),
        ({"directory": "ldap://x"}, "directory", "valid dictionary"),
    ],
)
def test_wrong_types_are_config_errors_naming_the_key(write_config, changes, key, words):
    result = run(str(write_config(**changes)))
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert f"{key}:" in line and words in line and line.startswith("billing: config file ")


@pytest.mark.parametrize(
    "value",
    ["2026-02-30", "2026-13-01", "", "yesterday", "2026-11-20T00:00", "2026-11-20 ", "20261120", "2026-W47-5",
     "\uff12\uff10\uff12\uff16-11-20", "9999-12-31", "0001-01-01", "1969-12-31", "2026-11-20\nrm -rf /"],
)
def test_an_invalid_date_is_a_usage_error(write_config, value):
    result = run(str(write_config()), day=value)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--date': {value!r} is not" in result.output
    assert "Traceback" not in result.output


def test_a_day_that_has_not_ended_is_billed_with_a_warning(configure, fixed_usage, caplog):
    with caplog.at_level("WARNING"):
        result = run(configure(), day="2999-01-01")
    assert result.exit_code == 0, result.output
    assert "2999-01-01 has not ended yet in UTC: its bill is partial until the day is run again" in caplog.text


@pytest.mark.parametrize("gpu_hour, words", [
    (True, "clusters[0].prices.gpu_hour: expected a number, got true"),
    (1e25, "clusters[0].prices.gpu_hour: Input should be less than 1000000000"),
    (1e308, "clusters[0].prices.gpu_hour: Input should be less than 1000000000"),
])
def test_a_price_money_cannot_be_is_refused_and_the_ledger_kept_as_it_was(configure, fixed_usage, ledger_url, gpu_hour, words):
    before = ledger_state(ledger_url)  # computed_at included: the rows are not even rewritten
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prices": {**MINIMAL_CONFIG["clusters"][0]["prices"], "gpu_hour": gpu_hour}}
    result = run(configure(clusters=[cluster]))
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("billing: config file ") and line.endswith(words)
    assert ledger_state(ledger_url) == before
    assert run(configure()).exit_code == 0 and ledger_state(ledger_url) != before  # the same run with a real price writes


def test_a_storage_class_without_a_price_refuses_the_day_naming_cluster_class_and_keys(configure, ledger_url, monkeypatch):
    before = ledger_state(ledger_url)
    archived = pd.concat([USAGE, pd.DataFrame([("alice", "storage", "archive", "", "", 2400.0)],
                                              columns=frames.USAGE.columns)], ignore_index=True)
    monkeypatch.setattr(billing.collect.day, "collect_cluster",
                        lambda context, *_: ClusterUsage(context.cluster.name, archived, 1, 1, 1.0))
    stub_node_metrics(monkeypatch)
    assert_failed_and_kept(
        run(configure()), ledger_url, before,
        f"cluster jaguar on {DAY}: storage class archive has no price: add it to clusters[0].prices.storage_classes, "
        "or set clusters[0].prices.storage_gib_hour for every class not listed; nothing was billed")
    prices = {**MINIMAL_CONFIG["clusters"][0]["prices"], "storage_classes": {"archive": 0.00001}}
    assert run(configure(clusters=[{**MINIMAL_CONFIG["clusters"][0], "prices": prices,
                                    "prometheus": {"url": "http://127.0.0.1:9"}}])).exit_code == 0


@pytest.mark.parametrize("text, words", [
    ("a: " + "[" * 5000 + "]" * 5000, "nests mappings and lists more than 50 levels deep (at line 1)"),
    ("# padding\n" * 5_000_000, "is larger than 1024 KiB; a billing config is a few kilobytes"),
], ids=["5,000 levels deep", "50 MB"])
def test_a_config_too_deep_or_too_large_is_refused_and_the_ledger_kept_as_it_was(tmp_path, ledger_url, text, words):
    before = ledger_state(ledger_url)
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    result = run(str(path))
    assert result.exit_code == 2 and result.output.strip() == f"billing: config file {path} {words}"
    assert ledger_state(ledger_url) == before
