import csv
import io
import json
import re
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from billing.cli import main
from billing.ledger.database import open_ledger
from billing.notify.letters import team_letter
from billing.publish.dayview import read_report
from billing.publish.focus import PRICING_UNITS, RESOURCE_WORDS
from billing.publish.formatting import RESOURCE_NAMES, quantity
from billing.publish.pages import write_pages
from billing.publish.statement import build_statement
from billing.publish.statement_formats import FORMATS as STATEMENT_FORMATS
from billing.resources import (
    LEDGER_RESOURCES,
    REGISTRY,
    RESOURCES,
    UNITS,
    Resource,
    base,
    mig_resource,
    single_strategy_slice,
    slice_fraction,
)
from billing.web.mcp_server import descriptions
from billing.web.tools import answer_schemas
from tests.helpers.report_ledger import DAY, write_ledger


def test_every_ledger_resource_has_its_base_a_unit_and_a_name():
    # the four registered, and the five kinds of capacity (reserved, credit, unrequested, quota, lent) of the three
    # that nodes offer: storage has no capacity kind
    assert len(LEDGER_RESOURCES) == 4 + 5 * 3 and "storage" in LEDGER_RESOURCES
    assert not [name for name in LEDGER_RESOURCES if name.endswith("-storage")]
    assert UNITS["storage"] == "GiB-h"
    assert base("lent-gpu") == "gpu" and UNITS["quota-memory"] == "GiB-h"
    assert [base(r) for r in ("gpu", "unrequested-gpu", "reserved-memory", "credit-cpu")] == ["gpu", "gpu", "memory", "cpu"]
    assert UNITS["credit-memory"] == "GiB-h" and UNITS["unrequested-gpu"] == "GPU-h" and UNITS["cpu"] == "core-h"
    assert set(RESOURCE_NAMES) == set(UNITS) == set(LEDGER_RESOURCES)
    assert set(PRICING_UNITS) == set(RESOURCE_WORDS) == set(RESOURCES)
    assert quantity(1536.245, "reserved-cpu") == "1,536.25 core-h"


