"""A day with a two-hour hole in kube-state-metrics data, in a real Prometheus."""

from datetime import date
from email import message_from_bytes, policy
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.reference import reference_usage

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
HOLE = (DAY.start.timestamp() + 10 * 3600, DAY.start.timestamp() + 12 * 3600)  # no scrapes 10:00-11:59
# The last scrape before the hole (09:59) stays visible for the 5-minute lookback, up to 10:04;
# the first after it is at 12:00. So the instants 10:05 ... 11:59 see no data: 115 of 1,440.
COVERAGE = (1440 - 115) / 1440

LDIF = "dn: dc=example,dc=org\nobjectClass: domain\ndc: example\n"


@pytest.fixture(scope="module")
def world():
    return make_world(5, DAY.start.timestamp(), pods=150, gaps=(HOLE,))


def config(tmp_path, url: str) -> str:
    (tmp_path / "directory.ldif").write_text(LDIF)
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump({
        "database": f"sqlite:///{tmp_path / 'ledger.db'}",
        "output_dir": str(tmp_path / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"url": url, "retries": 0},
                      "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0}}],
        "directory": {"ldif": str(tmp_path / "directory.ldif")},
        "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]},
    }))
    return str(tmp_path / "billing.yaml")


def run(path: str, *extra: str):
    return CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", path, *extra])


def test_a_hole_is_measured_stored_shown_and_can_be_refused(store_server, world, tmp_path):
    prom = store_server(world)
    path = config(tmp_path, prom.url)
    database = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")

    result = run(path)
    assert result.exit_code == 0, result.output
    with database.connect() as conn:
        stored = pd.read_sql("select cluster, coverage from cluster_days", conn)
        ledger = pd.read_sql("select * from chargeback", conn)
    assert stored["cluster"].tolist() == ["jaguar"]
    assert stored["coverage"].iloc[0] == pytest.approx(COVERAGE, rel=1e-12)
    # what is billed is what the data shows: the reference sees the same hole
    expected = reference_usage(world, "jaguar", DAY.start.timestamp(), DAY.end.timestamp(), 60)
    assert ledger["quantity"].sum() == pytest.approx(sum(expected.values()), rel=1e-9)

    page = (tmp_path / "reports" / "2026-11-20" / "index.html").read_text()
    assert "Incomplete data on jaguar" in page and "8.0&nbsp;% of the day" in page
    (letter,) = (tmp_path / "outbox").glob("*.eml")
    text = message_from_bytes(letter.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
    assert "incomplete data on jaguar" in text and "8.0 % of the day" in text

    refused = run(path, "--require-coverage", "0.99")
    assert refused.exit_code == 1
    assert "cluster jaguar: kube-state-metrics data covers only 92.0% of 2026-11-20, below the required 99.0%" in refused.output
    with database.connect() as conn:
        pd.testing.assert_frame_equal(pd.read_sql("select * from chargeback", conn), ledger)

    assert run(path, "--require-coverage", "0.9").exit_code == 0
