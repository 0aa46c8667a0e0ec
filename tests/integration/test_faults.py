"""Faults of real servers and real processes, and bad names through a real Prometheus.

Every fault ends with exit status 1, one sentence naming the cause and the
ledger exactly as the previous run left it (compared row by row, computed_at
included). The runs are `billing run`, in-process (CliRunner) where a
fault has to be timed from inside, otherwise as processes of their own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import date
from email import message_from_bytes, policy
from html.parser import HTMLParser
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import psycopg
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import text

import billing.collect.asking
import billing.collect.day
import billing.collect.usage
from billing import frames
from billing.charge.bill import DayBill
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.days import billing_day
from billing.ledger.database import LedgerError, open_ledger, transaction
from billing.ledger.write import replace_day
from fixtures.ksm import GIB, GPU_PRODUCT_LABEL, H100, Cluster, Container, Node, Pod, World, make_world
from fixtures.servers import free_port, start_postgres
from tests.helpers.config import stub_node_metrics
from tests.helpers.faults import failure_sentence, forward_to, ledger_state, stub_server
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import PRICES, write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
WORKTREE = Path(__file__).resolve().parents[2]
TERMINATED = "billing: terminated (SIGTERM); the ledger keeps its previous rows for the day being run"


@pytest.fixture(scope="module")
def world() -> World:
    return make_world(5, DAY.start.timestamp(), pods=40, clusters=("jaguar",))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("postgres_url")


def configure(tmp_path: Path, database: str, prometheus_url: str, **changes) -> str:
    """test_job_prometheus' config for cluster jaguar, with top-level keys replaced."""
    path = Path(write_config(tmp_path, database, {"jaguar": prometheus_url}))
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **changes}))
    return str(path)


def run(config: str):
    return CliRunner().invoke(main, ["run", "--date", str(DAY.date), "--config", config])


