"""Days with holes in kube-state-metrics data, or none at all, in a real Prometheus."""

import json
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


def config(tmp_path, url: str, selector: str = "") -> str:
    (tmp_path / "directory.ldif").write_text(LDIF)
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump({
        "database": f"sqlite:///{tmp_path / 'ledger.db'}",
        "output_dir": str(tmp_path / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"url": url, "retries": 0, "selector": selector},
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


def ledger_state(tmp_path) -> dict[str, pd.DataFrame]:
    """Every table a run writes, computed_at and completed_at included."""
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        return {table: pd.read_sql(f"select * from {table}", conn)
                for table in ("chargeback", "completed_days", "cluster_days", "cluster_capacity", "waste")}


def written_files(tmp_path) -> dict[str, bytes]:
    """Report pages and outbox messages, by path."""
    return {str(f): f.read_bytes() for d in ("reports", "outbox") for f in (tmp_path / d).rglob("*") if f.is_file()}


def assert_same_state(before: dict[str, pd.DataFrame], after: dict[str, pd.DataFrame]) -> None:
    for table, frame in before.items():
        pd.testing.assert_frame_equal(after[table], frame, obj=table)


NO_SAMPLE = "the store holds no kube-state-metrics sample at all"
NOT_SCRAPED = "(a day outside its retention, or kube-state-metrics not scraped into it)"


@pytest.mark.parametrize("selector, day, why", [
    ('cluster="jagaur"', "2026-11-20", 'the selector cluster="jagaur" matches no kube-state-metrics series; without '
                                       'it kube_pod_info has cluster="jaguar" (check clusters[].prometheus.selector)'),
    ('cluster="jaguar"', "2030-01-01",  # far after the data: the day is said empty before the selector is blamed
     f'{NO_SAMPLE}, with or without the selector cluster="jaguar" {NOT_SCRAPED}'),
    ("", "2026-11-18", f"{NO_SAMPLE} {NOT_SCRAPED}"),  # the world starts an hour before 2026-11-20
])
def test_a_day_without_any_sample_is_refused_not_billed_as_zero(prometheus_server, world, tmp_path, selector, day,
                                                                why):
    prom = prometheus_server(world)
    assert run(config(tmp_path, prom.url, 'cluster="jaguar"')).exit_code == 0  # 2026-11-20 billed right, once
    before, files = ledger_state(tmp_path), written_files(tmp_path)
    path = config(tmp_path, prom.url, selector)

    refused = CliRunner().invoke(main, ["run", "--date", day, "--config", path])

    assert refused.exit_code == 1
    assert refused.output == (  # the preflight's words (billing/collect/preflight.py), as billing check says them
        f"billing: cluster jaguar: on {day}: {why}; nothing was billed and the ledger keeps the day as it was\n"
    )
    assert_same_state(before, ledger_state(tmp_path))
    assert written_files(tmp_path) == files  # no page, no email
    missing = CliRunner().invoke(main, ["report", "--all-teams", "--from", day, "--to", day, "--format", "json",
                                        "--config", path])
    if day == "2026-11-20":
        assert json.loads(missing.stdout)["missing_days"] == []  # as before
    else:  # still never run: the report says so and fails rather than show a zero
        assert missing.exit_code == 1 and missing.stdout == ""
        assert f"no day in this range was ever run ({day})" in missing.stderr


def test_a_day_on_which_no_pod_ran_is_zero_not_missing(prometheus_server, tmp_path):
    """kube-state-metrics was scraped (five nodes), but no pod existed: a day billed at 0, recorded complete."""
    prom = prometheus_server(make_world(5, DAY.start.timestamp(), pods=0))
    path = config(tmp_path, prom.url, 'cluster="jaguar"')

    result = run(path)

    assert result.exit_code == 0, result.output
    state = ledger_state(tmp_path)
    assert state["chargeback"].empty
    assert state["completed_days"][["day", "rows"]].values.tolist() == [["2026-11-20", 0]]
    assert state["cluster_days"]["coverage"].tolist() == [1.0]


def test_samples_seen_only_through_the_lookback_are_data_not_no_data(prometheus_server, tmp_path):
    """kube-state-metrics last scraped at 23:59 the evening before: those samples are what instant queries
    return at 00:00, 00:01, ..., 00:04 (5-minute lookback, both ends included), so the day is billed with
    a coverage of 5 of its 1,440 instants, and the pods running at 23:59 are billed for those 5 minutes."""
    world = make_world(5, DAY.start.timestamp(), pods=150, gaps=((DAY.start.timestamp(), DAY.end.timestamp() + 3600),))
    prom = prometheus_server(world)
    path = config(tmp_path, prom.url)

    result = run(path)

    assert result.exit_code == 0, result.output
    state = ledger_state(tmp_path)
    assert state["cluster_days"]["coverage"].tolist() == [pytest.approx(5 / 1440, rel=1e-12)]
    expected = reference_usage(world, "jaguar", DAY.start.timestamp(), DAY.end.timestamp(), 60)
    assert sum(expected.values()) > 0
    assert state["chargeback"]["quantity"].sum() == pytest.approx(sum(expected.values()), rel=1e-9)
