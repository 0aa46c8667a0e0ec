import shutil
import time
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from billing.cli import main
from billing.config import ConfigError, config_path, load_config, parse_duration
from tests.helpers.config import MINIMAL_CONFIG, assert_refused

CONTRACT_EXAMPLE = Path(__file__).with_name("contract_example.yaml")  # the shape every release must keep loading


def cluster(**changes) -> dict:
    return {**MINIMAL_CONFIG["clusters"][0], **changes}


def test_the_example_config_is_accepted_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("BILLING_LDAP_PASSWORD", "s3cret")
    monkeypatch.setenv("BILLING_SMTP_USER", "billing")
    monkeypatch.setenv("BILLING_SMTP_PASSWORD", "mail-s3cret")
    config = load_config(Path(shutil.copy(CONTRACT_EXAMPLE, tmp_path / "billing.yaml")))
    assert [c.name for c in config.clusters] == ["jaguar", "ibis"]
    assert config.step == 60
    assert config.clusters[0].prometheus.timeout == 120
    assert config.clusters[0].prices.gpu_models["NVIDIA-H100-80GB-HBM3"] == 2.40
    assert config.directory.bind_password == "s3cret"
    assert config.email.from_ == "Cluster billing <billing@example.org>"
    assert config.email.password == "mail-s3cret"


@pytest.mark.parametrize(
    "text, seconds",
    [("60s", 60), ("2m", 120), ("1h30m", 5400), ("500ms", 0.5), (90, 90), ("1d", 86400)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "60", "1x", "m5", "-5s", "0s", True])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    "changes, key, words",
    [
        ({"colour": "red"}, "colour", "unknown key"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "tip": 1})]}, "clusters[0].prices.tip", "unknown key"),
        ({"step": "7s"}, "step", "divides 30m"),
        ({"step": "1h"}, "step", "divides 30m"),
        ({"step": "ten"}, "step", "duration"),
        ({"timezone": "Mars/Olympus"}, "timezone", "unknown timezone"),
        ({"currency": "euro"}, "currency", "ISO 4217"),
        ({"clusters": [cluster(), cluster()]}, "clusters", "duplicate cluster name 'jaguar'"),
        ({"clusters": []}, "clusters", "at least 1"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "gpu_hour": -1})]}, "clusters[0].prices.gpu_hour", "greater than or equal to 0"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "gpu_hour": True})]}, "clusters[0].prices.gpu_hour",
         "expected a number, got true"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "gpu_hour": 1e25})]}, "clusters[0].prices.gpu_hour",
         "less than 1000000000"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "memory_gib_hour": 1e308})]},
         "clusters[0].prices.memory_gib_hour", "less than 1000000000"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "cpu_core_hour": float("inf")})]},
         "clusters[0].prices.cpu_core_hour", "expected a finite number, got inf"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "cpu_core_hour": float("nan")})]},
         "clusters[0].prices.cpu_core_hour", "expected a finite number, got nan"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "gpu_models": {"A100": False}})]},
         "clusters[0].prices.gpu_models.A100", "expected a number, got false"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "storage_classes": {"fast-nvme": -0.0001}})]},
         "clusters[0].prices.storage_classes.fast-nvme", "greater than or equal to 0"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "storage_classes": {"bulk": True}})]},
         "clusters[0].prices.storage_classes.bulk", "expected a number, got true"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "storage_gib_hour": float("inf")})]},
         "clusters[0].prices.storage_gib_hour", "expected a finite number, got inf"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "storage_gib_hour": "cheap"})]},
         "clusters[0].prices.storage_gib_hour", "number"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "priority_classes": {"backfill": 1e9}})]},
         "clusters[0].prices.priority_classes.backfill", "less than 1000000000"),
        ({"clusters": [cluster(prices={**cluster()["prices"], "cpu_core_hour": "cheap"})]},
         "clusters[0].prices.cpu_core_hour", "number"),
        ({"clusters": [cluster(prometheus={"url": "http://x", "replay": "dir"})]}, "clusters[0].prometheus", "exactly one"),
        ({"directory": {}}, "directory", "exactly one of url and ldif"),
        ({"namespaces": {"team_pattern": "^team-(.*)$"}}, "namespaces.team_pattern", "(?P<team>"),
        ({"namespaces": {"person_pattern": "(("}}, "namespaces.person_pattern", "regular expression"),
        ({"email": {"enabled": True}}, "email", "smtp_host or outbox_dir"),
        ({"email": {"smtp_host": "mail", "ca_file": "/nonexistent/ca.pem"}}, "email",
         "ca_file /nonexistent/ca.pem cannot be read (No such file or directory)"),
        ({"directory": {"url": "ldap://cn=admin:hunter2@ldap.example.org"}}, "directory",
         "url 'ldap://cn=admin:***@ldap.example.org' names a user; give it as bind_dn and bind_password_env or _file"),
        ({"clusters": [cluster(label_names={"namespce": "exported_namespace"})]}, "clusters[0].label_names.namespce",
         "unknown key"),
        ({"clusters": [cluster(label_names={"pod": "exported pod"})]}, "clusters[0].label_names.pod", "pattern"),
        ({"cost_labels": ["experiment", "my label"]}, "cost_labels",
         "'my label' is no Kubernetes label key (like experiment or example.com/project)"),
        ({"cost_labels": ["experiment", "experiment"]}, "cost_labels", "'experiment' is listed twice"),
        ({"clusters": [cluster(reserved_pools={"node_label": "label_pool", "teams": {"p": "robotics"}},
                               kueue={"queues": {"research": {"team": "vision"}}})]}, "clusters[0]",
         "reserved_pools and kueue are both set: a cluster has one or the other"),
        ({"clusters": [cluster(unrequested="share", kueue={"queues": {"research": {"team": "vision"}}})]}, "clusters[0]",
         "kueue and unrequested: share are both set"),
        ({"clusters": [cluster(kueue={"queues": {"research": {"namespaces": ["team-vision"]}}})]},
         "clusters[0].kueue.queues.research.team", "required"),
        ({"clusters": [cluster(kueue={"queues": {}})]}, "clusters[0].kueue.queues",
         "lists no ClusterQueue, so no quota would be billed: list the queues and their teams, or remove kueue"),
        ({"clusters": [cluster(kueue={"queues": {"research": {"team": "vision"}}, "flavors": {"h100": ""}})]},
         "clusters[0].kueue.flavors.h100", "at least 1 character"),
        ({"cost_labels": ["example.com/x", "example_com_x"]}, "cost_labels",
         "'example.com/x' and 'example_com_x' are both exported as label_example_com_x by kube-state-metrics"),
    ],
)
def test_each_mistake_names_its_key(write_config, changes, key, words):
    assert_refused(write_config(**changes), key, words)


