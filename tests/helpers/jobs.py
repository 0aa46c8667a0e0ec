"""A day billed by the nightly job with collection stubbed: alice on team robotics, one cluster's usage."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

import billing.collect.day
from billing import frames
from billing.collect.usage import ClusterUsage
from tests.helpers.config import stub_node_metrics

LDIF = """\
dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A
mail: alice@example.org

dn: cn=robotics,ou=teams,dc=example,dc=org
objectClass: groupOfNames
cn: robotics
member: uid=alice,ou=people,dc=example,dc=org
owner: uid=alice,ou=people,dc=example,dc=org
"""


# 10 GPU-h at 2.00 and 100 core-h at 0.01 in alice's namespace: 21.00 USD, all robotics
USAGE = pd.DataFrame([("alice", "gpu", "", "", "", 10.0), ("alice", "cpu", "", "", "", 100.0)], columns=frames.USAGE.columns)


def stub_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cluster's day collected as USAGE, asking no store."""
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *args: ClusterUsage(context.cluster.name, USAGE, 1, 0, 1.0))
    stub_node_metrics(monkeypatch)


@pytest.fixture
def config(tmp_path, monkeypatch):
    stub_collection(monkeypatch)
    (tmp_path / "directory.ldif").write_text(LDIF)
    settings = {
        "database": f"sqlite:///{tmp_path / 'ledger.db'}",
        "output_dir": str(tmp_path / "reports"),
        "clusters": [
            {
                "name": "jaguar",
                "prometheus": {"replay": str(tmp_path)},
                "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0},
            }
        ],
        "directory": {"ldif": str(tmp_path / "directory.ldif")},
        "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]},
    }

    def write(**email):
        settings["email"].update(email)
        (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
        return str(tmp_path / "billing.yaml")

    return write
