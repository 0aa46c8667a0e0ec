"""cronjob/: the image, the Kubernetes manifests and the alert rules, checked offline.

The manifests are validated against the Kubernetes API schemas that
kubernetes-validate ships, rendered with `kubectl kustomize` (no cluster
needed), and tied to the program itself: the CronJob's arguments are parsed
by the real `billing` command, the ConfigMap's billing.yaml is loaded by
`load_config`, and the alert rules are unit-tested by promtool.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import billing.cli
import billing.web.app
from billing.config import MetricsConfig, load_config
from fixtures.servers import require_program

ROOT = Path(__file__).resolve().parents[2]
CRONJOB = ROOT / "cronjob"
# The oldest Kubernetes the manifests are for (CronJob timeZone is GA since
# 1.27; the API schema accepts a podFailurePolicy rule without
# onPodConditions since 1.29) and the newest whose schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.utils.latest_version()]


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization() -> dict:
    return yaml.safe_load((CRONJOB / "kustomization.yaml").read_text())


def manifests() -> list[dict]:
    return [doc for name in kustomization()["resources"] for doc in documents(CRONJOB / name)]


def find(kind: str, name: str, docs: list[dict] | None = None) -> dict:
    (found,) = [d for d in docs or manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def pod_spec() -> dict:
    return find("CronJob", "billing")["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def container() -> dict:
    (only,) = pod_spec()["containers"]
    return only


def mount_of(volume_name: str, mounts: list[dict]) -> dict:
    (mount,) = [m for m in mounts if m["name"] == volume_name]
    return mount


def volume(name: str, spec: dict) -> dict:
    (found,) = [v for v in spec["volumes"] if v["name"] == name]
    return found


def config_path_in_pod() -> str:
    """Where the CronJob's pod finds billing.yaml: the ConfigMap volume's mount plus the file's key."""
    config_volume = volume("config", pod_spec())
    (generator,) = [g for g in kustomization()["configMapGenerator"] if g["name"] == config_volume["configMap"]["name"]]
    assert generator["files"] == ["billing.yaml"]  # so the ConfigMap's key, and the file's name, is billing.yaml
    return mount_of(config_volume["name"], container()["volumeMounts"])["mountPath"] + "/billing.yaml"


# --- the Kubernetes API schemas -------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_for_the_kubernetes_api(version):
    docs = manifests()
    assert {d["kind"] for d in docs} == {
        "Namespace", "ServiceAccount", "CronJob", "PersistentVolumeClaim", "Deployment", "Service",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # strict: an unknown (misspelt) field fails


def test_a_misspelt_field_is_caught():
    """The validation above can fail: a typo in a security setting does not pass silently."""
    job = find("CronJob", "billing")
    context = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context["readOnlyRootFileSystem"] = context.pop("readOnlyRootFilesystem")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSIONS[0], strict=True)