def test_missing_secret_variable_is_named_and_secret_values_never_shown(write_config, monkeypatch):
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    path = write_config(clusters=[cluster(prometheus={"url": "http://x", "bearer_token_env": "NO_SUCH_TOKEN"})])
    config = load_config(path)  # read when used: commands that only read the ledger need no token
    with pytest.raises(ConfigError, match=r"^clusters\[0\]\.prometheus: bearer_token_env names the environment "
                                          r"variable NO_SUCH_TOKEN, which is not set$"):
        _ = config.clusters[0].prometheus.bearer_token
    with pytest.raises(ConfigError, match=r"clusters\[0\]\.prometheus: bearer_token_env names .*NO_SUCH_TOKEN"):
        config.run_secrets()

    monkeypatch.setenv("LDAP_PW", "hunter2")
    path = write_config(directory={"ldif": "x", "bind_password_env": "LDAP_PW", "colour": "hunter2"})
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "hunter2" not in str(error.value)


def test_secrets_from_files_and_empty_means_unset(write_config, tmp_path):
    token = tmp_path / "token"
    token.write_text("abc123\n")
    config = load_config(write_config(clusters=[cluster(prometheus={
        "url": "http://x", "bearer_token_file": str(token), "bearer_token_env": ""})]))
    assert config.clusters[0].prometheus.bearer_token == "abc123"
    assert "abc123" not in repr(config)

    config = load_config(write_config(clusters=[cluster(prometheus={
        "url": "http://x", "bearer_token_file": str(tmp_path / "missing")})]))
    with pytest.raises(ConfigError, match="bearer_token_file .*missing.* cannot be read"):
        config.run_secrets()


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "billing.yaml"
    path.write_text("timezone: UTC\nclusters: [\n  name: x\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d"):
        load_config(path)


def dated_prices(tmp_path: Path, day: str) -> Path:
    """MINIMAL_CONFIG with a second, dated price set whose `from` is written as given, unquoted."""
    settings = {**MINIMAL_CONFIG, "clusters": [cluster(prices=[{**cluster()["prices"], "from": "2026-01-01"},
                                                               {**cluster()["prices"], "from": "DAY"}])]}
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(settings).replace("from: DAY", f"from: {day}"))
    return path


