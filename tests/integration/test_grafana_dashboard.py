"""The Grafana dashboard in cronjob/ reads what the documented deployment exposes, each cost once.

As docs/deploy.md sets it up: the nightly `billing run` pushes its health to a real Pushgateway, a real `billing
serve` answers the ledger's costs on /metrics to a scraper with its token, and a real Prometheus scrapes both (the
gateway with honor_labels: true). Every panel's query, its template variables filled in as Grafana fills them, must
parse (promtool) and answer; the costs are the ledger's, worked out by hand (tests/helpers/report_ledger.py), not
twice them (issue 43: 80.64 where the ledger holds 40.32).
"""

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import billing.cli
from fixtures.servers import ManagedProcess, accepts_connections, free_port, require_program, start_prometheus
from tests.helpers.report_ledger import DAY, TEAM_COST, TEAM_MONTH
from tests.helpers.run_summaries import summary
from tests.helpers.serve import REPOSITORY, serve_command, serve_config

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


def wait_for(url: str, query: str, wanted: float) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = ask(url, query)
        if answer and float(answer[0]["value"][1]) == wanted:
            return
        time.sleep(0.5)
    raise AssertionError(f"{query} did not reach {wanted} within 60 s: {ask(url, query)}")


def test_the_documented_scrapes_give_every_panel_each_cost_once(pushgateway_server, tmp_path, monkeypatch):
    token = tmp_path / "metrics-token"
    token.write_text("scrape-me\n")
    config = serve_config(tmp_path, changes={"timezone": "UTC", "budgets": {"monthly": {"robotics": 100.0}},
                                             "metrics": {"pushgateway": pushgateway_server.url}},
                          metrics_token_file=str(token))
    # the nightly job as cronjob.yaml runs it, its collection stubbed: the ledger already holds the day
    monkeypatch.setattr("billing.jobs.run.run_day", lambda *args, **kwargs: summary())
    result = CliRunner().invoke(billing.cli.main, ["run", "--date", str(DAY), "--config", str(config)])
    assert result.exit_code == 0, result.output
    port = free_port()
    serve = ManagedProcess(serve_command(config, port), tmp_path / "serve.log", cwd=REPOSITORY)
    serve.wait_until(accepts_connections(port), "billing serve", timeout=30)
    prometheus = start_prometheus(None, tmp_path / "prometheus", scrape_configs=json.dumps([
        {"job_name": "pushgateway", "honor_labels": True, "scrape_interval": "1s",
         "static_configs": [{"targets": [pushgateway_server.url.removeprefix("http://")]}]},
        {"job_name": "billing-serve", "scrape_interval": "1s", "authorization": {"credentials_file": str(token)},
         "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]))
    try:
        wait_for(prometheus.url, "count(up == 1)", 2)  # both targets scraped (the token accepted), their samples in
        panels = queries()
        for title, expr in panels.items():
            assert ask(prometheus.url, expr), f"panel {title!r} reads nothing: {expr}"

        def figures(panel: str, label: str) -> dict[str, float]:
            return {r["metric"][label]: float(r["value"][1]) for r in ask(prometheus.url, panels[panel])}

        # by hand, 2026-11-20: 24.00 + 1.20 + 1.50 + 5.90 + 5.90 + 1.70 + 0.12 (report_ledger.DAY_TOTAL)
        assert figures("Cost of the latest day / A", "currency") == pytest.approx({"USD": 40.32})
        assert figures("Cost of the latest day by team / A", "team") == pytest.approx(
            {team: float(cost) for team, cost in TEAM_COST.items()})
        by_cluster = ask(prometheus.url, panels["Daily cost by cluster and resource / A"])
        assert sum(float(r["value"][1]) for r in by_cluster) == pytest.approx(40.32)
        assert figures("Month to date by team / A", "team") == pytest.approx(
            {team: float(cost) for team, cost in TEAM_MONTH.items()})
        assert figures("Month to date against the budget / A", "team") == pytest.approx({"robotics": 0.566})
    finally:
        prometheus.process.stop()
        serve.stop()