def test_kustomize_renders_the_whole_deployment():
    rendered = subprocess.run(
        [require_program("kubectl"), "kustomize", str(CRONJOB)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "billing"
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "billing"

    job = find("CronJob", "billing", docs)
    spec = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (billing_container,) = spec["containers"]
    assert billing_container["image"] == "registry.example.org/billing:0.1.0"
    # The generated ConfigMap (its name carries a content hash) holds billing.yaml as it is in the repository.
    config_map = find("ConfigMap", volume("config", spec)["configMap"]["name"], docs)
    assert config_map["metadata"]["name"].startswith("billing-config-")
    assert config_map["data"] == {"billing.yaml": (CRONJOB / "billing.yaml").read_text()}
    server = find("Deployment", "billing-reports", docs)["spec"]["template"]["spec"]
    nginx_config = find("ConfigMap", volume("nginx-config", server)["configMap"]["name"], docs)
    assert nginx_config["data"] == {"default.conf": (CRONJOB / "reports-nginx.conf").read_text()}


# --- the CronJob runs `billing run` with the mounted config --------------------


def test_the_cronjob_runs_billing_run_with_the_config_the_configmap_mounts(monkeypatch):
    args = container()["args"]
    assert args == ["--log-format", "json", "run", "--config", "/etc/billing/billing.yaml"]
    assert config_path_in_pod() == "/etc/billing/billing.yaml"
    assert mount_of("config", container()["volumeMounts"])["readOnly"] is True

    # The same arguments, given to the real command: it runs a day with that config file.
    asked = []
    config = load_config_with_secrets(monkeypatch).model_copy(update={"metrics": MetricsConfig()})
    monkeypatch.setattr("billing.config.load_config", lambda path: asked.append(str(path)) or config)
    monkeypatch.setattr("billing.jobs.run.run_day", lambda config, day, require_coverage, summaries="send": asked.append(day) or SimpleNamespace(undelivered=()))
    # heron's certificate files are the pod's mounted Secret, not on this machine: the run checks them first
    checked = []
    monkeypatch.setattr(billing.config.PrometheusConfig, "check_files", lambda self: checked.append(self.url))
    result = CliRunner().invoke(billing.cli.main, args)
    assert result.exit_code == 0, result.output
    assert asked[0] == "/etc/billing/billing.yaml" and len(checked) == 3


def cronjob_env() -> dict[str, dict]:
    """The secrets the CronJob puts in its environment (its one plain value is PGSSLROOTCERT)."""
    return {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container()["env"] if "valueFrom" in e}


def test_the_database_certificate_is_verified_against_the_mounted_ca():
    """sslmode=prefer encrypted only where the server offered it and verified nothing."""
    config = yaml.safe_load((CRONJOB / "billing.yaml").read_text())
    assert config["database"].endswith("?sslmode=verify-full") and config["web"]["database"].endswith(
        "?sslmode=verify-full")
    serve = [c for c in find("Deployment", "billing-serve")["spec"]["template"]["spec"]["containers"]
             if c["name"] == "billing"][0]
    for spec, each in ((pod_spec(), container()), (find("Deployment", "billing-serve")["spec"]["template"]["spec"],
                                                    serve)):
        [root] = [e["value"] for e in each["env"] if e["name"] == "PGSSLROOTCERT"]
        mount = mount_of("postgres-ca", each["volumeMounts"])
        assert root == mount["mountPath"] + "/ca.crt" and mount["readOnly"] is True
        assert volume("postgres-ca", spec)["configMap"]["name"] == "billing-postgres-ca"


def env_keys(node: object) -> set[str]:
    """Every environment variable that a `*_env` key of the config names."""
    if isinstance(node, dict):
        found = {v for k, v in node.items() if k.endswith("_env") and v}
        return found.union(*(env_keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(env_keys(v) for v in node))
    return set()


def load_config_with_secrets(monkeypatch):
    """cronjob/billing.yaml as billing loads it in the pod, each secret a distinct made-up value."""
    for name in cronjob_env():
        monkeypatch.setenv(name, f"secret-of-{name}")
    return load_config(CRONJOB / "billing.yaml")


def test_the_configmaps_billing_yaml_loads_with_the_secrets_the_cronjob_provides(monkeypatch):
    named = env_keys(yaml.safe_load((CRONJOB / "billing.yaml").read_text()))
    assert named == {"BILLING_JAGUAR_PROMETHEUS_TOKEN", "BILLING_IBIS_PROMETHEUS_PASSWORD", "BILLING_LDAP_PASSWORD",
                     "BILLING_SMTP_USER", "BILLING_SMTP_PASSWORD", "BILLING_METRICS_TOKEN"}
    provided = cronjob_env()
    assert named - {"BILLING_METRICS_TOKEN"} | {"PGPASSWORD"} == set(provided)  # /metrics is serve's, not the job's
    assert {ref["name"] for ref in provided.values()} == {"billing-credentials"}

    config = load_config_with_secrets(monkeypatch)
    # three clusters, three stores, each with its own credential
    jaguar, ibis, heron = (c.prometheus for c in config.clusters)
    assert jaguar.bearer_token == "secret-of-BILLING_JAGUAR_PROMETHEUS_TOKEN" and ibis.bearer_token is None
    assert ibis.basic_auth == ("billing", "secret-of-BILLING_IBIS_PROMETHEUS_PASSWORD")
    assert ibis.headers == {"X-Scope-OrgID": "ibis"}
    mounted = next(m["mountPath"] for m in container()["volumeMounts"] if m["name"] == "heron-prometheus")
    assert volume("heron-prometheus", pod_spec())["secret"]["secretName"] == "billing-heron-prometheus"
    assert all(path.startswith(mounted + "/") for path in (heron.ca_file, heron.cert_file, heron.key_file))
    assert config.directory.bind_password == "secret-of-BILLING_LDAP_PASSWORD"
    assert (config.email.username, config.email.password) == (
        "secret-of-BILLING_SMTP_USER", "secret-of-BILLING_SMTP_PASSWORD",
    )
    # PostgreSQL's password comes from PGPASSWORD (libpq), never from the URL in the ConfigMap.
    assert config.database.startswith("postgresql+psycopg://billing@")
    # A billing day is a day in the zone the schedule is written in.
    assert config.timezone == find("CronJob", "billing")["spec"]["timeZone"]
    assert config.metrics.pushgateway.startswith("http://")


def test_without_its_secrets_the_configmap_names_the_missing_variable(monkeypatch):
    for name in cronjob_env():
        monkeypatch.delenv(name, raising=False)
    config = load_config(CRONJOB / "billing.yaml")  # secrets are read by the commands that use them
    with pytest.raises(billing.config.ConfigError, match="BILLING_JAGUAR_PROMETHEUS_TOKEN, which is not set"):
        config.run_secrets()


def test_everything_billing_writes_is_on_a_writable_volume(monkeypatch):
    """The root filesystem is read-only, so output_dir and /tmp must be mounted volumes."""
    config = load_config_with_secrets(monkeypatch)
    writable = [m["mountPath"] for m in container()["volumeMounts"] if not m.get("readOnly")]
    assert "/tmp" in writable
    written = [config.output_dir]
    if config.email.outbox_dir:
        written.append(config.email.outbox_dir)
    if config.database.startswith("sqlite:///"):
        written.append(str(Path(config.database.removeprefix("sqlite:///")).parent))
    for path in written:
        assert any(path == m or path.startswith(m + "/") for m in writable), f"{path} is not on a writable volume"
    assert volume("reports", pod_spec())["persistentVolumeClaim"]["claimName"] == "billing-reports"


# --- how the job is scheduled, retried and confined ---------------------------


def test_the_schedule_is_daily_after_midnight_and_before_the_dst_hour():
    spec = find("CronJob", "billing")["spec"]
    minute, hour, *days = spec["schedule"].split()
    assert days == ["*", "*", "*"]
    assert (0, 0) < (int(hour), int(minute)) < (2, 0)
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    # Even a late start that runs to its deadline ends before the next night's schedule.
    assert spec["startingDeadlineSeconds"] + job["activeDeadlineSeconds"] < 24 * 3600
    assert job["backoffLimit"] >= 1 and job["ttlSecondsAfterFinished"] >= 24 * 3600
    assert job["template"]["spec"]["restartPolicy"] == "Never"


def test_a_configuration_error_fails_the_job_without_retries(tmp_path):
    """billing exits 2 on a bad config; the pod failure policy must name that same status."""
    (tmp_path / "billing.yaml").write_text("clusters: []\n")
    result = CliRunner().invoke(billing.cli.main, ["run", "--config", str(tmp_path / "billing.yaml")])
    assert result.exit_code == 2
    (fail_job,) = [
        r for r in find("CronJob", "billing")["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
        if r["action"] == "FailJob"
    ]
    assert fail_job["onExitCodes"] == {"containerName": "billing", "operator": "In", "values": [result.exit_code]}


def test_the_job_runs_as_the_images_user_without_privileges():
    pod = pod_spec()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == image_user()
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == find("ServiceAccount", "billing")["metadata"]["name"]
    for spec in (pod, find("Deployment", "billing-reports")["spec"]["template"]["spec"]):
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for each in spec["containers"]:
            context = each["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert set(each["resources"]["requests"]) == set(each["resources"]["limits"]) == {"cpu", "memory"}


# --- the reports: written by the job, served read-only ------------------------


def test_the_reports_server_serves_the_volume_the_job_writes():
    server = find("Deployment", "billing-reports")
    pod = server["spec"]["template"]
    (nginx,) = pod["spec"]["containers"]
    reports = volume("reports", pod["spec"])
    assert reports["persistentVolumeClaim"] == {"claimName": "billing-reports", "readOnly": True}
    assert mount_of("reports", nginx["volumeMounts"])["readOnly"] is True
    root = re.search(r"^\s*root\s+(\S+);", (CRONJOB / "reports-nginx.conf").read_text(), re.M).group(1)
    assert mount_of("reports", nginx["volumeMounts"])["mountPath"] == root
    assert find("PersistentVolumeClaim", "billing-reports")["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert server["spec"]["strategy"]["type"] == "Recreate"

    # The job lands on the server's node, where the ReadWriteOnce volume is attached.
    (term,) = pod_spec()["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()

    service = find("Service", "billing-reports")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in nginx["ports"]}
    listen = re.search(r"^\s*listen\s+(\d+);", (CRONJOB / "reports-nginx.conf").read_text(), re.M).group(1)
    assert [p["containerPort"] for p in nginx["ports"]] == [int(listen)]
    assert nginx["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert "location = /healthz" in (CRONJOB / "reports-nginx.conf").read_text()


# --- billing serve: behind oauth2-proxy in its pod, on a read-only role ----------


def serve_containers() -> dict[str, dict]:
    pod = find("Deployment", "billing-serve")["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def test_billing_serve_runs_the_jobs_image_and_config_behind_oauth2_proxy(monkeypatch):
    pod = find("Deployment", "billing-serve")["spec"]["template"]
    serve, proxy = serve_containers()["billing"], serve_containers()["oauth2-proxy"]
    assert serve["image"] == container()["image"]
    assert volume("config", pod["spec"]) == volume("config", pod_spec())
    assert mount_of("config", serve["volumeMounts"])["mountPath"] + "/billing.yaml" == config_path_in_pod()
    (port,) = serve["ports"]
    assert serve["args"] == ["--log-format", "json", "serve", "--host", "0.0.0.0", "--port",
                             str(port["containerPort"]), "--config", config_path_in_pod()]
    assert serve["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # oauth2-proxy forwards over loopback, the only trusted address; the Service reaches oauth2-proxy only.
    assert f"--upstream=http://127.0.0.1:{port['containerPort']}/" in proxy["args"]
    service = find("Service", "billing-serve")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    # people through oauth2-proxy; Prometheus to billing serve itself for /metrics
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [p["name"] for p in proxy["ports"]] + [port["name"]]
    for each in (serve, proxy):
        assert each["securityContext"]["readOnlyRootFilesystem"] is True
        assert each["securityContext"]["capabilities"] == {"drop": ["ALL"]}

    # The pod holds only the reader's password; the job's secrets that billing.yaml names are empty.
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in serve["env"] if "valueFrom" in e}
    assert secrets == {"PGPASSWORD": {"name": "billing-credentials", "key": "database-reader-password"},
                       "BILLING_METRICS_TOKEN": {"name": "billing-credentials", "key": "metrics-token"}}
    empty = {e["name"] for e in serve["env"] if e.get("value") == ""}
    assert empty == env_keys(yaml.safe_load((CRONJOB / "billing.yaml").read_text())) - {"BILLING_METRICS_TOKEN"}
    for name in empty:
        monkeypatch.setenv(name, "")
    config = load_config(CRONJOB / "billing.yaml")
    assert config.web.database.startswith("postgresql+psycopg://billing_reader@")
    assert config.web.trusted_proxies == ["127.0.0.1/32", "::1/128"]

    # The same arguments, given to the real command, serve that config on that port.
    served = []
    monkeypatch.setattr("billing.config.load_config", lambda path: config if str(path) == config_path_in_pod() else None)
    monkeypatch.setattr(billing.web.app, "serve", lambda config, host, port: served.append((config.web.auth, host, port)))
    result = CliRunner().invoke(billing.cli.main, serve["args"])
    assert result.exit_code == 0, result.output
    assert served == [("header", "0.0.0.0", port["containerPort"])]


def test_billing_mcp_answers_assistants_in_serves_pod_through_the_same_proxy(monkeypatch):
    """billing mcp --http listens on loopback only; oauth2-proxy sends /mcp to it, after checking the
    assistant's bearer token as it checks a browser's cookie, and sets the same user header."""
    mcp, serve, proxy = (serve_containers()[name] for name in ("billing-mcp", "billing", "oauth2-proxy"))
    assert (mcp["image"], mcp["volumeMounts"]) == (serve["image"], serve["volumeMounts"])
    (port,) = mcp["ports"]
    assert mcp["args"] == ["--log-format", "json", "mcp", "--http", "--host", "127.0.0.1", "--port",
                           str(port["containerPort"]), "--config", config_path_in_pod()]
    assert f"--upstream=http://127.0.0.1:{port['containerPort']}/mcp" in proxy["args"]
    assert "--skip-jwt-bearer-tokens=true" in proxy["args"]
    assert port["name"] not in [p["targetPort"] for p in find("Service", "billing-serve")["spec"]["ports"]]
    # Only the reader's password: every other secret billing.yaml names is empty, /metrics' token included.
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in mcp["env"] if "valueFrom" in e}
    assert secrets == {"PGPASSWORD": {"name": "billing-credentials", "key": "database-reader-password"}}
    empty = {e["name"] for e in mcp["env"] if e.get("value") == ""}
    assert empty == env_keys(yaml.safe_load((CRONJOB / "billing.yaml").read_text()))
    assert mcp["securityContext"] == serve["securityContext"]

    for name in empty:
        monkeypatch.setenv(name, "")
    config = load_config(CRONJOB / "billing.yaml")
    served = []
    monkeypatch.setattr("billing.config.load_config", lambda path: config if str(path) == config_path_in_pod() else None)
    monkeypatch.setattr("billing.web.mcp_server.serve_http",
                        lambda config, host, port: served.append((config.web.auth, host, port)))
    result = CliRunner().invoke(billing.cli.main, mcp["args"])
    assert result.exit_code == 0, result.output
    assert served == [("header", "127.0.0.1", port["containerPort"])]


# --- the image -------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, (KEYWORD, arguments), grouped by FROM."""
    text = re.sub(r"\\\n", " ", (CRONJOB / "Dockerfile").read_text())  # join continued lines
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), arguments.strip()))
    return stages


def final(keyword: str) -> str:
    """The last `keyword` of the final stage: the one that holds."""
    return [arguments for k, arguments in dockerfile_stages()[-1] if k == keyword][-1]


def image_user() -> int:
    user = final("USER").split(":")[0]
    assert user.isdigit(), "a numeric user, so that runAsNonRoot can check it"
    return int(user)


def test_the_image_is_built_in_two_stages_on_python_3_11():
    build, runtime = dockerfile_stages()
    assert build[0] == ("FROM", "python:3.11-bookworm AS build")
    assert runtime[0] == ("FROM", "python:3.11-slim-bookworm")
    runtime_text = " ".join(arguments for _, arguments in runtime)
    assert "from=build" in runtime_text and "--no-index" in runtime_text
    for compiler in ("gcc", "build-essential", "g++", "make"):
        assert compiler not in runtime_text
    # Debian packages only where a dependency needs a shared library: WeasyPrint's Pango and a font for its PDFs
    installed = re.findall(r"apt-get install -y --no-install-recommends ([^&]+)", runtime_text)
    assert [names.split() for names in installed] == [["libpango-1.0-0", "libpangoft2-1.0-0", "fonts-dejavu-core"]]


def test_the_image_runs_the_console_script_as_a_non_root_user():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"billing": "billing.cli:main"}
    assert yaml.safe_load(final("ENTRYPOINT")) == ["billing"]  # exec form, a JSON list
    assert image_user() == 10001
    # CMD is the nightly run, the same as the CronJob's arguments without --log-format.
    assert yaml.safe_load(final("CMD")) == container()["args"][2:]


def test_the_image_builds_the_locked_dependencies():
    """requirements.lock pins every dependency within pyproject's ranges, and stage 1 builds exactly those."""
    copied = [arguments for keyword, arguments in dockerfile_stages()[0] if keyword == "COPY"]
    assert any("requirements.lock" in arguments.split() for arguments in copied)
    (build,) = [arguments for keyword, arguments in dockerfile_stages()[0] if keyword == "RUN"]
    assert "--require-hashes --wheel-dir /wheels -r requirements.lock" in build and "--no-deps" in build
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), flags=re.MULTILINE)
    locked = {canonicalize_name(name): version for name, version in pins}
    wrong = []
    for wanted in map(Requirement, tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]):
        version = locked.get(canonicalize_name(wanted.name))
        if version is None or version not in wanted.specifier:
            wrong.append(f"{wanted} (locked: {version or 'missing'})")
    assert not wrong, "requirements.lock is stale (re-run the pip-compile command at its top): " + ", ".join(wrong)


