"""Start and stop real servers for integration tests.

Every server listens on 127.0.0.1 on a free port, keeps its data in a
directory of its own and runs in the foreground as a child of the test
process, so it is stopped by its process id (terminate, wait, kill). The
pytest fixtures in conftest.py are thin wrappers around these functions.
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import glob
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixtures.ksm import World, write_openmetrics

# --- programs that may be missing


def _missing(reason: str) -> None:
    """Skip, except in CI (CI=true), where every integration test must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true requires every integration server to be installed", pytrace=False)
    pytest.skip(reason)


def require_program(name: str, search: Sequence[str] = ()) -> str:
    """Path of program `name` (PATH first, then the glob patterns in `search`,
    newest version last wins), or skip/fail the test when it is missing."""
    found = shutil.which(name)
    if not found:
        candidates = sorted((p for pattern in search for p in glob.glob(os.path.join(pattern, name))
                             if os.access(p, os.X_OK)), key=_version_key)
        found = candidates[-1] if candidates else None
    if not found:
        package = DEBIAN_PACKAGES.get(name)
        _missing(f"program {name!r} is not installed" + (f" (apt-get install {package})" if package else ""))
    return found


DEBIAN_PACKAGES = {"prometheus": "prometheus", "promtool": "prometheus", "slapd": "slapd", "slapadd": "slapd",
                   "initdb": "postgresql", "openssl": "openssl", "victoria-metrics": "victoria-metrics",
                   "vmctl": "victoria-metrics", "script": "bsdutils"}


def _version_key(path: str) -> list[tuple[int, int | str]]:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in Path(path).parts]


def require_module(name: str) -> None:
    """Skip/fail the test when Python module `name` is not installed."""
    if importlib.util.find_spec(name) is None:
        _missing(f"Python module {name!r} is not installed")


POSTGRES_BINDIRS = ("/usr/lib/postgresql/*/bin",)

# --- processes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_running: set[ManagedProcess] = set()


class ManagedProcess:
    """A server child process with its output in a log file."""

    def __init__(self, args: Sequence[str], log_path: Path, *, user: str | None = None,
                 stop_signal: int = signal.SIGTERM, cwd: Path | None = None):
        self.args = [str(a) for a in args]
        self.log_path = Path(log_path)
        self.stop_signal = stop_signal
        self._user, self._cwd = user, cwd
        self.start()

    def start(self) -> None:
        """Start the program; after `stop`, again (a server back after an outage)."""
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          cwd=self._cwd, user=self._user,
                                          group=_group_of(self._user) if self._user else None)
        _running.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to shut down; kill it if it has not after `timeout`."""
        if self.alive():
            self.popen.send_signal(self.stop_signal)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        _running.discard(self)

    def kill(self) -> None:
        """SIGKILL, no shutdown: a server that crashed."""
        if self.alive():
            self.popen.kill()
            self.popen.wait()
        _running.discard(self)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Poll `ready` until true; fail with the log if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise RuntimeError(f"{what} exited with status {self.popen.returncode}:\n{self.log_tail()}")
            if ready():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{what} not ready after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)


@atexit.register
def _stop_leftovers() -> None:
    """A crashed test session must not leave servers behind."""
    for process in list(_running):
        process.stop(timeout=5)


def _group_of(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def accepts_connections(port: int, host: str = "127.0.0.1") -> Callable[[], bool]:
    def check() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            return False
    return check


def run(args: Sequence[str], what: str, **kw) -> subprocess.CompletedProcess:
    """Run a setup command; raise with its output when it fails."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}): {' '.join(map(str, args))}\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result


# --- nginx


