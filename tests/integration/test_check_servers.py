"""`billing check` against real servers: Prometheus, PostgreSQL and SMTP with STARTTLS and login."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect

from billing.cli import main
from billing.config import load_config
from billing.ledger.database import LedgerError, open_ledger
from billing.web.app import create_app
from fixtures.ksm import GPU_PRODUCT_LABEL, make_world
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.days import DAY
from tests.helpers.directories import LDIF as SLAPD_LDIF
from tests.helpers.jobs import LDIF


@pytest.fixture
def config(write_config, tmp_path):
    """write(clusters={name: url}, **keys) -> a config file with an LDIF directory."""
    (tmp_path / "people.ldif").write_text(LDIF)

    def write(clusters: dict[str, str], clusters_selector: str = "", **changes) -> str:
        base = MINIMAL_CONFIG["clusters"][0]
        listed = [{**base, "name": name, "prometheus": {"url": url, "selector": clusters_selector}}
                  for name, url in clusters.items()]
        directory = {"ldif": str(tmp_path / "people.ldif")}
        database = f"sqlite:///{tmp_path / 'ledger.db'}"
        return str(write_config(**{"clusters": listed, "directory": directory, "database": database, **changes}))

    return write


def check(config: str, env: dict | None = None):
    return CliRunner().invoke(main, ["check", "--config", config], env=env)


def status(output: str) -> dict[str, str]:
    """dependency -> "ok" or "FAIL"."""
    return {line[6:26].strip(): line[:4].strip() for line in output.splitlines()}


def line_of(output: str, dependency: str) -> str:
    return next(line for line in output.splitlines() if line[6:26].strip() == dependency)


def test_one_prometheus_up_and_one_down(prometheus_server, config):
    world = make_world(3, DAY, pods=5, nodes=2, day_seconds=3600, margin=600)
    up, down = prometheus_server(world), prometheus_server(world)
    down.kill()
    result = check(config({"jaguar": up.url, "ibis": down.url}))
    assert result.exit_code == 1
    assert status(result.stdout) == {
        "config": "ok", "prices jaguar": "ok", "prometheus jaguar": "ok", "series jaguar": "FAIL",
        "requests jaguar": "ok", "held jaguar": "ok", "workloads jaguar": "WARN", "figures jaguar": "ok",
        "storage jaguar": "ok", "prices ibis": "ok", "prometheus ibis": "FAIL",
        "directory": "ok", "database": "WARN", "email": "ok",  # WARN: no ledger yet, and a check makes none
    }
    assert f"{up.url} answered vector(1)" in result.stdout
    assert f"Prometheus of cluster ibis at {down.url} is unreachable" in result.stdout


@pytest.mark.parametrize("selector, line", [
    ('cluster="jaguar"', 'ok    selector jaguar       cluster="jaguar" matches kube-state-metrics series of {nodes} '
                         "nodes on {day}"),
    ('cluster="jagaur"', 'FAIL  selector jaguar       on {day}: the selector cluster="jagaur" matches no '
                         'kube-state-metrics series; without it kube_pod_info has cluster="jaguar" (check '
                         "clusters[].prometheus.selector)"),
])
def test_a_selector_that_matches_nothing_fails(prometheus_server, config, write_config, selector, line):
    """A world scraped until 50 minutes ago; the selector line follows the Prometheus line."""
    now = time.time() // 60 * 60
    world = make_world(3, now - 7200, pods=5, nodes=2, day_seconds=3600, margin=600)
    server = prometheus_server(world)
    path = config({"jaguar": server.url})
    cluster = {**MINIMAL_CONFIG["clusters"][0], "name": "jaguar", "prometheus": {"url": server.url, "selector": selector}}
    day = datetime.fromtimestamp(now - 3600, ZoneInfo("UTC")).date()  # the world's day
    result = CliRunner().invoke(main, ["check", "--date", str(day), "--config",
                                       str(write_config(**{**yaml.safe_load(Path(path).read_text()), "clusters": [cluster]}))])
    assert result.exit_code == (0 if line.startswith("ok") else 1)
    lines = [text.rsplit(" (", 1)[0] for text in result.stdout.splitlines()]
    assert lines[1].startswith("ok    prices jaguar") and lines[2].startswith("ok    prometheus jaguar")
    assert lines[3] == line.format(url=server.url, nodes=len(world.clusters[0].nodes), day=day)


def test_postgresql_ledger(prometheus_server, postgres_url, config):
    prometheus = prometheus_server(preflight_world())
    path = config({"jaguar": prometheus.url}, database=postgres_url)
    result = check_day(path)
    assert result.exit_code == 0, result.output
    assert "127.0.0.1" in result.stdout and "holds no ledger tables yet" in result.stdout  # and makes none
    with create_engine(postgres_url).connect() as conn:
        assert not inspect(conn).get_table_names()
    open_ledger(postgres_url).dispose()
    result = check_day(path)
    assert result.exit_code == 0, result.output
    assert "127.0.0.1" in result.stdout and "0 days billed" in result.stdout


@pytest.fixture
def password_url(postgres_server, postgres_url) -> Iterator[str]:
    """postgres_url as a role that must give its password, r1ght (scram-sha-256 from 127.0.0.1)."""
    hba = postgres_server.base_dir / "data" / "pg_hba.conf"
    rules = hba.read_text()
    postgres_server.execute("CREATE ROLE ledger_writer LOGIN PASSWORD 'r1ght'")
    hba.write_text("host all ledger_writer 127.0.0.1/32 scram-sha-256\n" + rules)
    postgres_server.execute("SELECT pg_reload_conf()")
    yield postgres_url.replace("//postgres@", "//ledger_writer@")
    hba.write_text(rules)
    postgres_server.execute("SELECT pg_reload_conf()")
    postgres_server.execute("DROP ROLE ledger_writer")


@pytest.mark.parametrize("password, cause", [
    (None, "fe_sendauth: no password supplied"),
    ("wrong", 'password authentication failed for user "ledger_writer"'),
    ("r1ght", None),
])
def test_a_postgresql_login_without_the_right_password_names_where_it_comes_from(password_url, config, tmp_path,
                                                                                   password, cause):
    """libpq's "no password supplied" said nothing of where billing's password comes from."""
    path = config({"jaguar": "http://127.0.0.1:9"}, database=password_url, web={"database": password_url})
    env = {"PGPASSWORD": password, "PGPASSFILE": str(tmp_path / "no-pgpass")}
    line = line_of(check(path, env=env).stdout, "database")
    if cause is None:
        assert line.startswith("WARN  ") and "holds no ledger tables yet" in line
        return
    fix = "the password of user ledger_writer comes from PGPASSWORD or ~/.pgpass (PGPASSFILE names another file), "
    assert line.startswith("FAIL  ") and f"{cause}; {fix}or from the URL of config key database (" in line
    with pytest.MonkeyPatch.context() as environment:  # `billing serve` reads web.database
        environment.delenv("PGPASSWORD", raising=False)
        environment.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
        with pytest.raises(LedgerError, match=re.escape(f"{fix}or from the URL of config key web.database")):
            create_app(load_config(Path(path)))


@pytest.mark.parametrize("password, ok", [("s3cret", True), ("wrong", False)])
def test_smtp_starttls_and_login(smtp_server, test_ca, config, password, ok):
    server = smtp_server(tls=test_ca, auth=("billing", "s3cret"), auth_required=True)
    email = {
        "enabled": True, "smtp_host": server.host, "smtp_port": server.port, "starttls": True,
        "username_env": "SMTP_USER", "password_env": "SMTP_PASSWORD",
    }
    path = config({"jaguar": "http://127.0.0.1:9"}, email=email)
    env = {"SMTP_USER": "billing", "SMTP_PASSWORD": password, "SSL_CERT_FILE": str(test_ca.ca_cert)}
    result = check(path, env=env)
    line = line_of(result.stdout, "email")
    if ok:
        assert line.startswith("ok    ") and "STARTTLS, login as billing, EHLO accepted" in line
    else:
        assert line.startswith("FAIL  ") and f"{server.host}:{server.port} refused the login: 535 " in line
        assert "; check email.username_env SMTP_USER and email.password_env SMTP_PASSWORD (" in line
    assert server.messages == []


def test_smtp_with_an_untrusted_certificate_fails_naming_ca_file(smtp_server, test_ca, config, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    server = smtp_server(tls=test_ca)
    email = {"enabled": True, "smtp_host": server.host, "smtp_port": server.port, "starttls": True}
    result = check(config({"jaguar": "http://127.0.0.1:9"}, email=email))
    line = line_of(result.stdout, "email")
    assert line.startswith("FAIL  ") and "TLS failed ([SSL: CERTIFICATE_VERIFY_FAILED]" in line
    assert "; set email.ca_file to the CA that signed the server's certificate (the system's CAs did not) (" in line


def test_smtp_without_starttls_names_the_port_and_starttls(smtp_server, config):
    server = smtp_server()  # no TLS at all
    email = {"enabled": True, "smtp_host": server.host, "smtp_port": server.port, "starttls": True}
    line = line_of(check(config({"jaguar": "http://127.0.0.1:9"}, email=email)).stdout, "email")
    assert line.startswith(f"FAIL  email                 SMTP server {server.host}:{server.port}: STARTTLS extension "
                           "not supported by server; set email.smtp_port to the server's TLS port (465), or "
                           "email.starttls: false where the network may read the mail (")


@pytest.mark.parametrize("password, ok", [("secret", True), ("wrong", False)])
def test_ldap_directory(slapd_server, config, tmp_path, password, ok):
    server = slapd_server(SLAPD_LDIF)  # alice, bob, carol; robotics led by alice
    (tmp_path / "ldap-password").write_text(password)
    directory = {
        "url": server.url, "bind_dn": "cn=admin,dc=example,dc=org", "bind_password_file": str(tmp_path / "ldap-password"),
        "people": {"base": "ou=people,dc=example,dc=org"}, "teams": {"base": "ou=teams,dc=example,dc=org"},
    }
    result = check(config({"jaguar": "http://127.0.0.1:9"}, directory=directory))
    line = line_of(result.stdout, "directory")
    assert result.exit_code == 1  # the Prometheus is down either way
    if ok:
        assert line.startswith("ok    ") and f"{server.url}: 3 people, 1 teams (1 with a lead)" in line
    else:
        assert line.startswith("FAIL  ") and server.url in line and (
            f"invalidCredentials); check directory.bind_dn and directory.bind_password_file {tmp_path / 'ldap-password'}"
            in line)


def test_ldap_directory_refusing_starttls_names_the_url_and_starttls(slapd_server, config):
    """A slapd without a certificate answers the StartTLS request with an error."""
    server = slapd_server(SLAPD_LDIF)
    directory = {"url": server.url, "starttls": True, "people": {"base": "ou=people,dc=example,dc=org"},
                 "teams": {"base": "ou=teams,dc=example,dc=org"}}
    line = line_of(check(config({"jaguar": "http://127.0.0.1:9"}, directory=directory)).stdout, "directory")
    assert line.startswith(f"FAIL  directory             directory {server.url}: StartTLS was refused (")
    assert re.search(r"\); give the server's ldaps:// address in directory\.url, or set directory\.starttls: false "
                     r"where the network may read the bind password \(\d+ ms\)$", line), line


# --- the preflight of a day's series (`billing check --date`), on a real Prometheus

CHECKED = "2026-11-20"


def preflight_world(**changes):
    """A small day of cluster jaguar; `changes` replace fields of its cluster."""
    world = make_world(5, DAY, pods=40, nodes=4, clusters=("jaguar",), day_seconds=86400)
    return replace(world, clusters=(replace(world.clusters[0], **changes),))


def check_day(config_path: str):
    return CliRunner().invoke(main, ["check", "--date", CHECKED, "--config", config_path])


def test_a_complete_day_passes_and_names_the_store(prometheus_server, config):
    prom = prometheus_server(preflight_world())
    result = check_day(config({"jaguar": prom.url}, clusters_selector='cluster="jaguar"'))
    assert result.exit_code == 0, result.output
    assert "the store is Prometheus 2.42" in line_of(result.stdout, "prometheus jaguar")
    line = line_of(result.stdout, "series jaguar")
    assert line.startswith("ok    ") and f"every series the bill needs has samples on {CHECKED}" in line


def test_victoria_metrics_with_renamed_labels_names_the_store_and_the_renames(victoria_metrics_server, config):
    """A honor_labels: false scrape in a VictoriaMetrics: the store by stores.engine_of, the series found under
    the renamed labels, and the renames per family as a warning (the bill reads them right)."""
    world = replace(preflight_world(), honor_labels=False)
    vm = victoria_metrics_server(world)
    result = check_day(config({"jaguar": vm.url}, clusters_selector='cluster="jaguar"'))
    assert result.exit_code == 0, result.output
    assert "the store is VictoriaMetrics" in line_of(result.stdout, "prometheus jaguar")
    line = line_of(result.stdout, "series jaguar")
    assert line.startswith("WARN  "), line
    assert ("kube-state-metrics labels read from exported_namespace, exported_pod, exported_container, exported_node "
            "(a scrape with honor_labels: false") in line
    nodes = len(world.clusters[0].nodes)  # counted by exported_node, not by kube-state-metrics' own node
    assert f"matches kube-state-metrics series of {nodes} nodes" in line_of(result.stdout, "selector jaguar")


def test_a_gpu_resource_missing_from_gpu_resources_is_a_warning(prometheus_server, config):
    world = preflight_world()
    [jaguar] = world.clusters
    index, pod = next((i, p) for i, p in enumerate(jaguar.pods) if any(c.gpu for c in p.containers))
    mig = replace(pod, containers=tuple(replace(c, gpu_resource="nvidia_com_mig_1g_10gb") for c in pod.containers))
    prom = prometheus_server(replace(world, clusters=(replace(jaguar, pods=(*jaguar.pods[:index], mig,
                                                                              *jaguar.pods[index + 1:])),)))
    result = check_day(config({"jaguar": prom.url}))
    assert result.exit_code == 0, result.output  # a warning does not fail
    line = line_of(result.stdout, "series jaguar")
    assert line.startswith("WARN  ")
    assert "nvidia_com_mig_1g_10gb was requested but is not in gpu_resources, so it is billed nothing" in line


def test_nodes_without_the_gpu_model_label_fail_with_the_exporter_flag(prometheus_server, config):
    world = preflight_world()
    [jaguar] = world.clusters
    unlabelled = tuple(replace(node, labels=tuple((ts, {k: v for k, v in labels.items() if k != GPU_PRODUCT_LABEL})
                                                  for ts, labels in node.labels)) for node in jaguar.nodes)
    prom = prometheus_server(replace(world, clusters=(replace(jaguar, nodes=unlabelled),)))
    result = check_day(config({"jaguar": prom.url}))
    assert result.exit_code == 1
    line = line_of(result.stdout, "series jaguar")
    assert line.startswith("FAIL  ")
    assert (f"on {CHECKED}: kube_node_labels with label_nvidia_com_gpu_product is missing (run kube-state-metrics "
            "with --metric-labels-allowlist=nodes=[nvidia.com/gpu.product]") in line


def test_a_selector_that_matches_nothing_is_said_plainly(prometheus_server, config):
    prom = prometheus_server(preflight_world())
    result = check_day(config({"jaguar": prom.url}, clusters_selector='cluster="jagaur"'))
    assert result.exit_code == 1
    line = line_of(result.stdout, "series jaguar")
    assert (f'on {CHECKED}: the selector cluster="jagaur" matches no kube-state-metrics series; '
            'without it kube_pod_info has cluster="jaguar" (check clusters[].prometheus.selector)') in line


@pytest.mark.parametrize("selector, said", [
    ("", "on 2026-10-01: the store holds no kube-state-metrics sample at all (a day outside its retention"),
    ('cluster="jaguar"', 'on 2026-10-01: the store holds no kube-state-metrics sample at all, with or without the '
                         'selector cluster="jaguar" (a day outside its retention'),
])
def test_a_day_without_any_samples_is_said_plainly_before_the_selector_is_blamed(prometheus_server, config, selector,
                                                                               said):
    """A day before the store's first sample (as a day past its retention): the day is empty, whatever the selector."""
    prom = prometheus_server(preflight_world())
    path = config({"jaguar": prom.url}, clusters_selector=selector)
    result = CliRunner().invoke(main, ["check", "--date", "2026-10-01", "--config", path])
    assert result.exit_code == 1
    checked = ["series jaguar", *(["selector jaguar"] if selector else [])]
    for dependency in checked:
        line = line_of(result.stdout, dependency)
        assert line.startswith("FAIL  ") and said in line, line
        assert "check clusters[].prometheus.selector" not in line and "matches no" not in line