def test_a_mig_slice_is_its_compute_slices_of_its_gpu():
    """NVIDIA's MIG user guide, "Supported GPUs" and "Supported MIG Profiles": 7 compute slices on an A100 or
    H100, 4 on an A30 and an RTX PRO 6000, 2 on an RTX PRO 5000."""
    assert slice_fraction("1g.5gb", "NVIDIA-A100-SXM4-40GB") == 1 / 7
    assert slice_fraction("3g.40gb", "NVIDIA A100-SXM4-80GB") == 3 / 7  # DCGM's modelName has a space
    assert slice_fraction("7g.80gb", "NVIDIA-H100-80GB-HBM3") == 1.0
    assert slice_fraction("1g.6gb", "NVIDIA-A30") == 1 / 4
    assert slice_fraction("2g.48gb", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition") == 2 / 4
    assert slice_fraction("1g.24gb", "NVIDIA RTX PRO 5000 Blackwell") == 1 / 2
    assert slice_fraction("", "NVIDIA-A100-SXM4-40GB") == 1.0


def test_a_model_that_names_a_slice_is_single_strategy():
    assert single_strategy_slice("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == ("NVIDIA-A100-SXM4-40GB", "1g.5gb", 1 / 7)
    assert single_strategy_slice("NVIDIA-A30-MIG-2g.12gb+me") == ("NVIDIA-A30", "2g.12gb+me", 2 / 4)
    assert single_strategy_slice("NVIDIA-A100-SXM4-40GB") is None
    assert single_strategy_slice("NVIDIA-MIGHTY-1g.5gb") is None
    assert mig_resource("2g.12gb+me") == "nvidia_com_mig_2g_12gb_me"


# A made-up resource, registered once: every output shows it without a word of its own
WIDGET = Resource("widget", "widget", "widget-h", "widget-hours", "widget_hours", "widget_hour", "Widget-Hours",
                  "widget-hours", True, "kube_pod_container_resource_requests{resource=\"example.com/widget\"}")
# robotics on 2026-11-20 by hand: alice's 30 widget-hours at 0.50 = 15.00 USD, and her share of the cluster's
# unrequested widgets, 4 widget-hours at 0.50 = 2.00 USD; beside 1.20 USD of CPU
WIDGET_DAY = [("jaguar", "alice", "robotics", "alice", "widget", "", 30.0, 0.50, 15.00),
              ("jaguar", "alice", "robotics", "alice", "unrequested-widget", "", 4.0, 0.50, 2.00),
              ("jaguar", "alice", "robotics", "alice", "cpu", "", 100.0, 0.012, 1.20)]


@pytest.fixture
def widget_ledger(monkeypatch, tmp_path, write_config):
    """The config of a ledger holding WIDGET_DAY, with the widget registered."""
    monkeypatch.setitem(REGISTRY, WIDGET.name, WIDGET)
    return str(write_config(database=write_ledger(tmp_path / "ledger.db", {DAY: WIDGET_DAY}), currency="USD"))


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_registered_resource_is_in_every_report_format(widget_ledger):
    asked = ["report", "--team", "robotics", "--from", str(DAY), "--to", str(DAY), "--by", "resource",
             "--config", widget_ledger]
    rows = {row["resource"]: row for row in csv.DictReader(io.StringIO(_cli(*asked, "--format", "csv")))}
    assert set(rows) == {"widget", "unrequested-widget", "cpu"}
    assert (float(rows["widget"]["widget_hours"]), float(rows["widget"]["cost"])) == (30.0, 15.0)
    # requested hours only, as a gpu row's: the unrequested share is cost, not hours anyone asked for
    assert float(rows["unrequested-widget"]["widget_hours"]) == 0.0 and float(rows["cpu"]["widget_hours"]) == 0.0
    document = json.loads(_cli(*asked, "--format", "json"))
    assert {row["resource"]: row["widget_hours"] for row in document["rows"]} == {
        "widget": 30.0, "unrequested-widget": 0.0, "cpu": 0.0}
    table = _cli(*asked)
    assert "widget-h" in table.splitlines()[1] and "\nwidget " in table  # its column, and its row (names cut at 80)
    page = _cli(*asked, "--format", "html")
    assert "Unrequested capacity (shared), widget" in page and "widget-h" in page


def test_a_registered_resource_is_on_the_day_page_the_email_the_statement_and_the_focus_export(widget_ledger, tmp_path):
    engine = open_ledger(yaml.safe_load(Path(widget_ledger).read_text())["database"])
    report = read_report(engine, DAY, "USD", "unallocated")
    day_page = (write_pages(report, tmp_path / "pages")[0]).read_text()
    assert "Widget" in day_page and "30.00 widget-h" in day_page
    assert "explain-unrequested" in day_page  # the unrequested widgets' share is explained as any resource's
    letter = team_letter(report, "robotics")
    assert "30.00 widget-h" in letter.text and "Unrequested capacity (shared), widget" in letter.text
    statement = build_statement(engine, date(2026, 11, 1), "USD", {})
    lines = list(csv.DictReader(io.StringIO(STATEMENT_FORMATS["csv"](statement))))
    assert {(line["resource"], line["quantity"], line["amount"]) for line in lines} >= {
        ("widget", "30", "15"), ("unrequested-widget", "4", "2")}  # plain numbers, for machines
    assert re.search(r"30\.00\W*(<span[^>]*>)?widget-h", STATEMENT_FORMATS["html"](statement))
    focus = list(csv.DictReader(io.StringIO(_cli("export", "--from", str(DAY), "--to", str(DAY),
                                                 "--config", widget_ledger))))
    widgets = [row for row in focus if row["PricingUnit"] == "Widget-Hours"]
    assert sorted(float(row["ConsumedQuantity"]) for row in widgets) == [4.0, 30.0]
    assert {row["ConsumedUnit"] for row in widgets} == {"Widget-Hours"}


def test_a_registered_resource_is_in_the_mcp_tools_descriptions(monkeypatch):
    monkeypatch.setitem(REGISTRY, WIDGET.name, WIDGET)
    assert "widget_hours in widget-hours" in descriptions("USD")["costs"]
    assert "widget-h" in descriptions("USD")["changes"]
    assert "widget_hours in widget-hours" in json.dumps(answer_schemas("USD"))