@pytest.mark.parametrize("day, words", [
    ("2026-02-30", "2026-02-30 is no day of the calendar (expected a date like 2026-03-01)"),
    ("'2026-02-30'", "2026-02-30 is no day of the calendar"),
    ("2026-13-01", "2026-13-01 is no day of the calendar"),
    ("2026-03-01 10:00:00", "expected a date like 2026-03-01, got 2026-03-01 10:00:00"),
    ("0", "expected a date like 2026-03-01, got 0"),  # pydantic alone took it as 1970-01-01, Unix time 0
    ("March", "expected a date like 2026-03-01, got March"),
])
def test_a_day_that_is_none_exits_2_naming_its_key(tmp_path, day, words):
    """YAML reads 2026-02-30 as a date and PyYAML raised ValueError: "unexpected error", exit 1, no key."""
    result = CliRunner().invoke(main, ["check", "--config", str(dated_prices(tmp_path, day))])
    assert result.exit_code == 2, result.output
    assert f"clusters[0].prices[1].from: {words}" in result.output and "unexpected" not in result.output


@pytest.mark.parametrize("day", ["2026-03-01", "'2026-03-01'"])
def test_a_day_is_read_quoted_or_not(tmp_path, day):
    assert load_config(dated_prices(tmp_path, day)).clusters[0].prices[1].from_ == date(2026, 3, 1)


def test_prices_up_to_just_below_a_billion_per_unit_are_accepted(write_config):
    prices = {**cluster()["prices"], "gpu_hour": 999_999_999.99, "cpu_core_hour": 0, "memory_gib_hour": 1}
    config = load_config(write_config(clusters=[cluster(prices=prices)]))
    assert (config.clusters[0].prices.gpu_hour, config.clusters[0].prices.cpu_core_hour) == (999_999_999.99, 0)
    assert config.clusters[0].prices.memory_gib_hour == 1.0  # an integer is a number, only true/false are not


def test_storage_is_priced_per_class_with_an_optional_default_in_each_dated_set(write_config):
    first = {**cluster()["prices"], "from": "2026-01-01", "storage_classes": {"fast-nvme": 0.00014, "bulk": 0}}
    second = {**cluster()["prices"], "from": "2026-11-20", "storage_gib_hour": 0.00005}
    jaguar = load_config(write_config(clusters=[cluster(prices=[first, second])])).clusters[0]
    before, after = jaguar.prices_on(date(2026, 11, 19)), jaguar.prices_on(date(2026, 11, 20))
    assert (before.storage_classes, before.storage_gib_hour) == ({"fast-nvme": 0.00014, "bulk": 0.0}, None)
    assert (after.storage_classes, after.storage_gib_hour) == ({}, 0.00005)
    assert (jaguar.prices_key(date(2026, 11, 19)), jaguar.prices_key(date(2026, 11, 20))) == (
        "clusters[0].prices[0]", "clusters[0].prices[1]")
    assert load_config(write_config()).clusters[0].prices_key(date(2026, 11, 20)) == "clusters[0].prices"


def test_an_oversized_config_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "billing.yaml"
    path.write_text("timezone: UTC\n" + "# padding\n" * 5_000_000)  # 50 MB of comments
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"^config file .*billing.yaml is larger than 1024 KiB; a billing config is a few kilobytes$"):
        load_config(path)
    print(f"50 MB config refused in {time.monotonic() - start:.3f} s")


@pytest.mark.parametrize("nesting", ["a: " + "[" * 5000 + "]" * 5000, "a:\n" + "- " * 5000 + "1"], ids=["flow", "block"])
def test_deep_nesting_is_refused_naming_the_line(tmp_path, nesting):
    path = tmp_path / "billing.yaml"
    path.write_text("timezone: UTC\n" + nesting)
    with pytest.raises(ConfigError, match=r"nests mappings and lists more than 50 levels deep \(at line [23]\)$"):
        load_config(path)


def test_fifty_levels_of_nesting_are_still_read(tmp_path):
    path = tmp_path / "billing.yaml"
    path.write_text("timezone: UTC\ncolour: " + "[" * 49 + "]" * 49)  # the top-level mapping is the 50th
    with pytest.raises(ConfigError, match=r"colour: unknown key"):
        load_config(path)