def billing_process(config: str) -> subprocess.Popen:
    """`billing run` of the day as a process of its own, as a CronJob starts it."""
    return subprocess.Popen(
        [sys.executable, "-c", "from billing.cli import main; main()", "run", "--date", str(DAY.date),
         "--config", config],
        cwd=WORKTREE, env={**os.environ, "PYTHONPATH": str(WORKTREE)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(condition, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def finish(process: subprocess.Popen, timeout: float = 180.0) -> tuple[int, str]:
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


# --- Prometheus


def test_prometheus_stopped_half_way_through_a_run(prometheus_server, world, tmp_path, monkeypatch):
    server = prometheus_server(world)
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = configure(tmp_path, ledger, server.url)
    assert run(config).exit_code == 0
    before = ledger_state(ledger)

    # One chunk of the day at a time, and the server shut down once the first one is answered.
    monkeypatch.setattr(billing.collect.asking, "PARALLEL_QUERIES", 1)
    real_chunk = billing.collect.usage._chunk_usage

    def then_stop(*args):
        answered = real_chunk(*args)
        server.stop()
        return answered

    monkeypatch.setattr(billing.collect.usage, "_chunk_usage", then_stop)
    result = run(config)

    sentence = failure_sentence(result.exit_code, result.output)
    assert sentence == (f"billing: Prometheus of cluster jaguar at {server.url} is unreachable (Connection refused); "
                        "the store is down or clusters[0].prometheus.url is wrong")
    assert ledger_state(ledger) == before


def test_warnings_of_a_remote_read_store_that_is_down_are_refused(prometheus_server, world, tmp_path):
    """Long-term storage behind remote_read is down: Prometheus answers `success`, empty, with a warning.

    Its own TSDB holds only another day, as when an old day is back-filled past local retention;
    billing from the answer would record a day of zero cost."""
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert run(configure(tmp_path, ledger, prometheus_server(world).url)).exit_code == 0
    before = ledger_state(ledger)

    month_ago = make_world(5, DAY.start.timestamp() - 30 * 86400, pods=5, day_seconds=3600, margin=0)
    store = f"http://127.0.0.1:{free_port()}/api/v1/read"
    server = prometheus_server(month_ago, extra_config=f"remote_read:\n  - url: {store}\n    read_recent: true\n")
    result = run(configure(tmp_path, ledger, server.url))

    sentence = failure_sentence(result.exit_code, result.output)
    assert sentence.startswith(f"billing: Prometheus of cluster jaguar at {server.url} answered only in part "
                               f'(remote_read: error sending request: Post "{store}": ')
    assert "connection refused" in sentence and "so the bill would be too low; refusing it" in sentence
    assert ledger_state(ledger) == before


def test_a_query_over_the_sample_limit_of_prometheus_is_its_reason_in_one_sentence(prometheus_server, world, tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert run(configure(tmp_path, ledger, prometheus_server(world).url)).exit_code == 0
    before = ledger_state(ledger)
    server = prometheus_server(world, extra_args=("--query.max-samples=100",))

    result = run(configure(tmp_path, ledger, server.url))

    sentence = failure_sentence(result.exit_code, result.output)
    assert sentence.startswith(f"billing: Prometheus of cluster jaguar at {server.url} rejected the query ")
    assert sentence.endswith(": HTTP 422: query processing would load too many samples into memory in query execution")
    assert ledger_state(ledger) == before


def nan_world() -> World:
    """Four clusters, each with one pod whose CPU request is impossible, next to a normal one."""
    node = Node("node-1", ((DAY.start.timestamp() - 86400, {"label_kubernetes_io_hostname": "node-1"}),),
                {"cpu": 8.0, "memory": 64.0 * GIB})  # what the preflight needs besides the pods

    def pod(name: str, cpu: float, index: int) -> Pod:
        start = DAY.start.timestamp() - 3600
        return Pod(name, f"{name}-pod", f"00000000-0000-4000-8000-{index:012d}", "node-1", start,
                   ((start, "Running"),), math.inf, (Container("main", cpu, GIB),))

    clusters = tuple(
        Cluster(name, (node,), (pod("alice", 1.0, 2 * i), pod("broken", value, 2 * i + 1)), {"cluster": name})
        for i, (name, value) in enumerate([("nan", math.nan), ("inf", math.inf), ("negative", -1.0), ("huge", 1e11)])
    )
    return World(clusters, DAY.start.timestamp() - 3600, DAY.end.timestamp() + 600)


def refused_run_of(cluster: str, world: World, prometheus_server, tmp_path: Path, **keys: object) -> str:
    """The failure sentence of a run of `cluster` of `world` (with `keys` on it), which must leave the ledger as it
    was."""
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    replace_day(open_ledger(ledger), DAY.date, DayBill(PREVIOUS), "USD")
    before = ledger_state(ledger)
    server = prometheus_server(world)
    path = Path(configure(tmp_path, ledger, server.url))
    settings = yaml.safe_load(path.read_text())
    settings["clusters"][0].update(name=cluster, prometheus={"url": server.url, "selector": f'cluster="{cluster}"'},
                                   prices=PRICES["jaguar"], **keys)
    path.write_text(yaml.safe_dump(settings))

    result = run(str(path))

    assert ledger_state(ledger) == before
    return failure_sentence(result.exit_code, result.output)


@pytest.mark.parametrize("cluster, shown", [("nan", "NaN"), ("inf", "+Inf"), ("negative", "-1"), ("huge", "1e+11")])
def test_impossible_requests_stored_in_prometheus_are_refused(prometheus_server, tmp_path, cluster, shown):
    # the pod's request as the store answers it (billing/collect/figures.py): 1e11 cores is more than any node has
    sentence = refused_run_of(cluster, nan_world(), prometheus_server, tmp_path)
    assert sentence.startswith(f'billing: cluster {cluster} on {DAY.date}: kube_pod_container_resource_requests'
                               f'{{namespace="broken", pod="broken-pod", resource="cpu", ')
    assert f"}} is {shown}, which a pod's request" in sentence and sentence.endswith("; nothing was billed")


def broken_node_world() -> World:
    """Four clusters, each with a node whose allocatable CPU is impossible, and a pod of 1 core on it."""

    def cluster(index: int, name: str, cpu: float) -> Cluster:
        node = Node("node-1", ((DAY.start.timestamp() - 86400, {"label_kubernetes_io_hostname": "node-1"}),),
                    {"cpu": cpu, "memory": 64 * GIB})
        start = DAY.start.timestamp() - 3600
        pod = Pod("alice", "alice-pod", f"00000000-0000-4000-8000-{index:012d}", "node-1", start, ((start, "Running"),),
                  math.inf, (Container("main", 1.0, GIB),))
        return Cluster(name, (node,), (pod,), {"cluster": name})

    values = [("nan", math.nan), ("inf", math.inf), ("negative", -1.0), ("huge", 1e11)]
    return World(tuple(cluster(i, name, cpu) for i, (name, cpu) in enumerate(values)),
                 DAY.start.timestamp() - 3600, DAY.end.timestamp() + 600)


@pytest.mark.parametrize("cluster, shown", [
    ("nan", "NaN"), ("inf", "+Inf"),
    ("negative", "-360"),  # -1 core at the 360 instants of a 6-hour chunk
    ("huge", "3.6e+13"),  # 1e11 cores, more than any node has, at 360 instants
])
def test_impossible_allocatable_capacity_stored_in_prometheus_is_refused(prometheus_server, tmp_path, cluster, shown):
    # the bill needs the capacity where it shares what no pod requested (else it is shown unknown: test_figures_prometheus)
    sentence = refused_run_of(cluster, broken_node_world(), prometheus_server, tmp_path, unrequested="share")
    assert sentence == (
        f'billing: cluster {cluster} on {DAY.date}: kube_node_status_allocatable{{node="node-1", resource="cpu"}} is '
        f"{shown} summed over 360 instants, which a node's allocatable capacity cannot be (a finite number from 0 to "
        "3.6e+07); correct the node's status.allocatable or kube-state-metrics' export of it, then run the day again; "
        "nothing was billed")


# --- the database


PREVIOUS = pd.DataFrame([("jaguar", "alice", "robotics", "alice", "gpu", "", 3.0, 1.0, 3.0, 3.0)], columns=frames.ROWS.columns)


def usage(gpu_hours: float) -> pd.DataFrame:
    return pd.DataFrame([("alice", "gpu", "", "", "", gpu_hours)], columns=frames.USAGE.columns)


@pytest.fixture(scope="module")
def own_postgres():
    """A PostgreSQL of this module's own, which its tests stop and start."""
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture
def outage(own_postgres, tmp_path, monkeypatch):
    """(server, ledger url, config) with a previous run of the day; `collect` calls `during(server)` first."""
    name = own_postgres.create_database()
    ledger = own_postgres.url(name)
    config = configure(tmp_path, ledger, "http://127.0.0.1:9")
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *_: ClusterUsage(context.cluster.name, usage(3.0), 1, 1, 1.0))
    stub_node_metrics(monkeypatch)
    assert run(config).exit_code == 0

    def collect_with(during):
        def collect(context, *_):
            during(own_postgres)
            return ClusterUsage(context.cluster.name, usage(10.0), 1, 1, 1.0)
        monkeypatch.setattr(billing.collect.day, "collect_cluster", collect)

    yield own_postgres, ledger, config, collect_with
    if not own_postgres.process.alive():
        own_postgres.resume()
    own_postgres.drop_database(name)


def test_postgresql_down_when_the_run_starts(outage):
    server, ledger, config, _ = outage
    before = ledger_state(ledger)
    server.halt()
    result = run(config)
    server.resume()
    sentence = failure_sentence(result.exit_code, result.output)
    assert sentence.startswith(f"billing: database {ledger}: opening the ledger failed: connection failed: ")
    assert sentence.endswith(f'connection to server at "127.0.0.1", port {server.port} failed: Connection refused; '
                             "the server is down or the host and port of config key database are wrong")
    assert ledger_state(ledger) == before


def test_postgresql_stopped_while_the_run_collects(outage):
    server, ledger, config, collect_with = outage
    before = ledger_state(ledger)
    collect_with(lambda server: server.halt())
    result = run(config)
    server.resume()
    sentence = failure_sentence(result.exit_code, result.output)
    assert sentence.startswith(f"billing: database {ledger}: writing 2026-11-20 failed, previous rows kept: ")
    assert sentence.endswith("Connection refused; the server is down or the host and port of config key database "
                             "are wrong")
    assert ledger_state(ledger) == before


def test_postgresql_restarted_while_the_run_collects_is_no_fault(outage):
    """The connection opened before the restart is dead; a new one is used for the write."""
    server, ledger, config, collect_with = outage
    collect_with(lambda server: (server.halt(), server.resume()))
    result = run(config)
    assert result.exit_code == 0, result.output
    [row] = ledger_state(ledger)["chargeback"]
    assert row[2:8] == ("alice", "robotics", "alice", "gpu", "", 10.0)


def test_postgresql_connection_lost_in_a_transaction_names_the_key(postgres_url):
    """The server ends the session mid-transaction (an administrator, a failover): pool_pre_ping cannot help."""
    engine = open_ledger(postgres_url)
    with pytest.raises(LedgerError) as failure, transaction(engine, "reading the days") as conn:
        session = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with psycopg.connect(postgres_url.replace("postgresql+psycopg", "postgresql")) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (session,))
        conn.execute(text("SELECT 1"))
    sentence = str(failure.value)
    assert sentence.startswith(f"database {postgres_url}: reading the days failed, nothing changed: ")
    assert sentence.endswith("; the connection to the server of config key database was lost (the server stopped or "
                             "restarted, or the network cut it)")


def waiting_for_locks(database: str) -> int:
    """How many sessions of the database wait for a lock (a row lock, or billing's lock of the day)."""
    with psycopg.connect(database.replace("postgresql+psycopg", "postgresql")) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND wait_event_type = 'Lock'").fetchone()[0]


def lock_the_day(database: str) -> psycopg.Connection:
    """Another session holds the day's completed_days row: a run's write waits for it, inside its transaction."""
    conn = psycopg.connect(database.replace("postgresql+psycopg", "postgresql"))
    conn.execute("SELECT * FROM completed_days WHERE day = %s FOR UPDATE", (DAY.date,))
    return conn


def test_postgresql_locked_longer_than_the_lock_timeout_of_the_url(prometheus_server, world, tmp_path, postgres_url):
    """Another session keeps the day locked (a migration, a session left open): PostgreSQL itself
    waits forever unless the URL sets lock_timeout, as SQLite waits only its busy timeout."""
    server = prometheus_server(world)
    assert run(configure(tmp_path, postgres_url, server.url)).exit_code == 0
    before = ledger_state(postgres_url)

    holder = lock_the_day(postgres_url)
    impatient = f"{postgres_url}?options=-c+lock_timeout%3D500ms"
    result = run(configure(tmp_path, impatient, server.url))
    holder.close()

    assert failure_sentence(result.exit_code, result.output) == (
        f"billing: database {impatient}: writing 2026-11-20 failed, previous rows kept: "
        "canceling statement due to lock timeout"
    )
    assert ledger_state(postgres_url) == before


# --- two runs of the same day at once


def doubled_prices(config: str) -> str:
    """The same config with every price doubled: tells the second run's rows from the first's."""
    path = Path(config).with_name("doubled.yaml")
    settings = yaml.safe_load(Path(config).read_text())
    for cluster in settings["clusters"]:
        prices = cluster["prices"]
        cluster["prices"] = {**{k: 2 * v for k, v in prices.items() if k != "gpu_models"},
                             "gpu_models": {k: 2 * v for k, v in prices.get("gpu_models", {}).items()}}
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def assert_one_run_of_the_day(database: str, first: dict, factor: float) -> None:
    """The ledger holds the day once: the first run's rows, every price and cost times `factor`."""
    now = ledger_state(database)
    assert [row[0] for row in now["completed_days"]] == [DAY.date]
    keys = [row[:7] for row in now["chargeback"]]
    assert len(keys) == len(set(keys)) == len(first["chargeback"])
    expected = {row[:7]: (row[7], row[8] * factor, row[9] * factor) for row in first["chargeback"]}
    for row in now["chargeback"]:
        assert row[7:10] == pytest.approx(expected[row[:7]], rel=1e-12)


def opened_files(pid: int) -> set[str]:
    try:
        return {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return set()


def test_two_runs_of_the_same_day_at_once_on_sqlite(prometheus_server, world, tmp_path):
    """The second run waits for the first's transaction, then replaces its rows."""
    path = tmp_path / "ledger.db"
    ledger = f"sqlite:///{path}?timeout=60"  # the runs wait on purpose here: 5 s may run out on a busy machine
    config = configure(tmp_path, ledger, prometheus_server(world).url)
    assert run(config).exit_code == 0
    first = ledger_state(f"sqlite:///{path}")

    # A reader keeps the first run's commit waiting (SQLite lets a writer commit only without readers).
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN'); db.execute('SELECT count(*) FROM chargeback').fetchall(); "
         "print('reading', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert reader.stdout.readline() == "reading\n"
    one = billing_process(config)
    wait_for(lambda: Path(f"{path}-journal").exists(), "the first run to write")
    two = billing_process(doubled_prices(config))
    wait_for(lambda: str(path) in opened_files(two.pid), "the second run to open the ledger")
    time.sleep(0.5)
    assert one.poll() is None and two.poll() is None  # the first waits for the reader, the second for the first

    reader.stdin.close()
    reader.wait(10)
    assert finish(one)[0] == 0 and finish(two)[0] == 0
    assert_one_run_of_the_day(f"sqlite:///{path}", first, factor=2)


def test_two_runs_of_the_same_day_at_once_on_postgresql(prometheus_server, world, tmp_path, postgres_url):
    """The second run waits for the first's advisory lock of the day, then replaces its rows."""
    config = configure(tmp_path, postgres_url, prometheus_server(world).url)
    assert run(config).exit_code == 0
    first = ledger_state(postgres_url)

    holder = lock_the_day(postgres_url)  # keeps the first run inside its transaction
    one = billing_process(config)
    wait_for(lambda: waiting_for_locks(postgres_url) == 1, "the first run to be inside its write")
    two = billing_process(doubled_prices(config))
    wait_for(lambda: waiting_for_locks(postgres_url) == 2, "the second run to wait")
    assert one.poll() is None and two.poll() is None

    holder.close()
    assert finish(one)[0] == 0 and finish(two)[0] == 0
    assert_one_run_of_the_day(postgres_url, first, factor=2)


# --- SIGTERM


def test_sigterm_in_the_middle_of_a_run_against_a_slow_prometheus(prometheus_server, world, tmp_path):
    """Kubernetes evicts the job's pod: SIGTERM, then SIGKILL after the grace period (30 s by default)."""
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    delay = 0.0
    with stub_server(forward_to(prometheus_server(world).url, lambda: delay)) as slow:
        config = configure(tmp_path, ledger, slow.url)
        assert run(config).exit_code == 0
        before = ledger_state(ledger)

        delay = 1.0  # each query takes a second: the rest of the day would take many more
        asked = slow.requests
        process = billing_process(config)
        wait_for(lambda: slow.requests >= asked + 3, "the run to be half way")
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        status, err = finish(process)
        took = time.monotonic() - sent

    assert failure_sentence(status, err) == TERMINATED
    # generous for a loaded machine; finishing the day's remaining queries (1 s each) would take far longer
    assert took < 5.0, "the run must stop at SIGTERM, not finish its queries first"
    assert ledger_state(ledger) == before


def test_sigterm_while_the_run_writes_postgresql(prometheus_server, world, tmp_path, postgres_url):
    config = configure(tmp_path, postgres_url, prometheus_server(world).url)
    assert run(config).exit_code == 0
    before = ledger_state(postgres_url)

    holder = lock_the_day(postgres_url)
    process = billing_process(config)
    wait_for(lambda: waiting_for_locks(postgres_url) == 1, "the run to be inside its write")
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    status, err = finish(process)
    took = time.monotonic() - sent
    holder.close()

    assert failure_sentence(status, err) == TERMINATED
    assert took < 10.0  # it stops without waiting for the lock, which the holder keeps until after this
    assert ledger_state(postgres_url) == before


# --- names that are hard to carry


QUOTE, BRACES, STAR, SCRIPT, NEWLINE, UNICODE = 'quote"ns', "brace{ns}", "star*", "<script>alert(1)</script>", \
    "new\nline", "ünïcødé-名前"
TEAM_QUOTES, TEAM_BRACES, TEAM_SCRIPT, TEAM_NEWLINE, TEAM_UNICODE = 'R&D "quotes"', "{braces}", \
    '<script>alert("team")</script>', "new\nline team", "équipe-名前"
# namespace -> (owner, [(team, share)]): docs/spec.md "Rule 7: owner and team" by hand for the config and directory below
OWNERS = {
    QUOTE: (None, [(TEAM_QUOTES, 1)]),
    BRACES: (None, [(TEAM_BRACES, 1)]),
    NEWLINE: (None, [(TEAM_NEWLINE, 1)]),
    STAR: (STAR, [(TEAM_SCRIPT, 0.5), (TEAM_NEWLINE, 0.5)]),  # star* is on both teams
    UNICODE: (UNICODE, [(TEAM_UNICODE, 1)]),
    SCRIPT: (None, [("unallocated", 1)]),  # the person pattern matches, but no one has that uid
}
# Each pod runs all day on an H100 node requesting 2 cores, 4 GiB and 1 GPU:
# 48 core-h x 0.012 + 96 GiB-h x 0.0015 + 24 GPU-h x 2.40 = 0.576 + 0.144 + 57.60
COST_PER_NAMESPACE = 58.32


def names_world(namespaces: list[str]) -> World:
    start = DAY.start.timestamp() - 3600
    node = Node("gpu-1", ((start - 86400, {"label_kubernetes_io_hostname": "gpu-1", GPU_PRODUCT_LABEL: H100}),),
                {"cpu": 2.0 * len(namespaces), "memory": 4.0 * GIB * len(namespaces),
                 "nvidia_com_gpu": 1.0 * len(namespaces)})  # every request, and what the preflight needs
    pods = tuple(Pod(namespace, f"pod-{i}", f"00000000-0000-4000-8000-{i:012d}", "gpu-1", start,
                     ((start, "Running"),), math.inf, (Container("main", 2.0, 4 * GIB, 1.0),))
                 for i, namespace in enumerate(namespaces))
    return World((Cluster("jaguar", (node,), pods, {"cluster": "jaguar"}),), start, DAY.end.timestamp() + 600)


def ldif_entry(dn: str, **attributes: list[str] | str) -> str:
    """An LDIF entry with every value base64-encoded, so any character survives."""
    def line(name: str, value: str) -> str:
        return f"{name}:: {base64.b64encode(value.encode()).decode()}\n"
    lines = [line("dn", dn)]
    for name, values in attributes.items():
        lines += [line(name, v) for v in ([values] if isinstance(values, str) else values)]
    return "".join(lines) + "\n"


def dn_value(value: str) -> str:
    """An RDN value escaped as RFC 4514 asks."""
    return "".join(f"\\{c}" if c in ',+"\\<>;=' else c for c in value)


def person(uid: str) -> str:
    return f"uid={dn_value(uid)},ou=people,dc=example,dc=org"


NAMES_LDIF = "".join([
    ldif_entry(person(STAR), objectClass="inetOrgPerson", uid=STAR, cn="Star", sn="S", mail="star@example.org"),
    ldif_entry(person(UNICODE), objectClass="inetOrgPerson", uid=UNICODE, cn="Ünï Cødé", sn="C",
               mail="unicode@example.org"),
    *(ldif_entry(f"cn={dn_value(team)},ou=teams,dc=example,dc=org", objectClass="groupOfNames", cn=team,
                 member=person(lead), owner=person(lead))
      for team, lead in [(TEAM_SCRIPT, STAR), (TEAM_NEWLINE, STAR), (TEAM_UNICODE, UNICODE)]),
    # the overrides' teams, without a lead: a team the config names is one of the directory's
    *(ldif_entry(f"cn={dn_value(team)},ou=teams,dc=example,dc=org", objectClass="groupOfNames", cn=team)
      for team in (TEAM_QUOTES, TEAM_BRACES)),
])


def test_names_with_quotes_braces_stars_markup_newlines_and_unicode(prometheus_server, tmp_path, database):
    server = prometheus_server(names_world(list(OWNERS)))
    (tmp_path / "names.ldif").write_text(NAMES_LDIF, encoding="utf-8")
    config = configure(
        tmp_path, database, server.url,
        directory={"ldif": str(tmp_path / "names.ldif")},
        namespaces={"overrides": {QUOTE: TEAM_QUOTES, BRACES: TEAM_BRACES, NEWLINE: TEAM_NEWLINE},
                    "person_pattern": "(?s)^(?P<uid>.+)$"},
        email={"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]},
    )

    result = run(config)
    assert result.exit_code == 0, result.output

    # The ledger: every name exactly as Kubernetes had it, charged to the teams worked out by hand.
    rows = ledger_state(database)["chargeback"]  # day, cluster, namespace, team, owner, ..., cost at 9
    costs: dict[tuple[str, str], float] = {}
    for row in rows:
        costs[row[2], row[3]] = costs.get((row[2], row[3]), 0.0) + row[9]
    assert {key: pytest.approx(cost, rel=1e-9) for key, cost in costs.items()} == {
        (ns, team): COST_PER_NAMESPACE * share for ns, (_, teams) in OWNERS.items() for team, share in teams}
    assert {row[2]: row[4] for row in rows} == {ns: owner for ns, (owner, _) in OWNERS.items()}

    # The pages: every name shown as it is, none of them markup.
    teams = {team for _, shares in OWNERS.values() for team, _ in shares}
    folder = tmp_path / "reports" / str(DAY.date)
    pages = [folder / "index.html", *(folder / "teams").iterdir()]
    assert len(pages) == 1 + len(teams)
    for page in pages:
        assert "<script" not in page.read_text(encoding="utf-8"), page
    index = read_page((folder / "index.html").read_text(encoding="utf-8"))
    shown = " ".join(cell for table in index.tables.values() for row in table for cell in row)
    for name in [*OWNERS, *teams]:
        assert flat(name) in flat(shown), name

    # `billing report`: the names as data in JSON, as text in HTML.
    for team in (TEAM_SCRIPT, TEAM_NEWLINE):
        answer = CliRunner().invoke(main, ["report", "--team", team, "--from", str(DAY.date), "--to", str(DAY.date),
                                           "--format", "json", "--config", config])
        assert answer.exit_code == 0, answer.output
        report = json.loads(answer.stdout)
        assert report["team"] == team
        expected = {ns: COST_PER_NAMESPACE * share for ns, (_, shares) in OWNERS.items()
                    for name, share in shares if name == team}
        got: dict[str, float] = {}
        for row in report["rows"]:
            got[row["namespace"]] = got.get(row["namespace"], 0.0) + row["cost"]
        assert got == pytest.approx(expected, rel=1e-9)
    page = CliRunner().invoke(main, ["report", "--team", TEAM_SCRIPT, "--from", str(DAY.date), "--to",
                                     str(DAY.date), "--format", "html", "--config", config])
    assert page.exit_code == 0 and "<script" not in page.stdout
    assert flat(TEAM_SCRIPT) in flat(text_of(page.stdout)) and STAR in text_of(page.stdout)

    # The emails: one per lead and team, one subject line each, names intact in both parts.
    messages = {}
    for path in (tmp_path / "outbox").iterdir():
        message = message_from_bytes(path.read_bytes(), policy=policy.default)
        # Python's folding may put a subject with a quoted word on a line of its own, after "Subject:";
        # RFC 5322 unfolding keeps the fold's space, which readers do not show.
        messages[str(message["To"]), str(message["Subject"]).lstrip()] = message
    expected = {  # (to, subject) -> the team whose summary it is
        ("infra@example.org", "Cluster billing 2026-11-20: all teams 349.92 USD"): None,  # 6 x 58.32
        ("star@example.org", f"Cluster billing 2026-11-20: team {TEAM_SCRIPT} 29.16 USD"): TEAM_SCRIPT,
        ("star@example.org", "Cluster billing 2026-11-20: team new line team 87.48 USD"): TEAM_NEWLINE,
        ("unicode@example.org", f"Cluster billing 2026-11-20: team {TEAM_UNICODE} 58.32 USD"): TEAM_UNICODE,
    }
    assert sorted(messages) == sorted(expected)
    for key, team in expected.items():
        markup = messages[key].get_body(("html",)).get_content()
        assert "<script" not in markup
        for name in [team] if team else teams:
            assert flat(name) in flat(messages[key].get_body(("plain",)).get_content()), (key, name)
            assert flat(name) in flat(text_of(markup)), (key, name)


def flat(text: str) -> str:
    """Text with every run of white space (newlines too) as one space: how a page or email shows it."""
    return " ".join(text.split())


def text_of(markup: str) -> str:
    """The text a reader sees in HTML, character references resolved."""
    parser = HTMLParser()
    parts: list[str] = []
    parser.handle_data = parts.append
    parser.feed(markup)
    return " ".join(parts)


def test_a_namespace_of_ten_thousand_characters_is_refused_the_same_by_both_databases(
    prometheus_server, tmp_path, database
):
    long_name = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(157))[:10_000]
    server = prometheus_server(names_world(["alice", long_name]))
    replace_day(open_ledger(database), DAY.date, DayBill(PREVIOUS), "USD")
    before = ledger_state(database)

    result = run(configure(tmp_path, database, server.url))

    assert failure_sentence(result.exit_code, result.output) == (
        f"billing: database {database}: not writing 2026-11-20, previous rows kept: the namespace "
        f"{long_name[:40]!r}… has 10000 characters, more than the 253 of any Kubernetes name"
    )
    assert ledger_state(database) == before



# --- the reports' filesystem


@pytest.fixture
def full_filesystem(tmp_path):
    """A 256 KiB tmpfs with 8 KiB left: the reports' volume, full. Mounting needs root (as in CI)."""
    mount = tmp_path / "reports-volume"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); CI runs as root and can")
    try:
        (mount / "filler").write_bytes(b"\0" * (248 * 1024))
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_reports_volume_fails_the_run_before_the_day_is_replaced(prometheus_server, world, tmp_path,
                                                                       full_filesystem):
    """An empty file still fits on a full disk: the pages failed only after the day was committed, and neither
    reports nor mail followed."""
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    server = prometheus_server(world)
    config = configure(tmp_path, database, server.url, output_dir=str(full_filesystem / "reports"))
    open_ledger(database).dispose()
    before = ledger_state(database)
    result = run(config)
    sentence = failure_sentence(result.exit_code, result.output)
    assert f"cannot write the reports to output_dir {full_filesystem / 'reports'}" in sentence, sentence
    assert "No space left on device" in sentence
    assert ledger_state(database) == before