def start_nginx(work_dir: Path, sites: str, ports: Sequence[int]) -> ManagedProcess:
    """nginx in the foreground with `sites` (server blocks) inside what the nginx image's own nginx.conf
    does around conf.d; ready when every port in `ports` accepts connections."""
    nginx = require_program("nginx", ("/usr/sbin",))
    (work_dir / "nginx.conf").write_text(f"""
        {"user root;" if os.geteuid() == 0 else ""}
        daemon off;
        worker_processes 1;
        pid {work_dir}/nginx.pid;
        error_log stderr;
        events {{}}
        http {{
            include /etc/nginx/mime.types;
            access_log off;
            client_body_temp_path {work_dir}/client_temp;
            proxy_temp_path {work_dir}/proxy_temp;
            fastcgi_temp_path {work_dir}/fastcgi_temp;
            uwsgi_temp_path {work_dir}/uwsgi_temp;
            scgi_temp_path {work_dir}/scgi_temp;
            {sites}
        }}
    """)
    process = ManagedProcess([nginx, "-p", work_dir, "-c", work_dir / "nginx.conf"], work_dir / "nginx.log")
    for port in ports:
        process.wait_until(accepts_connections(port), "nginx", timeout=10)
    return process


# --- Prometheus


def load_world(world: World, tsdb_dir: Path, work_dir: Path) -> None:
    """Backfill the world into TSDB blocks under tsdb_dir (OpenMetrics written in work_dir)."""
    load_openmetrics(write_openmetrics(world, work_dir), tsdb_dir)


def load_openmetrics(paths: Sequence[Path], tsdb_dir: Path, parallel: int | None = None) -> None:
    """promtool each OpenMetrics file into tsdb_dir, `parallel` at a time
    (default: one per core), deleting each file once loaded. Files should
    hold one 2-hour block each: promtool 2.42 re-reads its input per block."""
    promtool = require_program("promtool")
    tsdb_dir.mkdir(parents=True, exist_ok=True)

    def load(path: Path) -> None:
        run([promtool, "tsdb", "create-blocks-from", "openmetrics", path, tsdb_dir], "promtool")
        path.unlink()

    with concurrent.futures.ThreadPoolExecutor(parallel or os.cpu_count() or 2) as pool:
        list(pool.map(load, paths))


def world_blocks(world: World, cache_dir: Path) -> Path:
    """TSDB blocks of the world, built once per distinct world and kept in
    cache_dir (keyed by a digest of the world's repr)."""
    digest = hashlib.sha256(repr(world).encode()).hexdigest()[:20]
    blocks = cache_dir / digest
    if not (blocks / ".complete").exists():
        building = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=cache_dir))
        load_world(world, building / "tsdb", building / "openmetrics")
        shutil.rmtree(blocks, ignore_errors=True)
        (building / "tsdb").rename(blocks)
        shutil.rmtree(building)
        (blocks / ".complete").touch()
    return blocks


class StoppedByPid:
    """A server whose `process` field is its own process: stopped and killed by pid."""

    process: ManagedProcess

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()


@dataclass
class PrometheusServer(StoppedByPid):
    url: str
    data_dir: Path
    process: ManagedProcess


def start_prometheus(blocks: Path, work_dir: Path, extra_args: Sequence[str] = (),
                     extra_config: str = "") -> PrometheusServer:
    """Prometheus over a copy of `blocks` (it writes into its data directory),
    with no scrape jobs and a retention long enough to keep backfilled days;
    `extra_config` is appended to its prometheus.yml (e.g. a remote_read section)."""
    prometheus = require_program("prometheus")
    work_dir.mkdir(parents=True, exist_ok=True)
    data_dir = work_dir / "data"
    shutil.copytree(blocks, data_dir, ignore=shutil.ignore_patterns(".complete"))
    config = work_dir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n" + extra_config)
    port = free_port()
    process = ManagedProcess(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
         "--storage.tsdb.retention.time=20y", f"--web.listen-address=127.0.0.1:{port}", *extra_args],
        work_dir / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    process.wait_until(lambda: _http_ok(f"{url}/-/ready"), "prometheus")
    return PrometheusServer(url, data_dir, process)


@dataclass
class HttpServer(StoppedByPid):
    """A server known by its URL alone."""

    url: str
    process: ManagedProcess