def test_a_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "billing.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(path)


def test_config_path_order(monkeypatch):
    monkeypatch.setenv("BILLING_CONFIG", "/etc/billing/from-env.yaml")
    assert config_path("given.yaml") == Path("given.yaml")
    assert config_path(None) == Path("/etc/billing/from-env.yaml")
    monkeypatch.delenv("BILLING_CONFIG")
    assert config_path(None) == Path("billing.yaml")


def test_defaults(write_config):
    config = load_config(write_config())
    assert config.gpu_resources == {"nvidia_com_gpu": 1.0, "gpu_nvidia_com": 1.0}  # GPUs held through DRA, always
    assert config.clusters[0].gpu_replicas_label == ""
    assert config.namespaces.unallocated_team == "unallocated"
    assert config.clusters[0].gpu_model_label == "label_nvidia_com_gpu_product"
    assert yaml.safe_load(write_config().read_text())["currency"] == "EUR"


def test_idle_the_old_name_of_unrequested_is_still_read_with_a_warning_naming_the_new(write_config, caplog):
    config = load_config(write_config(clusters=[cluster(idle="share"), cluster(name="ibis")]))
    assert [c.unrequested for c in config.clusters] == ["share", "unbilled"]
    assert [r.getMessage() for r in caplog.records] == [
        "cluster jaguar: config key idle is now called unrequested; it is still read, but rename it (unrequested: share)"]
    with pytest.raises(ConfigError, match=r"clusters\[0\]: idle is the old name of unrequested; keep only unrequested"):
        load_config(write_config(clusters=[cluster(idle="share", unrequested="share")]))


def test_label_names_name_where_the_exporters_labels_are(write_config):
    config = load_config(write_config(clusters=[cluster(label_names={"namespace": "exported_namespace",
                                                                     "pod": "exported_pod"})]))
    names = config.clusters[0].label_names
    assert (names.namespace, names.pod, names.container, names.node) == ("exported_namespace", "exported_pod",
                                                                          "container", "node")
    assert load_config(write_config()).clusters[0].label_names is None  # not set: detected


def test_the_request_rule_is_the_schedulers_unless_a_cluster_or_the_top_level_says_containers(write_config):
    assert [c.requests for c in load_config(write_config(clusters=[cluster()])).clusters] == ["pod"]
    config = load_config(write_config(requests="containers", clusters=[cluster(), cluster(name="ibis", requests="pod")]))
    assert [c.requests for c in config.clusters] == ["containers", "pod"]
    with pytest.raises(ConfigError, match=r"clusters\[0\]\.requests.*'pod' or 'containers'"):
        load_config(write_config(clusters=[cluster(requests="scheduler")]))


def test_gpu_resources_list_form_is_one_gpu_each(write_config):
    config = load_config(write_config(gpu_resources=["nvidia_com_gpu", "amd_com_gpu"]))
    assert config.gpu_resources == {"nvidia_com_gpu": 1.0, "amd_com_gpu": 1.0, "gpu_nvidia_com": 1.0}
    # a GPU held through DRA may be listed with a fraction of its own
    assert load_config(write_config(gpu_resources={"gpu_nvidia_com": "1/2"})).gpu_resources == {"gpu_nvidia_com": 0.5}


def test_gpu_resources_mapping_form_with_fractions_and_a_replicas_label(write_config):
    config = load_config(write_config(
        gpu_resources={"nvidia_com_gpu": 1, "nvidia_com_mig_1g_10gb": "1/7", "nvidia_com_mig_3g_40gb": " 3/7",
                       "nvidia_com_gpu_shared": 1, "half": 0.5, "quarter": "0.25"},
        gpu_replicas_label="label_nvidia_com_gpu_replicas",
        clusters=[cluster(), cluster(name="ibis", gpu_replicas_label="", vendor_model_labels=["label_amd"])]))
    assert config.gpu_resources == {"nvidia_com_gpu": 1.0, "nvidia_com_mig_1g_10gb": 1 / 7,
                                    "nvidia_com_mig_3g_40gb": 3 / 7, "nvidia_com_gpu_shared": 1.0,
                                    "half": 0.5, "quarter": 0.25, "gpu_nvidia_com": 1.0}
    # the top-level label applies to every cluster that does not name its own ('' for none)
    assert [c.gpu_replicas_label for c in config.clusters] == ["label_nvidia_com_gpu_replicas", ""]
    assert config.clusters[1].vendor_model_labels == ["label_amd"]


