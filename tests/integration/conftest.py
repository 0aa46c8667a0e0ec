"""Fixtures that run real servers (Prometheus, PostgreSQL, slapd, SMTP, Pushgateway).

Factories return a started server and stop everything they started at the
end of the test; a test may stop a server earlier itself. A missing server
program skips the test, or fails it when CI=true.

    def test_day(prometheus_server, postgres_url, slapd_server, smtp_server, test_ca):
        world = make_world(1, day_start, pods=200)           # fixtures.ksm
        prom = prometheus_server(world)                      # prom.url, prom.pid, prom.stop(), prom.kill()
        ldap = slapd_server(LDIF, sizelimit=500, tls=test_ca)  # ldap.url, ldap.ldaps_url
        smtp = smtp_server(tls=test_ca, auth=("u", "p"))     # smtp.host, smtp.port, smtp.messages
        engine = sqlalchemy.create_engine(postgres_url)      # a fresh database of its own
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from fixtures.ksm import World
from fixtures.remote_write import sample_count, write_world
from fixtures.servers import (
    ColdFrontServer,
    HttpServer,
    PostgresServer,
    PrometheusServer,
    PushgatewayServer,
    SlapdServer,
    SmtpServer,
    TestCertificates,
    VictoriaMetricsServer,
    flush_victoria_metrics,
    make_test_ca,
    require_program,
    start_coldfront,
    start_postgres,
    start_prometheus,
    start_pushgateway,
    start_slapd,
    start_smtp,
    start_victoria_metrics,
    world_blocks,
)
from tests.helpers.prometheus_worlds import STORES


class Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=Stoppable)


def stopped_at_the_end(start: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """A fixture's factory: `start`, remembering every server it started, and stopping them all at the end."""
    started: list[S] = []

    def starting(*args, **options) -> S:
        server = start(*args, **options)
        started.append(server)
        return server

    yield starting
    for server in started:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything below tests/integration is an integration test (`-m "not integration"` skips them)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def tsdb_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where loaded worlds' TSDB blocks are kept: $BILLING_TSDB_CACHE (kept
    across runs, for benchmarks) or a directory of this test run, which its
    xdist workers share (world_blocks builds each world once, the others
    waiting: a world two modules load is not built on both workers)."""
    configured = os.environ.get("BILLING_TSDB_CACHE")
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return Path(configured)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return tmp_path_factory.mktemp("tsdb-cache")
    shared = tmp_path_factory.getbasetemp().parent / "tsdb-cache"  # the run's own: each worker's basetemp is in it
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture
def prometheus_server(tmp_path_factory: pytest.TempPathFactory,
                      tsdb_cache: Path) -> Iterator[Callable[..., PrometheusServer]]:
    """prometheus_server(world, extra_args=(), extra_config="") -> a Prometheus holding the world's series.

    Each call starts a separate server over its own copy of the blocks (a
    world is loaded with promtool only once per session)."""
    require_program("prometheus")
    require_program("promtool")

    def start(world: World, extra_args: tuple[str, ...] = (), extra_config: str = "") -> PrometheusServer:
        return start_prometheus(world_blocks(world, tsdb_cache), tmp_path_factory.mktemp("prometheus"), extra_args,
                                extra_config)

    yield from stopped_at_the_end(start)


@pytest.fixture(scope="session")
def victoria_metrics_server(tmp_path_factory: pytest.TempPathFactory,
                            tsdb_cache: Path) -> Iterator[Callable[[World], VictoriaMetricsServer]]:
    """victoria_metrics_server(world) -> a VictoriaMetrics (default query flags) holding the world's series,
    loaded by vmctl from the blocks a Prometheus of the same world serves. One server per world and
    session: tests only read from it."""
    require_program("victoria-metrics")
    require_program("vmctl")
    started: dict[Path, VictoriaMetricsServer] = {}

    def start(world: World) -> VictoriaMetricsServer:
        blocks = world_blocks(world, tsdb_cache)
        if blocks not in started:
            started[blocks] = start_victoria_metrics(blocks, tmp_path_factory.mktemp("victoria-metrics"))
        return started[blocks]

    yield start
    for server in started.values():
        server.stop()


@pytest.fixture(params=STORES)
def store_server(request: pytest.FixtureRequest) -> Callable[[World], PrometheusServer | VictoriaMetricsServer]:
    """store_server(world) -> a server with `.url` holding the world's series, once a Prometheus 2.42 and
    once a VictoriaMetrics: every test of the bill against the reference runs on both stores."""
    return request.getfixturevalue("prometheus_server" if request.param == "prometheus" else "victoria_metrics_server")


@pytest.fixture(params=STORES)
def live_store(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[World], PrometheusServer | HttpServer]]:
    """live_store(world) -> a server with `.url` that received the world by remote write, as a live store fills
    itself (staleness markers included), once a Prometheus 2.42 and once a VictoriaMetrics."""
    def start(world: World) -> PrometheusServer | HttpServer:
        work = tmp_path_factory.mktemp("live-store")
        if request.param == "prometheus":
            server: PrometheusServer | HttpServer = start_prometheus(
                None, work, ["--web.enable-remote-write-receiver"])
        else:
            server = start_victoria_metrics(None, work)
        write_world(world, f"{server.url}/api/v1/write")
        if request.param == "victoria-metrics":
            flush_victoria_metrics(server.url, sample_count(world))
        return server

    yield from stopped_at_the_end(start)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session."""
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database, dropped after the test."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    """A throwaway CA and a certificate for localhost and 127.0.0.1."""
    return make_test_ca(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def slapd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SlapdServer]]:
    """slapd_server(ldif, suffix=, rootdn=, rootpw=, sizelimit=None, tls=None, schemas=()) -> a running slapd.

    `ldif` must contain the suffix entry itself; rootdn defaults to cn=admin,<suffix>."""
    def start(ldif: str, *, suffix: str = "dc=example,dc=org", rootdn: str | None = None, rootpw: str = "secret",
              sizelimit: int | str | None = None, tls: TestCertificates | None = None,
              schemas: Sequence[Path] = ()) -> SlapdServer:
        return start_slapd(tmp_path_factory.mktemp("slapd"), ldif, suffix=suffix,
                           rootdn=rootdn or f"cn=admin,{suffix}", rootpw=rootpw, sizelimit=sizelimit, tls=tls,
                           schemas=schemas)

    yield from stopped_at_the_end(start)


@pytest.fixture(scope="module")
def coldfront_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ColdFrontServer]]:
    """coldfront_server(setup="") -> a running ColdFront with its REST API, its test data and `setup`'s (Python
    its shell runs), shared by a module: it takes seconds to set up."""
    yield from stopped_at_the_end(lambda setup="": start_coldfront(tmp_path_factory.mktemp("coldfront"), setup))


@pytest.fixture
def smtp_server() -> Iterator[Callable[..., SmtpServer]]:
    """smtp_server(tls=None, require_starttls=False, auth=None, auth_required=False, implicit_tls=False,
    refuse=(), delay=0.0) -> a running SMTP server
    whose `.messages` collects what it received."""
    yield from stopped_at_the_end(start_smtp)


@pytest.fixture
def pushgateway_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PushgatewayServer]:
    """A running Prometheus Pushgateway, empty, stopped after the test."""
    server = start_pushgateway(tmp_path_factory.mktemp("pushgateway"))
    yield server
    server.stop()