def _serve(name: str, args: Callable[[int], list[str]], work_dir: Path, ready: str,
           headers: dict[str, str] | None = None) -> tuple[str, ManagedProcess]:
    """Start program `name` with `args(port)` on a free loopback port; its URL and process once `ready` answers 200
    (asked with `headers`)."""
    program = require_program(name)
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = ManagedProcess([program, *args(port)], work_dir / f"{name}.log")
    url = f"http://127.0.0.1:{port}"
    process.wait_until(lambda: _http_ok(urllib.request.Request(url + ready, headers=headers or {})), name)
    return url, process


def _http_ok(url: str | urllib.request.Request) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


# --- VictoriaMetrics


VictoriaMetricsServer = HttpServer


def start_victoria_metrics(blocks: Path | None, work_dir: Path) -> VictoriaMetricsServer:
    """Single-node VictoriaMetrics (Debian's `victoria-metrics`) on its default query flags, empty or holding
    the samples of the Prometheus TSDB `blocks` (imported by vmctl from a copy of them, then flushed)."""
    url, process = _serve("victoria-metrics", lambda port: [
        f"-storageDataPath={work_dir / 'data'}", f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=100y",
        "-loggerLevel=ERROR", "-search.disableCache"], work_dir, "/health")
    if blocks is None:
        return VictoriaMetricsServer(url, process)
    vmctl, script = require_program("vmctl"), require_program("script")
    snapshot = work_dir / "snapshot"
    shutil.copytree(blocks, snapshot, ignore=shutil.ignore_patterns(".complete"))
    try:
        # vmctl 1.79 wants a terminal even when silent: `script` gives it one
        command = f"{vmctl} prometheus --prom-snapshot={snapshot} --vm-addr={url} -s --vm-disable-progress-bar"
        run([script, "-q", "-e", "-c", command, "/dev/null"], "vmctl prometheus")
        if not _http_ok(f"{url}/internal/force_flush"):
            raise RuntimeError(f"victoria-metrics at {url} did not flush the imported samples")
    except BaseException:
        process.stop()
        raise
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
    return VictoriaMetricsServer(url, process)


# --- Pushgateway


PushgatewayServer = HttpServer


def start_pushgateway(work_dir: Path, basic_auth: tuple[str, str] | None = None) -> PushgatewayServer:
    """A Prometheus Pushgateway that keeps what it is pushed in memory only; with `basic_auth`
    (user, password) it answers only requests carrying them (its web config, bcrypt-hashed)."""
    web, headers = [], {}
    if basic_auth:
        import bcrypt
        user, password = basic_auth
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        work_dir.mkdir(parents=True, exist_ok=True)
        (work_dir / "web.yaml").write_text(f"basic_auth_users:\n  {user}: '{hashed}'\n")
        web = [f"--web.config.file={work_dir / 'web.yaml'}"]
        headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return PushgatewayServer(*_serve("prometheus-pushgateway", lambda port: [
        f"--web.listen-address=127.0.0.1:{port}", "--persistence.file=", *web], work_dir, "/-/ready", headers))


# --- PostgreSQL