@pytest.mark.parametrize("value, words", [
    ({"nvidia_com_mig_1g_10gb": "17"}, "at most 1"),
    ({"nvidia_com_mig_1g_10gb": 0}, "more than 0"),
    ({"nvidia_com_mig_1g_10gb": "-1/7"}, "more than 0"),
    ({"nvidia_com_mig_1g_10gb": "1/0"}, "fraction like 1/7"),
    ({"nvidia_com_mig_1g_10gb": ".nan"}, "fraction like 1/7"),
    ({"nvidia_com_mig_1g_10gb": "one seventh"}, "fraction like 1/7"),
    ({"nvidia_com_mig_1g_10gb": True}, "fraction like 1/7"),
    ({"nvidia_com_mig_1g_10gb": [1]}, "fraction like 1/7"),
    ({}, "at least one"),
    ([], "at least one"),
    ("nvidia_com_gpu", "list of resource names or a mapping"),
])
def test_gpu_resources_mistakes_name_the_key(write_config, value, words):
    with pytest.raises(ConfigError) as error:
        load_config(write_config(gpu_resources=value))
    assert "gpu_resources:" in str(error.value) and words in str(error.value)


def test_relative_paths_are_relative_to_the_config_files_directory(tmp_path, monkeypatch):
    """As Prometheus and kubectl read theirs: the same file means the same wherever the command is run from."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "etc").mkdir()
    path = Path("etc") / "billing.yaml"
    path.write_text(yaml.safe_dump({
        **MINIMAL_CONFIG,
        "clusters": [cluster(prometheus={"replay": "recorded/jaguar"}),
                     cluster(name="ibis", prometheus={"url": "http://x", "bearer_token_file": "/run/token"})],
        "directory": {"ldif": "../people.ldif", "bind_password_file": "secrets/ldap"},
        "email": {"outbox_dir": "outbox", "password_file": "secrets/smtp"},
        "web": {"database": "sqlite:///reader.db?timeout=5"},
    }))
    config = load_config(path)
    etc = tmp_path / "etc"
    assert config.clusters[0].prometheus.replay == str(etc / "recorded" / "jaguar")
    assert config.clusters[1].prometheus.bearer_token_file == "/run/token"  # absolute stays
    assert (config.directory.ldif, config.directory.bind_password_file) == (str(tmp_path / "people.ldif"),
                                                                            str(etc / "secrets" / "ldap"))
    assert (config.email.outbox_dir, config.email.password_file) == (str(etc / "outbox"), str(etc / "secrets" / "smtp"))
    # the defaults too: billing.db and out/reports beside the file
    assert (config.database, config.output_dir) == (f"sqlite:///{etc / 'billing.db'}", str(etc / "out" / "reports"))
    assert config.web.database == f"sqlite:///{etc / 'reader.db'}?timeout=5"

    path.write_text(yaml.safe_dump({**MINIMAL_CONFIG, "database": "sqlite://",
                                    "email": {"outbox_dir": "", "ca_file": ""}}))
    config = load_config(path)
    assert (config.database, config.email.outbox_dir, config.email.ca_file) == ("sqlite://", "", "")


def test_the_demo_finds_its_recordings_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    config = load_config(demo / "billing.yaml")
    assert all(Path(c.prometheus.replay).is_dir() for c in config.clusters)
    assert Path(config.directory.ldif).is_file()
    assert config.output_dir == str(demo.parents[1] / "demo-out" / "reports")


def test_cost_labels_are_kubernetes_label_keys(write_config):
    config = load_config(write_config(cost_labels=["experiment", "example.com/project", "team.example.org/grant-id"]))
    assert config.cost_labels == ["experiment", "example.com/project", "team.example.org/grant-id"]
    assert config.workloads.enabled and config.workloads.keep_days is None


def test_bound_pending_is_shown_unless_a_cluster_or_the_top_level_says_charge(write_config):
    assert [c.bound_pending for c in load_config(write_config(clusters=[cluster()])).clusters] == ["show"]
    config = load_config(write_config(bound_pending="charge",
                                      clusters=[cluster(), cluster(name="ibis", bound_pending="show")]))
    assert [c.bound_pending for c in config.clusters] == ["charge", "show"]
    with pytest.raises(ConfigError, match=r"clusters\[0\]\.bound_pending.*'show' or 'charge'"):
        load_config(write_config(clusters=[cluster(bound_pending="bill")]))