def test_time_zones_resolve_without_a_system_zone_database():
    """A slim image may lack /usr/share/zoneinfo; the tzdata dependency is zoneinfo's fallback then."""
    no_system_zones = (
        "import zoneinfo, datetime; zoneinfo.reset_tzpath([]);"
        "print(zoneinfo.ZoneInfo('Europe/Berlin').utcoffset(datetime.datetime(2026, 7, 1)))"
    )
    result = subprocess.run([sys.executable, "-c", no_system_zones], capture_output=True, text=True, timeout=60)
    assert result.stdout == "2:00:00\n", result.stderr
    assert any(d.startswith("tzdata") for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def test_hadolint_finds_nothing():
    result = subprocess.run(
        [require_program("hadolint"), "--no-color", str(CRONJOB / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_build_stage_makes_a_wheel_with_the_package_and_its_console_script(tmp_path):
    """Stage 1 with exactly the files it copies: nothing the package needs may be left behind."""
    (tmp_path / "src").mkdir()
    for keyword, arguments in dockerfile_stages()[0]:
        if keyword == "COPY":
            *sources, destination = arguments.split()
            for source in sources:
                target = tmp_path / "src" / (source if destination.endswith("/") else destination)
                copy = shutil.copytree if (ROOT / source).is_dir() else shutil.copy
                copy(ROOT / source, target)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path / "wheels"),
         str(tmp_path / "src")],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = (tmp_path / "wheels").glob("billing-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "billing = billing.cli:main" in archive.read(entry_points).decode()
    package = {
        str(p.relative_to(ROOT)) for p in (ROOT / "billing").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert package <= names, f"left out of the wheel: {sorted(package - names)}"


# --- the alert -----------------------------------------------------------------------

ALERT_TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # A success at t=0 (Unix time 0), then nothing new for 30 hours.
      - series: 'billing_last_success_timestamp_seconds{job="billing", instance=""}'
        values: '0x1800'
    alert_rule_test:
      - {eval_time: 25h, alertname: BillingNoSuccessfulRun, exp_alerts: []}
      - eval_time: 27h
        alertname: BillingNoSuccessfulRun
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: No successful billing run in 26 hours
              description: >-
                The last successful billing run finished 1d 3h 0m 0s ago.
                See `kubectl -n billing get jobs` and the failed job's logs.
      - {eval_time: 27h, alertname: BillingRunNeverReported, exp_alerts: []}
  - interval: 1m
    input_series:
      # Successes at t=0 and at 24h: at 27h the last one is 3 hours old.
      - series: 'billing_last_success_timestamp_seconds{job="billing", instance=""}'
        values: '0x1439 86400x360'
    alert_rule_test:
      - {eval_time: 27h, alertname: BillingNoSuccessfulRun, exp_alerts: []}
  - interval: 1m
    input_series:
      # The Pushgateway holds nothing of billing's.
      - series: 'up{job="pushgateway"}'
        values: '1x1800'
    alert_rule_test:
      - {eval_time: 25h, alertname: BillingRunNeverReported, exp_alerts: []}
      - eval_time: 27h
        alertname: BillingRunNeverReported
        exp_alerts:
          - exp_labels: {severity: warning, job: billing}
            exp_annotations:
              summary: No billing run has reported success in 26 hours
              description: >-
                billing_last_success_timestamp_seconds{job="billing"} has not been seen for 26 hours.
                Check that metrics.pushgateway is set in billing.yaml and that Prometheus scrapes the Pushgateway.
"""


def test_the_alert_fires_after_26_hours_without_a_success(tmp_path):
    promtool = require_program("promtool")
    (rule,) = documents(CRONJOB / "alerts.yaml")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    (tmp_path / "tests.yaml").write_text(ALERT_TESTS)
    for check in (["check", "rules", "rules.yaml"], ["test", "rules", "tests.yaml"]):
        result = subprocess.run([promtool, *check], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_yaml_block_of_the_runbook_is_yaml_and_every_kubernetes_one_is_valid():
    """docs/deploy.md is followed by copying: its YAML must parse, and a manifest of a built-in kind must be valid
    for the Kubernetes API (operators' kinds, a ServiceMonitor or a CloudNativePG Cluster, are only parsed)."""
    text = (CRONJOB.parent / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    for block in blocks:
        for doc in yaml.safe_load_all(block):
            if isinstance(doc, dict) and doc.get("apiVersion") in ("v1", "apps/v1", "batch/v1"):
                kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