@dataclass
class PostgresServer:
    port: int
    base_dir: Path
    process: ManagedProcess
    _databases: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        import psycopg
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self) -> str:
        """A new empty database (cheap: a copy of template1); returns its name."""
        self._databases += 1
        name = f"test_{self._databases}"
        self.execute(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def halt(self) -> None:
        """Shut the server down but keep its data: an outage."""
        self.process.stop()

    def resume(self) -> None:
        """Start the halted server again on the same port and data."""
        self.process.start()
        self.process.wait_until(lambda: _postgres_answers(self), "postgres")


def start_postgres() -> PostgresServer:
    """initdb + postgres in a fresh directory, trust auth on 127.0.0.1.

    PostgreSQL refuses to run as root, so as root both run as the `postgres`
    OS user; the directory is made under /tmp (pytest's own temp dirs are
    0700 root) and owned by that user. SIGINT is a fast shutdown: it does not
    wait for clients still connected.
    """
    require_module("psycopg")
    initdb = require_program("initdb", POSTGRES_BINDIRS)
    postgres = str(Path(initdb).resolve().with_name("postgres"))  # the server of the same version
    user = "postgres" if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="billing-pg-"))
    if user:
        shutil.chown(base, user, user)
    data, sockets = base / "data", base / "sockets"
    run([initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
        "initdb", user=user, group=_group_of(user) if user else None)
    sockets.mkdir()
    if user:
        shutil.chown(sockets, user, user)
    port = free_port()
    process = ManagedProcess(
        [postgres, "-D", data, "-p", port, "-k", sockets, "-c", "listen_addresses=127.0.0.1",
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
        base / "postgres.log", user=user, stop_signal=signal.SIGINT)
    server = PostgresServer(port, base, process)
    process.wait_until(lambda: _postgres_answers(server), "postgres")
    return server


def _postgres_answers(server: PostgresServer) -> bool:
    try:
        server.execute("SELECT 1")
        return True
    except Exception:  # psycopg.OperationalError while starting up
        return False


# --- TLS test certificates


@dataclass(frozen=True)
class TestCertificates:
    """A throwaway CA and a server certificate it signed."""

    __test__ = False  # not a pytest test class, despite the name

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_cert))


