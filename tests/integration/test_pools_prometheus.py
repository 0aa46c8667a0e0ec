"""A reserved pool used partly by its owner and partly by another team, against a real Prometheus.

A small hand-made cluster, so that every figure below is worked out by hand
(prices of tests/integration/test_job_prometheus.py: H100 2.40 per GPU-hour,
0.012 per core-hour, 0.0015 per GiB-hour; alice is on robotics, carol on nlp).
"""

from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import GPU_PRODUCT_LABEL, H100, Cluster, Container, Node, Pod, World
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import write_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
GIB = 2**30
POOL_LABEL = "label_example_org_pool"


def at(hour: float) -> float:
    return D + hour * 3600


def gpu_node(name: str, **labels: str) -> Node:
    """4 H100, 32 cores, 256 GiB."""
    return Node(name, ((D - 30 * 86400, {GPU_PRODUCT_LABEL: H100, **labels}),),
                {"cpu": 32.0, "memory": 256.0 * GIB, "nvidia_com_gpu": 4.0})


def pod(namespace: str, name: str, node: str, start: float, end: float, gpus: float) -> Pod:
    """Running from start to end (hours of the day) with gpus GPUs, 4 cores and 32 GiB per GPU."""
    return Pod(namespace, name, f"uid-{name}", node, at(start), ((at(start), "Running"), (at(end), "Succeeded")),
               at(end) + 1800, (Container("main", 4.0 * gpus, 32.0 * GIB * gpus, gpus),))


WORLD = World(
    (Cluster("jaguar",
             (gpu_node("pool-1", **{POOL_LABEL: "robotics-h100"}), gpu_node("shared-1")),
             (pod("alice", "train", "pool-1", 1, 7, 2),  # 12 GPU-h, 48 core-h, 384 GiB-h: 29.952 USD
              pod("carol", "eval", "pool-1", 10, 14, 1),  # 4 GPU-h, 16 core-h, 128 GiB-h: 9.984 USD
              pod("carol", "sweep", "shared-1", 10, 12, 1)),  # 2 GPU-h, 8 core-h, 64 GiB-h: 4.992 USD
             {"cluster": "jaguar"}),),
    D - 3600, D + 25 * 3600,
)


def test_the_pool_team_pays_the_pool_once_and_the_other_team_its_use(store_server, tmp_path):
    prom = store_server(WORLD)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": prom.url})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["reserved_pools"] = {"node_label": POOL_LABEL, "teams": {"robotics-h100": "robotics"}}
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output

    with create_engine(database).connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
        capacity = pd.read_sql("select * from cluster_capacity", conn)
    # the pool: 4 GPUs x 24 h x 2.40 = 230.40, 32 cores x 24 h x 0.012 = 9.216, 256 GiB x 24 h x 0.0015 = 9.216
    pool = ledger[ledger["namespace"] == "pool:robotics-h100"].set_index("resource")
    assert set(pool["team"]) == {"robotics"}
    assert pool["quantity"].to_dict() == pytest.approx({"reserved-gpu": 96.0, "reserved-cpu": 768.0,
                                                        "reserved-memory": 6144.0})
    assert pool["cost"].sum() == pytest.approx(248.832)
    # robotics pays the pool (alice's use in it nets out) less carol's use of it: 248.832 - 9.984
    # nlp pays carol's use of the pool and of the shared node: 9.984 + 4.992
    by_team = ledger.groupby("team")["cost"].sum()
    assert by_team.to_dict() == pytest.approx({"robotics": 238.848, "nlp": 14.976})
    credits = ledger[ledger["resource"].str.startswith("credit-")].groupby("namespace")["cost"].sum()
    assert credits.to_dict() == pytest.approx({"alice": -29.952, "carol": -9.984})

    # capacity per pool: the pool's 96 GPU-h had 12 + 4 requested; the shared node's 96 had 2
    gpus = capacity[capacity["resource"] == "gpu"].set_index("pool")
    assert gpus.loc["robotics-h100", ["allocatable", "requested", "unrequested"]].tolist() == pytest.approx([96, 16, 80])
    assert gpus.loc["", ["allocatable", "requested", "unrequested"]].tolist() == pytest.approx([96, 2, 94])

    # the owning team's page shows the pool and the credits
    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "robotics.html").read_text())
    assert ["jaguar", f"Reserved pool, GPU {H100}", "96.00 GPU-h", "230.40 USD"] in page.tables["team-usage"]
    assert ["jaguar", f"Pool or quota use credited, GPU {H100}", "-16.00 GPU-h", "-38.40 USD"] in page.tables["team-usage"]