def test_workloads_say_which_owner_series_and_cost_labels_are_there(prometheus_server, config):
    prom = prometheus_server(preflight_world())
    result = check_day(config({"jaguar": prom.url}, cost_labels=["experiment", "example.com/project"]))
    line = line_of(result.stdout, "workloads jaguar")
    assert line.startswith("ok    ") and "cost labels experiment, example.com/project have samples" in line


def test_a_cost_label_no_pod_carries_is_a_warning_with_the_flag(prometheus_server, config):
    prom = prometheus_server(preflight_world())
    result = check_day(config({"jaguar": prom.url}, cost_labels=["experiment", "team.example.org/grant"]))
    assert result.exit_code == 0, result.output  # the bill is right; its breakdown coarser
    line = line_of(result.stdout, "workloads jaguar")
    assert line.startswith("WARN  ")
    assert ("no pod's kube_pod_labels carries label_team_example_org_grant, so every pod's is ''; kube-state-metrics "
            "exports pod labels only when allowlisted: run it with "
            "--metric-labels-allowlist=pods=[experiment,team.example.org/grant]") in line
    assert "created_by_kind" not in line and "kube_replicaset_owner" not in line


def test_pods_without_controller_labels_are_a_warning(prometheus_server, config):
    """kube_pod_info without created_by_kind (a relabelling dropped it): every pod would be its own workload."""
    world = preflight_world()
    [jaguar] = world.clusters
    unnamed = replace(jaguar, pods=tuple(replace(pod, created_by_kind="", created_by_name="") for pod in jaguar.pods))
    prom = prometheus_server(replace(world, clusters=(unnamed,)))
    result = check_day(config({"jaguar": prom.url}, cost_labels=["experiment"]))
    assert result.exit_code == 0, result.output
    line = line_of(result.stdout, "workloads jaguar")
    assert line.startswith("WARN  ") and ("no pod's kube_pod_info carries created_by_kind, so every pod is its own "
                                          "workload (Pod/<name>)") in line
