"""The Grafana dashboard in cronjob/ reads what billing pushes.

A real Pushgateway gets a run's push with the ledger's latest costs (tests/helpers/report_ledger.py, worked out
by hand); a real Prometheus scrapes it (honor_labels: true, as for any Pushgateway). Every panel's query, its
template variables filled in as Grafana fills them, must parse (promtool) and answer with data; the costs by team
are the hand-worked ones.
"""

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from billing.config import Config, MetricsConfig
from billing.jobs.metrics import push_run_metrics
from billing.ledger.database import open_ledger
from billing.publish.cost_metrics import read_cost_figures
from fixtures.servers import require_program, start_prometheus
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.report_ledger import fill_ledger
from tests.helpers.run_summaries import summary

DASHBOARD = Path(__file__).resolve().parents[2] / "cronjob" / "grafana-dashboard.json"
GRAFANA_VARIABLES = {"$team": ".*", "${datasource}": "prometheus"}  # "All" teams


def queries() -> dict[str, str]:
    """panel title / refId -> its PromQL, template variables filled in."""
    found = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            found[f"{panel['title']} / {target['refId']}"] = expr
    return found


def test_the_dashboard_is_well_formed():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    for panel in dashboard["panels"]:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]
    names = {name for expr in queries().values() for name in re.findall(r"\bbilling_[a-z_]+", expr)}
    exported = {"billing_cost", "billing_month_to_date_cost", "billing_month_budget", "billing_cost_day_timestamp_seconds",
                "billing_last_success_timestamp_seconds"}
    assert names <= exported, names - exported


def test_every_panel_query_parses(tmp_path):
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"billing:panel_{number}", "expr": expr} for number, expr in enumerate(queries().values())]}]}
    (tmp_path / "rules.yml").write_text(json.dumps(rules))
    check = subprocess.run([require_program("promtool"), "check", "rules", str(tmp_path / "rules.yml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def ask(url: str, query: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout=10) as answer:
        return json.loads(answer.read())["data"]["result"]


def test_every_panel_reads_the_pushed_metrics(pushgateway_server, tmp_path):
    url = fill_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    config = Config.model_validate({**MINIMAL_CONFIG, "database": url, "currency": "USD", "timezone": "UTC",
                                    "budgets": {"monthly": {"robotics": 100.0}}})
    push_run_metrics(MetricsConfig(pushgateway=pushgateway_server.url), summary(), "USD", 93.5,
                     read_cost_figures(open_ledger(url), config))
    target = pushgateway_server.url.removeprefix("http://")
    prometheus = start_prometheus(None, tmp_path / "prometheus", scrape_configs=json.dumps([
        {"job_name": "pushgateway", "honor_labels": True, "scrape_interval": "1s", "static_configs": [{"targets": [target]}]}]))
    try:
        deadline = time.monotonic() + 30
        while not ask(prometheus.url, "billing_cost") and time.monotonic() < deadline:
            time.sleep(0.5)
        for title, expr in queries().items():
            assert ask(prometheus.url, expr), f"panel {title!r} reads nothing: {expr}"
        by_team = {r["metric"]["team"]: float(r["value"][1])
                   for r in ask(prometheus.url, 'sum by (team, currency) (billing_cost{team=~".*"})')}
        # by hand, 2026-11-20: robotics 24.00 + 1.20 + 1.50 + 5.90; vision 5.90; unallocated 1.70; platform 0.12
        assert by_team == pytest.approx({"robotics": 32.60, "vision": 5.90, "unallocated": 1.70, "platform": 0.12})
        budget = ask(prometheus.url, queries()["Month to date against the budget / A"])
        assert [(r["metric"]["team"], float(r["value"][1])) for r in budget] == [("robotics", pytest.approx(0.566))]
    finally:
        prometheus.process.stop()
