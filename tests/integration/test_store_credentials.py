"""Three clusters, three stores, three kinds of credentials (docs/configuration.md `clusters[].prometheus`).

A real Prometheus holds the three clusters' series; a real nginx in front of it stands in for each cluster's
own endpoint, each requiring its credential: jaguar a bearer token and a Mimir tenant header, ibis HTTP basic
auth, heron a client certificate (mutual TLS) over https with a private CA. `billing run` bills all three;
each credential missing or wrong fails the run with a sentence naming its cluster, and writes nothing.
"""

from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.servers import free_port, make_client_certificate, make_test_ca, start_nginx
from tests.helpers.prometheus_jobs import PRICES, write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
TOKEN, PASSWORD, TENANT = "jaguar-t0ken", "ibis-pa55", "lab-a"


@pytest.fixture
def stores(prometheus_server, tmp_path_factory):
    """{cluster: URL} of nginx in front of one Prometheus holding the three clusters' series."""
    world = make_world(8, DAY.start.timestamp(), pods=40, clusters=("jaguar", "ibis", "heron"))
    prom = prometheus_server(world)
    upstream = prom.url.removeprefix("http://")
    work = tmp_path_factory.mktemp("nginx")
    certs = make_test_ca(work / "tls")
    client_cert, client_key = make_client_certificate(certs)
    (work / "htpasswd").write_text(f"billing:{{PLAIN}}{PASSWORD}\n")
    ports = {name: free_port() for name in ("jaguar", "ibis", "heron")}
    sites = f"""
        server {{
            listen 127.0.0.1:{ports['jaguar']};
            location / {{
                if ($http_authorization != "Bearer {TOKEN}") {{ return 401; }}
                if ($http_x_scope_orgid != "{TENANT}") {{ return 401; }}
                proxy_pass http://{upstream};
            }}
        }}
        server {{
            listen 127.0.0.1:{ports['ibis']};
            location / {{
                auth_basic "ibis";
                auth_basic_user_file {work / 'htpasswd'};
                proxy_pass http://{upstream};
            }}
        }}
        server {{
            listen 127.0.0.1:{ports['heron']} ssl;
            ssl_certificate {certs.cert};
            ssl_certificate_key {certs.key};
            ssl_client_certificate {certs.ca_cert};
            ssl_verify_client on;
            location / {{ proxy_pass http://{upstream}; }}
        }}"""
    proxy = start_nginx(work, sites, list(ports.values()))
    yield {"jaguar": f"http://127.0.0.1:{ports['jaguar']}", "ibis": f"http://127.0.0.1:{ports['ibis']}",
           "heron": f"https://127.0.0.1:{ports['heron']}"}, certs, (client_cert, client_key)
    proxy.stop()


def configure(tmp_path: Path, stores, **wrong: dict) -> str:
    urls, certs, (client_cert, client_key) = stores
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": urls["jaguar"]})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"] = [{"name": name, "prometheus": {"url": url, "selector": f'cluster="{name}"', "retries": 0}}
                            for name, url in urls.items()]
    credentials = {
        "jaguar": {"bearer_token_env": "JAGUAR_TOKEN", "headers": {"X-Scope-OrgID": TENANT}},
        "ibis": {"basic_auth_user": "billing", "basic_auth_password_file": str(tmp_path / "ibis-password")},
        "heron": {"ca_file": str(certs.ca_cert), "cert_file": str(client_cert), "key_file": str(client_key)},
    }
    (tmp_path / "ibis-password").write_text(PASSWORD + "\n")
    for cluster in settings["clusters"]:
        cluster["prometheus"].update(credentials[cluster["name"]])
        cluster["prometheus"].update(wrong.get(cluster["name"], {}))
        cluster["prices"] = PRICES["jaguar"]
    settings["waste"] = {"enabled": False}
    Path(config).write_text(yaml.safe_dump(settings))
    return config


