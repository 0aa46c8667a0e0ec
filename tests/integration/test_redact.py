"""Passwords in URLs (and the secrets of the config) appear in no output, log line or check line.

Every test runs billing as a real process, as an operator or a CronJob would,
against real servers or closed ports, with a distinct secret in every URL,
and searches everything the process wrote for the secrets.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from billing.config import MetricsConfig
from billing.jobs.metrics import push_run_metrics
from fixtures.ksm import make_world
from fixtures.servers import free_port, start_pushgateway
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.days import DAY
from tests.helpers.jobs import LDIF
from tests.helpers.run_summaries import summary

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {  # where each secret is configured -> the secret
    "prometheus": "PROM-s3cret", "database": "DB-s3cret", "bind password": "LDAP-bind-s3cret", "smtp password": "SMTP-s3cret", "pushgateway": "PUSH-s3cret",
}
ENV = {"LDAP_PASSWORD": SECRETS["bind password"], "SMTP_USER": "billing", "SMTP_PASSWORD": SECRETS["smtp password"]}


def closed() -> str:
    return f"127.0.0.1:{free_port()}"


def billing(tmp_path: Path, config: dict, *args: str) -> tuple[int, str]:
    """Exit status and everything (stdout and stderr) of `billing ARGS --config FILE`."""
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(config))
    process = subprocess.run(
        [sys.executable, "-m", "billing", *args, "--config", str(path)],
        cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=180,
    )
    return process.returncode, process.stdout + process.stderr


def assert_no_secret(output: str) -> None:
    shown = [where for where, secret in SECRETS.items() if secret in output]
    assert not shown, f"secrets of {shown} printed:\n{output}"


def config_with_secrets(tmp_path: Path, prometheus: str, database: str) -> dict:
    """Every dependency configured with a secret: in its URL, or (LDAP bind, SMTP login) from the environment."""
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": prometheus, "retries": 0, "timeout": "5s"}}
    return {
        **MINIMAL_CONFIG, "clusters": [cluster], "database": database,
        "directory": {"url": f"ldap://{closed()}", "connect_timeout": "2s",
                      "bind_dn": "cn=admin,dc=example,dc=org", "bind_password_env": "LDAP_PASSWORD"},
        "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": free_port(), "starttls": False,
                  "username_env": "SMTP_USER", "password_env": "SMTP_PASSWORD"},
        "metrics": {"pushgateway": f"http://push:{SECRETS['pushgateway']}@{closed()}"},
        "output_dir": str(tmp_path / "reports"),
    }


@pytest.mark.parametrize("options", [[], ["-v"], ["--log-format", "json"]], ids=["text", "verbose", "json"])
def test_check_with_every_dependency_down_prints_no_secret(tmp_path, options):
    prometheus = f"http://billing:{SECRETS['prometheus']}@{closed()}"
    database = f"postgresql+psycopg://billing:{SECRETS['database']}@{closed()}/ledger"
    status, output = billing(tmp_path, config_with_secrets(tmp_path, prometheus, database), *options, "check")
    assert status == 1, output
    assert_no_secret(output)
    assert f"Prometheus of cluster jaguar at {prometheus.replace(SECRETS['prometheus'], '***')} is unreachable" in output
    assert f"database {database.replace(SECRETS['database'], '***')}" in output


@pytest.mark.parametrize("options", [[], ["-v"], ["--log-format", "json"]], ids=["text", "verbose", "json"])
def test_a_run_failing_on_prometheus_or_the_database_prints_no_secret(tmp_path, options):
    prometheus = f"http://billing:{SECRETS['prometheus']}@{closed()}"
    config = config_with_secrets(tmp_path, prometheus, f"sqlite:///{tmp_path}/ledger.db")
    status, output = billing(tmp_path, config, *options, "run", "--date", "2026-11-20")
    assert status == 1 and "Prometheus of cluster jaguar at http://billing:***@127.0.0.1:" in output, output
    assert_no_secret(output)

    config["database"] = f"postgresql+psycopg://billing:{SECRETS['database']}@{closed()}/ledger"
    status, output = billing(tmp_path, config, *options, "run", "--date", "2026-11-20")
    assert status == 1 and "database postgresql+psycopg://billing:***@127.0.0.1:" in output, output
    assert_no_secret(output)


def test_check_against_a_real_prometheus_and_smtp_server_that_refuses_the_login(
    prometheus_server, smtp_server, tmp_path
):
    server = prometheus_server(make_world(3, DAY, pods=5, nodes=2, day_seconds=3600, margin=600))
    prometheus = server.url.replace("http://", f"http://billing:{SECRETS['prometheus']}@")  # Prometheus ignores it
    smtp = smtp_server(auth=("billing", "another password"), auth_required=True)
    config = config_with_secrets(tmp_path, prometheus, f"sqlite:///{tmp_path}/ledger.db")
    config["email"].update(smtp_host=smtp.host, smtp_port=smtp.port)
    (tmp_path / "people.ldif").write_text(LDIF)
    config["directory"] = {"ldif": str(tmp_path / "people.ldif")}
    status, output = billing(tmp_path, config, "-v", "check")
    assert status == 1, output
    assert_no_secret(output)
    assert f"ok    prometheus jaguar     {server.url.replace('http://', 'http://billing:***@')} answered vector(1)" in output
    assert f"FAIL  email                 SMTP server 127.0.0.1:{smtp.port} refused the login: 535 " in output
    assert "; check email.username_env SMTP_USER and email.password_env SMTP_PASSWORD (" in output


def test_a_pushgateway_behind_basic_auth_gets_the_credentials_of_its_url_and_no_log_shows_them(tmp_path, caplog):
    server = start_pushgateway(tmp_path, basic_auth=("push", SECRETS["pushgateway"]))
    try:
        with caplog.at_level(logging.INFO, logger="billing.jobs.metrics"):
            for password in (SECRETS["pushgateway"], "wrong-" + SECRETS["pushgateway"]):
                url = server.url.replace("http://", f"http://push:{password}@")
                push_run_metrics(MetricsConfig(pushgateway=url), summary(), "USD", 93.5)
        assert [r.getMessage() for r in caplog.records] == [
            f"pushed run metrics to the Pushgateway at {server.url} as job billing",
            f"could not push run metrics to the Pushgateway at {server.url} (HTTP Error 401: Unauthorized); "
            "the run itself succeeded",
        ]
        assert_no_secret(caplog.text)
        request = urllib.request.Request(f"{server.url}/metrics")
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(
            f"push:{SECRETS['pushgateway']}".encode()).decode())
        with urllib.request.urlopen(request, timeout=5) as response:
            assert 'billing_run_duration_seconds{instance="",job="billing"} 93.5' in response.read().decode()
    finally:
        server.stop()
