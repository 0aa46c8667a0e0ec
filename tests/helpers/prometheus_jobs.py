"""The nightly job against a real Prometheus: a config writer, hand-worked prices and ownership, one run."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from billing.cli import main
from fixtures.directory import directory_ldif

PRICES = {
    "jaguar": {"cpu_core_hour": 0.012, "memory_gib_hour": 0.0015, "gpu_hour": 1.10,
               "gpu_models": {"NVIDIA-H100-80GB-HBM3": 2.40, "NVIDIA-A100-SXM4-80GB": 1.60}},
    "ibis": {"cpu_core_hour": 0.034, "memory_gib_hour": 0.0045, "gpu_hour": 2.95},
}


LDIF = directory_ldif(["alice", "bob", "carol", "dave"],
                      {"robotics": ["alice", "bob"], "vision": ["bob"], "nlp": ["carol"], "platform": []})


# Rule 7 for this directory, by hand: namespace -> [(team, share)]
HAND_MAPPING = {
    "team-robotics": [("robotics", 1)], "team-vision": [("vision", 1)], "team-nlp": [("nlp", 1)],
    "alice": [("robotics", 1)], "bob": [("robotics", 0.5), ("vision", 0.5)], "carol": [("nlp", 1)],
    "kube-system": [("platform", 1)],
}  # everything else (team-infra, dave, erin, ..., monitoring, scratch) -> unallocated


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("postgres_url")


def write_config(tmp_path, database: str, urls: dict[str, str]) -> str:
    (tmp_path / "directory.ldif").write_text(LDIF)
    config = {
        "database": database,
        "output_dir": str(tmp_path / "reports"),
        "clusters": [
            {"name": name, "prometheus": {"url": url, "selector": f'cluster="{name}"', "retries": 0},
             "prices": PRICES[name]}
            for name, url in urls.items()
        ],
        "directory": {"ldif": str(tmp_path / "directory.ldif"),
                      "people": {"base": "ou=people,dc=example,dc=org"}, "teams": {"base": "ou=teams,dc=example,dc=org"}},
        "namespaces": {"overrides": {"kube-system": "platform"}},
    }
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(config))
    return str(tmp_path / "billing.yaml")


def run(config: str):
    return CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
