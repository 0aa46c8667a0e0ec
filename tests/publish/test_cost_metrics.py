"""The ledger's latest day as Prometheus metrics: pushed by the nightly job, answered by `billing serve`."""

from datetime import datetime, timezone

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from billing.config import Config
from billing.ledger.database import open_ledger
from billing.publish.cost_metrics import add_cost_metrics, read_cost_figures
from billing.web.app import create_app
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.report_ledger import fill_ledger
from tests.helpers.run_summaries import samples
from tests.helpers.serve import web_config

# by hand, from tests/helpers/report_ledger.py: 2026-11-20 (the latest day run), and November 1 to 20
LATEST_DAY = {
    ("jaguar", "robotics", "gpu"): 24.00, ("jaguar", "robotics", "cpu"): 1.20, ("jaguar", "robotics", "memory"): 1.50,
    ("ibis", "robotics", "gpu"): 5.90, ("ibis", "vision", "gpu"): 5.90, ("ibis", "unallocated", "cpu"): 1.70,
    ("jaguar", "platform", "cpu"): 0.12,
}
MONTH_TO_DATE = {"robotics": 56.60, "vision": 8.85, "unallocated": 1.70, "platform": 0.12}


def config(url: str, budgets: dict[str, float]) -> Config:
    return Config.model_validate({**MINIMAL_CONFIG, "currency": "USD", "database": url, "timezone": "UTC",
                                  "budgets": {"monthly": budgets}})


def exposition(url: str, budgets: dict[str, float]) -> dict[tuple, float]:
    registry = CollectorRegistry()
    figures = read_cost_figures(open_ledger(url), config(url, budgets))
    assert figures is not None
    add_cost_metrics(registry, figures)
    return samples(generate_latest(registry).decode())


def test_the_latest_days_costs_per_cluster_team_and_resource(tmp_path):
    found = exposition(fill_ledger(f"sqlite:///{tmp_path / 'ledger.db'}"), {"robotics": 100.0})
    costs = {(labels["cluster"], labels["team"], labels["resource"]): value
             for (name, *pairs), value in found.items() if name == "billing_cost" for labels in [dict(pairs)]}
    assert costs == pytest.approx(LATEST_DAY)
    month = {dict(pairs)["team"]: value for (name, *pairs), value in found.items() if name == "billing_month_to_date_cost"}
    assert month == pytest.approx(MONTH_TO_DATE)
    assert found[("billing_month_budget", ("currency", "USD"), ("team", "robotics"))] == 100.0
    assert found[("billing_cost_day_timestamp_seconds",)] == datetime(2026, 11, 20, tzinfo=timezone.utc).timestamp()
    # aggregates only: no label names a person
    assert {label for name, *pairs in found for label, _ in pairs} <= {"cluster", "team", "resource", "currency"}


def test_an_empty_ledger_has_no_figures(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert read_cost_figures(open_ledger(url), config(url, {})) is None


def test_serve_answers_metrics_only_to_its_token(tmp_path, monkeypatch):
    url = fill_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    without = create_app(web_config(url)).test_client()
    assert without.get("/metrics").status_code == 404  # no token configured: no metrics
    monkeypatch.setenv("BILLING_METRICS_TOKEN", "scrape-me")
    client = create_app(web_config(url, metrics_token_env="BILLING_METRICS_TOKEN")).test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    answer = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert answer.status_code == 200 and answer.mimetype == "text/plain"
    found = samples(answer.get_data(as_text=True))
    assert found[("billing_cost", ("cluster", "jaguar"), ("currency", "USD"), ("resource", "gpu"),
                  ("team", "robotics"))] == 24.0
