"""`billing check`: is everything the nightly job needs wired up?

Each dependency (every cluster's Prometheus, the directory, the ledger
database, the SMTP server) is reached the way the job reaches it, timed, and
reported as one `Probe`. A failing dependency never stops the others from
being checked: that is the point of a check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from sqlalchemy import func, select

from billing.config import ClusterConfig, Config, EmailConfig, load_config
from billing.directory import DirectoryError
from billing.directory_sources import check_directory
from billing.ledger import LedgerError, completed_days, fetch, open_ledger
from billing.mail import IMPLICIT_TLS_PORT, MailError, connect_smtp
from billing.prometheus import PrometheusError
from billing.replay import prometheus_source, read_recording

TIMEOUT = 10.0  # seconds: a check answers quickly or reports the dependency as failing


@dataclass(frozen=True)
class Probe:
    """What checking one dependency found."""

    dependency: str
    ok: bool
    detail: str  # what was reached, or why not
    seconds: float

    def line(self) -> str:
        took = f"{self.seconds * 1000:.0f} ms" if self.seconds < 1 else f"{self.seconds:.1f} s"
        return f"{'ok' if self.ok else 'FAIL':<4}  {self.dependency:<20}  {self.detail} ({took})"


class CheckFailure(Exception):
    """A dependency was reached but is not usable; the message says why."""


EXPLAINED = (CheckFailure, PrometheusError, DirectoryError, LedgerError, MailError)  # their message is a whole sentence


def _timed(dependency: str, probe: Callable[[], str]) -> Probe:
    start = time.monotonic()
    try:
        return Probe(dependency, True, probe(), time.monotonic() - start)
    except Exception as exc:  # any failure, expected or not, is this dependency's line, not a crash
        reason = str(exc) if isinstance(exc, EXPLAINED) else f"{type(exc).__name__}: {exc}"
        return Probe(dependency, False, reason, time.monotonic() - start)


def prometheus(cluster: ClusterConfig) -> str:
    """Ask the server for `vector(1)`, without the job's retries; recorded answers are only counted."""
    config = cluster.prometheus
    if config.replay:
        answers = len(read_recording(Path(config.replay)))
        if not answers:
            raise CheckFailure(f"replay directory {config.replay} holds no recorded answers")
        return f"replay directory {config.replay}: {answers} recorded answers"
    once = config.model_copy(update={"timeout": min(config.timeout, TIMEOUT), "retries": 0})
    source = prometheus_source(cluster.name, once)
    answer = source.instant("vector(1)", time.time())
    if [sample["value"][1] for sample in answer] != ["1"]:
        raise CheckFailure(f"{config.url} answered vector(1) with {answer!r}, not 1")
    return f"{config.url} answered vector(1)"


def selector(cluster: ClusterConfig) -> str:
    """Does the cluster's selector match any node of kube-state-metrics in the last day? A typo would make
    every run refuse its day for want of data."""
    config = cluster.prometheus
    once = config.model_copy(update={"timeout": min(config.timeout, TIMEOUT), "retries": 0})
    query = f"count(group by (node) (last_over_time(kube_node_labels{{{config.selector}}}[1d])))"
    answer = prometheus_source(cluster.name, once).instant(query, time.time())
    if not answer:
        raise CheckFailure(f"{config.selector} matches no kube-state-metrics series (kube_node_labels) at {config.url} "
                           "in the last day: check clusters[].prometheus.selector")
    nodes = float(answer[0]["value"][1])
    return f"{config.selector} matches kube-state-metrics series of {nodes:.0f} nodes in the last day"


def database(url: str) -> str:
    """Open the ledger (creating its tables if missing) and read how many days it holds."""
    engine = open_ledger(url)
    try:
        [row] = fetch(engine, select(func.count().label("days"), func.max(completed_days.c.day).label("last")))
    finally:
        engine.dispose()
    last = f", the last {row['last']}" if row["last"] else ""
    return f"{engine.url.render_as_string(hide_password=True)}: {row['days']} days billed{last}"


def delivery(email: EmailConfig) -> str:
    """Open the session sending would open (TLS or STARTTLS, login), say EHLO, send nothing."""
    if email.outbox_dir:
        outbox = Path(email.outbox_dir)
        outbox.mkdir(parents=True, exist_ok=True)
        if not os.access(outbox, os.W_OK):
            raise CheckFailure(f"outbox directory {outbox} is not writable")
        return f"messages go to the outbox directory {outbox}, which is writable"
    with connect_smtp(email) as session:
        session.ehlo()
    tls = "TLS" if email.smtp_port == IMPLICIT_TLS_PORT else "STARTTLS" if email.starttls else "no TLS"
    login = f"login as {email.username}" if email.username else "no login"
    return f"SMTP server {email.smtp_host}:{email.smtp_port}: {tls}, {login}, EHLO accepted"


def check_config(path: Path) -> tuple[Config, Probe]:
    """The validated config and its line; an invalid config raises ConfigError (exit status 2)."""
    start = time.monotonic()
    config = load_config(path)
    clusters = ", ".join(cluster.name for cluster in config.clusters)
    detail = f"{path}: valid (clusters {clusters}; timezone {config.timezone})"
    return config, Probe("config", True, detail, time.monotonic() - start)


def check_all(config: Config) -> Iterator[Probe]:
    """One probe per dependency, in the order a run needs them; each is yielded as soon as it is done."""
    for cluster in config.clusters:
        yield _timed(f"prometheus {cluster.name}", partial(prometheus, cluster))
        if cluster.prometheus.selector.strip() and not cluster.prometheus.replay:
            yield _timed(f"selector {cluster.name}", partial(selector, cluster))
    yield _timed("directory", lambda: check_directory(config.directory))
    yield _timed("database", lambda: database(config.database))
    if config.email.enabled:
        yield _timed("email", lambda: delivery(config.email))
    else:
        yield Probe("email", True, "disabled in the config (email.enabled), not checked", 0.0)