def make_test_ca(directory: Path, hostnames: Sequence[str] = ("localhost", "127.0.0.1")) -> TestCertificates:
    """CA + server certificate for `hostnames` (IP addresses become IP SANs), via the openssl CLI."""
    openssl = require_program("openssl")
    directory.mkdir(parents=True, exist_ok=True)
    certs = TestCertificates(directory / "ca.crt", directory / "ca.key", directory / "server.crt",
                             directory / "server.key")
    run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=billing test CA",
         "-keyout", certs.ca_key, "-out", certs.ca_cert,
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        "openssl (CA)")
    sans = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hostnames)
    extensions = directory / "server.ext"
    extensions.write_text(f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n"
                          "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    csr = directory / "server.csr"
    run([openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={hostnames[0]}",
         "-keyout", certs.key, "-out", csr], "openssl (server key)")
    run([openssl, "x509", "-req", "-in", csr, "-CA", certs.ca_cert, "-CAkey", certs.ca_key, "-CAcreateserial",
         "-days", "30", "-extfile", extensions, "-out", certs.cert], "openssl (sign)")
    return certs


def _is_ip(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        return True
    except OSError:
        return False


# --- OpenLDAP


@dataclass
class SlapdServer(StoppedByPid):
    url: str
    ldaps_url: str | None
    process: ManagedProcess


def start_slapd(work_dir: Path, ldif: str, *, suffix: str, rootdn: str, rootpw: str,
                sizelimit: int | str | None = None, tls: TestCertificates | None = None,
                schemas: Sequence[Path] = ()) -> SlapdServer:
    """slapd from a slapd.conf of our own with the entries of `ldif` loaded
    offline by slapadd; ldaps:// as well (and StartTLS) when `tls` is given.

    sizelimit N caps plain searches at N entries but lets paged searches
    return everything; a string is used verbatim (slapd.conf syntax). The
    rootdn is exempt from limits: bind as someone else to see them.
    """
    slapd, slapadd = require_program("slapd"), require_program("slapadd")
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "data").mkdir()
    lines = [f"include /etc/ldap/schema/{name}.schema" for name in ("core", "cosine", "inetorgperson", "nis")]
    lines += [f"include {schema}" for schema in schemas]  # extra schema files, e.g. AD-like attributes
    lines += ["modulepath /usr/lib/ldap", "moduleload back_mdb",
              f"pidfile {work_dir}/slapd.pid", f"argsfile {work_dir}/slapd.args"]
    if tls:
        lines += [f"TLSCACertificateFile {tls.ca_cert}", f"TLSCertificateFile {tls.cert}",
                  f"TLSCertificateKeyFile {tls.key}"]
    if isinstance(sizelimit, int):
        # A plain "sizelimit N" also caps the total of a paged search at N;
        # prtotal=unlimited makes it a server that needs paged search.
        lines.append(f"sizelimit size.soft={sizelimit} size.hard={sizelimit} size.prtotal=unlimited")
    elif sizelimit is not None:
        lines.append(f"sizelimit {sizelimit}")
    lines += ["database mdb", "maxsize 268435456", f'suffix "{suffix}"', f'rootdn "{rootdn}"',
              f"rootpw {rootpw}", f"directory {work_dir}/data", "index objectClass eq"]
    conf = work_dir / "slapd.conf"
    conf.write_text("\n".join(lines) + "\n")
    data = work_dir / "data.ldif"
    data.write_text(ldif)
    run([slapadd, "-q", "-f", conf, "-l", data], "slapadd")
    port = free_port()
    urls = [f"ldap://127.0.0.1:{port}/"]
    ldaps_port = free_port() if tls else None
    if ldaps_port:
        urls.append(f"ldaps://127.0.0.1:{ldaps_port}/")
    process = ManagedProcess([slapd, "-f", conf, "-h", " ".join(urls), "-d", "0"], work_dir / "slapd.log")
    process.wait_until(accepts_connections(port), "slapd")
    if ldaps_port:
        process.wait_until(accepts_connections(ldaps_port), "slapd (ldaps)")
    return SlapdServer(f"ldap://127.0.0.1:{port}", f"ldaps://127.0.0.1:{ldaps_port}" if ldaps_port else None,
                       process)


# --- SMTP


@dataclass(frozen=True)
class ReceivedMessage:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes  # the message as received, before any decoding
    login: str | None  # the AUTH user, None without AUTH
    tls: bool  # whether STARTTLS was used


@dataclass
class SmtpServer:
    host: str
    port: int
    messages: list[ReceivedMessage]
    controller: object = field(repr=False)

    def stop(self) -> None:
        self.controller.stop()


def start_smtp(*, tls: TestCertificates | None = None, require_starttls: bool = False,
               auth: tuple[str, str] | None = None, auth_required: bool = False,
               implicit_tls: bool = False, refuse: Collection[str] = ()) -> SmtpServer:
    """An in-process aiosmtpd server collecting every message it accepts.

    With `tls`, STARTTLS is offered (and AUTH then only after it, as real
    servers do), or with `implicit_tls` the whole session is TLS (port 465
    style); with `auth`, AUTH LOGIN and PLAIN accept that user/password.
    Recipients in `refuse` get 550 at RCPT TO, as for an unknown mailbox.
    """
    require_module("aiosmtpd")
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    messages: list[ReceivedMessage] = []

    class Collector:
        async def handle_DATA(self, server, session, envelope):
            login = session.auth_data.login.decode() if session.authenticated else None
            messages.append(ReceivedMessage(envelope.mail_from, list(envelope.rcpt_tos),
                                            envelope.original_content or envelope.content, login,
                                            session.ssl is not None  # STARTTLS, or implicit TLS:
                                            or server.transport.get_extra_info("ssl_object") is not None))
            return "250 OK"

        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            if address in refuse:
                return "550 5.1.1 no such mailbox"
            envelope.rcpt_tos.append(address)
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (auth is not None and mechanism in ("LOGIN", "PLAIN") and isinstance(auth_data, LoginPassword)
              and (auth_data.login.decode(), auth_data.password.decode()) == auth)
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    port = free_port()
    controller = Controller(Collector(), hostname="127.0.0.1", port=port, server_hostname="localhost",
                            tls_context=tls.server_context() if tls and not implicit_tls else None,
                            ssl_context=tls.server_context() if tls and implicit_tls else None,
                            require_starttls=require_starttls,
                            authenticator=authenticator if auth else None, auth_required=auth_required,
                            auth_require_tls=tls is not None)
    controller.start()
    return SmtpServer("127.0.0.1", port, messages, controller)