def test_each_cluster_is_reached_with_its_own_credentials(stores, tmp_path, monkeypatch):
    monkeypatch.setenv("JAGUAR_TOKEN", TOKEN)
    # heron's ca_file was ignored wherever the environment names a CA bundle for requests (many images do)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    config = configure(tmp_path, stores)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        billed = {row[0] for row in conn.execute(text("select distinct cluster from chargeback"))}
    assert billed == {"jaguar", "ibis", "heron"}
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", config])
    lines = {line[6:26].strip(): line[:4].strip() for line in checked.stdout.splitlines()}
    assert [lines[f"prometheus {name}"] for name in ("jaguar", "ibis", "heron")] == ["ok"] * 3, checked.stdout


NONE_SENT = ("this cluster sends none; set clusters[2].prometheus.bearer_token_env or _file, "
             "clusters[2].prometheus.basic_auth_user and basic_auth_password_env or _file, clusters[2].prometheus.headers "
             "(an API key, a tenant's X-Scope-OrgID), or clusters[2].prometheus.cert_file and key_file")


@pytest.mark.parametrize("cluster, wrong, says", [
    ("jaguar", {"headers": {"X-Scope-OrgID": "lab-b"}},
     "refused access (HTTP 401: 401 Authorization Required): check the credentials this cluster sends "
     "(clusters[0].prometheus.bearer_token_env JAGUAR_TOKEN; clusters[0].prometheus.headers X-Scope-OrgID)"),
    ("ibis", {"basic_auth_user": "someone"},
     "refused access (HTTP 401: 401 Authorization Required): check the credentials this cluster sends "
     "(clusters[1].prometheus.basic_auth_user someone; clusters[1].prometheus.basic_auth_password_file "),
    ("heron", {"cert_file": "", "key_file": ""},
     f"refused access (HTTP 400: 400 No required SSL certificate was sent): {NONE_SENT}"),
    ("heron", {"ca_file": ""}, "set clusters[2].prometheus.ca_file to the CA that signed the server's certificate "
                               "(the bundle REQUESTS_CA_BUNDLE names, /etc/ssl/certs/ca-certificates.crt, did not)"),
    ("jaguar", {"url": "/prometheus"},  # appended to the URL: Mimir's prefix on a store that has none
     "has no Prometheus API there (HTTP 404: 404 page not found): clusters[0].prometheus.url must be the address "
     "/api/v1 follows, with any path prefix (Mimir's /prometheus, a proxy's or --web.route-prefix)"),
])
def test_a_wrong_credential_fails_the_run_and_the_check_naming_the_key(stores, tmp_path, monkeypatch, cluster, wrong,
                                                                       says):
    """A store's 401 printed nginx's HTML page and named no key; a TLS failure did not name ca_file."""
    monkeypatch.setenv("JAGUAR_TOKEN", TOKEN)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    if "url" in wrong:
        wrong = {"url": stores[0][cluster] + wrong["url"]}
    config = configure(tmp_path, stores, **{cluster: wrong})
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 1, result.output
    assert f"cluster {cluster}" in result.output and says in result.output, result.output
    assert "<" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "ledger.db").exists() or not create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect(
    ).execute(text("select count(*) from chargeback")).scalar()
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", config])
    [line] = [line for line in checked.stdout.splitlines() if line.startswith(f"FAIL  prometheus {cluster} ")]
    assert says in line and "<" not in line


def test_an_unusable_client_certificate_is_a_config_error_naming_the_key(stores, tmp_path, monkeypatch):
    monkeypatch.setenv("JAGUAR_TOKEN", TOKEN)
    (tmp_path / "not-a-cert.pem").write_text("hello\n")
    config = configure(tmp_path, stores, heron={"cert_file": str(tmp_path / "not-a-cert.pem")})
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 2, result.output
    assert "clusters[2].prometheus: cert_file" in result.output and "no usable PEM certificate" in result.output
