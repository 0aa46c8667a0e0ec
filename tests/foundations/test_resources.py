import csv
import io
import json
import re
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from billing import frames
from billing.charge.bill import bill_day, refuse_unpriced
from billing.charge.workload_names import UNATTRIBUTED
from billing.cli import main
from billing.collect.day import CollectedDay
from billing.collect.kueue import SAMPLES
from billing.collect.usage import ClusterUsage
from billing.config import Config
from billing.directory.people import Directory, Person, Team, directory_to_json
from billing.ledger.database import open_ledger
from billing.ledger.read import read_rows
from billing.ledger.write import replace_day
from billing.money import cents
from billing.notify.letters import team_letter
from billing.publish.budgets import read_budget_status
from billing.publish.cost_metrics import read_cost_figures
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
from billing.web.app import create_app
from billing.web.mcp_server import descriptions
from billing.web.tools import answer_schemas
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.focus13 import check_focus_13
from tests.helpers.html_tables import read_page
from tests.helpers.report_ledger import DAY, write_ledger
from tests.helpers.serve import get


def test_every_ledger_resource_has_its_base_a_unit_and_a_name():
    # the five registered, and the five kinds of capacity (reserved, credit, unrequested, quota, lent) of the three
    # that nodes offer: storage and energy have no capacity kind; energy has one kind of its own, the shared
    # unattributed
    assert len(LEDGER_RESOURCES) == 5 + 5 * 3 + 1 and "storage" in LEDGER_RESOURCES and "energy" in LEDGER_RESOURCES
    assert [name for name in LEDGER_RESOURCES if name.endswith(("-storage", "-energy"))] == ["unattributed-energy"]
    assert UNITS["storage"] == "GiB-h" and UNITS["energy"] == UNITS["unattributed-energy"] == "kWh"
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


# --- storage: hand-made rows of the usage frame, as the storage collector writes them, charged into every output

STORAGE_DAY = date(2026, 11, 20)
STORAGE_PRICES = {"storage_classes": {"fast-nvme": 0.0002, "bulk": 0.00005}}  # per GiB-hour
STORAGE_PEOPLE = Directory.of([Person("alice", "Alice", "alice@example.org"), Person("bob", "Bob", "bob@example.org")],
                              [Team("robotics", ("alice",), ("alice",)), Team("vision", ("bob",), ("bob",))])
# By hand, at the prices above: alice's namespace (robotics) holds 1,000 GiB of fast-nvme for 24 hours, mounted by
# StatefulSet/trainer: 24,000 GiB-h x 0.0002 = 4.80; and 5,000 GiB of bulk no pod mounts: 120,000 x 0.00005 = 6.00;
# robotics 10.80. team-vision (vision): 2,400 GiB-h of fast-nvme = 0.48, 48,300 of bulk = 2.415 and 100 core-hours
# at 0.01 = 1.00; vision 3.895, shown 3.90. The day 14.695 (14.70); storage 13.695 (13.70); bulk 8.415 (8.42).
STORAGE_USAGE = [("alice", "fast-nvme", 24_000.0), ("alice", "bulk", 120_000.0),
                 ("team-vision", "fast-nvme", 2_400.0), ("team-vision", "bulk", 48_300.0)]
# below the namespace: the claim no pod mounts is no workload's ('', shown as (no workload)); team-vision's storage
# is left out of the workload usage, so that its rows stay whole under (no workload) as well
STORAGE_WORKLOADS = [("alice", "StatefulSet/trainer", "storage", "fast-nvme", 24_000.0),
                     ("alice", "", "storage", "bulk", 120_000.0),
                     ("team-vision", "Deployment/labeler", "cpu", "", 100.0)]


@pytest.fixture
def storage_ledger(tmp_path, write_config) -> tuple[str, Config]:
    """A config file on the ledger of STORAGE_DAY as bill_day charged it, with its Config."""
    url = f"sqlite:///{tmp_path / 'storage.db'}"
    jaguar = {**MINIMAL_CONFIG["clusters"][0], "unrequested": "share",
              "prices": {**MINIMAL_CONFIG["clusters"][0]["prices"], **STORAGE_PRICES}}
    settings = {"currency": "USD", "database": url, "clusters": [jaguar], "waste": {"enabled": False},
                "web": {"admins": ["root"]}}
    path = write_config(**settings)
    config = Config.model_validate({**MINIMAL_CONFIG, **settings})
    usage = pd.DataFrame([(namespace, "storage", model, "", "", hours) for namespace, model, hours in STORAGE_USAGE]
                         + [("team-vision", "cpu", "", "", "", 100.0)], columns=frames.USAGE.columns)
    workloads = pd.DataFrame([(namespace, workload, "{}", resource, model, "", "", hours)
                              for namespace, workload, resource, model, hours in STORAGE_WORKLOADS],
                             columns=frames.WORKLOAD_USAGE.columns)
    allocatable = pd.DataFrame([("cpu", "", "", 100.0)], columns=frames.ALLOCATABLE.columns)  # all CPU requested
    collected = CollectedDay(config.clusters[0], ClusterUsage("jaguar", usage, 3, 40, 1.0, workloads=workloads),
                             allocatable, frames.WASTE.empty().assign(cluster=[]),
                             pd.DataFrame(columns=["cluster", *frames.WORKLOAD_WASTE.columns]),
                             pd.DataFrame(columns=SAMPLES))
    prices = {"jaguar": config.clusters[0].prices_on(STORAGE_DAY)}
    refuse_unpriced(collected, STORAGE_DAY, prices["jaguar"], config)  # every class is priced
    bill = bill_day([collected], prices, STORAGE_PEOPLE, config)
    assert bill.capacity["resource"].tolist() == ["cpu"]  # storage has no capacity, so no unrequested share
    replace_day(open_ledger(url), STORAGE_DAY, bill, "USD", snapshot=directory_to_json(STORAGE_PEOPLE))
    return str(path), config


def test_storage_rows_are_billed_per_class_into_the_ledger_and_every_output_to_the_cent(storage_ledger):
    path, config = storage_ledger
    engine = open_ledger(config.database)
    day = str(STORAGE_DAY)
    ledger = read_rows(engine, STORAGE_DAY, STORAGE_DAY)
    assert {(row.namespace, row.team, row.resource, row.gpu_model): (row.quantity, row.unit_price, round(row.cost, 9))
            for row in ledger.itertuples()} == {
        ("alice", "robotics", "storage", "fast-nvme"): (24_000.0, 0.0002, 4.80),
        ("alice", "robotics", "storage", "bulk"): (120_000.0, 0.00005, 6.00),
        ("team-vision", "vision", "storage", "fast-nvme"): (2_400.0, 0.0002, 0.48),
        ("team-vision", "vision", "storage", "bulk"): (48_300.0, 0.00005, 2.415),
        ("team-vision", "vision", "cpu", ""): (100.0, 0.01, 1.00)}
    # billing report: by resource (CSV exact, the table rounded once), and by workload
    by_resource = ["report", "--all-teams", "--from", day, "--to", day, "--by", "resource", "--config", path]
    rows = {row["resource"]: row for row in csv.DictReader(io.StringIO(_cli(*by_resource, "--format", "csv")))}
    assert (float(rows["storage"]["storage_gib_hours"]), float(rows["storage"]["cost"])) == (194_700.0, 13.695)
    assert float(rows["storage"]["memory_gib_hours"]) == 0.0 and float(rows["cpu"]["storage_gib_hours"]) == 0.0
    table = _cli(*by_resource).splitlines()
    assert "storage GiB-h" in table[1] and table[2].split() == ["storage", "-", "-", "-", "194,700.00", "-", "13.70"]
    assert table[-1].split()[-1] == "14.70"
    by_workload = _cli("report", "--team", "robotics", "--from", day, "--to", day, "--by", "workload", "--config",
                       path, "--format", "csv")
    assert [(row["workload"], row["storage_gib_hours"], row["cost"]) for row in csv.DictReader(io.StringIO(by_workload))
            ] == [(UNATTRIBUTED, "120000", "6"), ("StatefulSet/trainer", "24000", "4.8")]
    # the team's page and the admins' page, the team's email
    report = read_report(engine, STORAGE_DAY, "USD", "unallocated")
    pages = Path(config.database.removeprefix("sqlite:///")).parent / "pages"
    write_pages(report, pages)
    team_page = read_page((pages / day / "teams" / "vision.html").read_text())
    assert team_page.tables["team-usage"][1:] == [  # the dearest first
        ["jaguar", "Storage bulk", "48,300.00 GiB-h", "2.42 USD"], ["jaguar", "CPU", "100.00 core-h", "1.00 USD"],
        ["jaguar", "Storage fast-nvme", "2,400.00 GiB-h", "0.48 USD"], ["Total", "", "", "3.90 USD"]]
    admin_page = read_page((pages / day / "index.html").read_text())
    assert admin_page.tables["usage"][1:] == [["jaguar", "Storage", "194,700.00 GiB-h", "13.70 USD"],
                                              ["jaguar", "CPU", "100.00 core-h", "1.00 USD"], ["Total", "", "", "14.70 USD"]]
    letter = [line.split() for line in team_letter(report, "robotics").text.splitlines()]
    assert ["jaguar", "Storage", "bulk", "120,000.00", "GiB-h", "6.00", "USD"] in letter
    assert ["Day", "total:", "10.80", "USD"] in letter
    # the month's statement, for machines and for people
    statement = build_statement(engine, date(2026, 11, 1), "USD", {})
    lines = list(csv.DictReader(io.StringIO(STATEMENT_FORMATS["csv"](statement))))
    assert {(line["team"], line["resource"], line["gpu_model"], line["quantity"], line["amount"]) for line in lines} >= {
        ("robotics", "storage", "bulk", "120000", "6"), ("vision", "storage", "bulk", "48300", "2.415")}
    vision = read_page(STATEMENT_FORMATS["html"](statement)).tables["lines-2"]
    assert vision[1:] == [["jaguar", "CPU", "100.00 core-h", "1.00 USD"],
                          ["jaguar", "Storage bulk", "48,300.00 GiB-h", "2.42 USD"],
                          ["jaguar", "Storage fast-nvme", "2,400.00 GiB-h", "0.48 USD"], ["Total", "", "", "3.90 USD"]]
    # FOCUS 1.3: Storage, in GiB-Hours, meeting every rule of the specification's table
    focus = pd.read_csv(io.StringIO(_cli("export", "--from", day, "--to", day, "--config", path)),
                        keep_default_na=False, na_values=[""])
    check_focus_13(focus)
    stored = focus[focus["ServiceCategory"] == "Storage"]
    assert set(zip(stored["ServiceSubcategory"], stored["ServiceName"], stored["PricingUnit"], stored["ConsumedUnit"])) == {
        ("Other (Storage)", "Kubernetes persistent volumes", "GiB-Hours", "GiB-Hours")}
    assert sorted(zip(stored["BillingAccountId"], stored["SkuId"], stored["ConsumedQuantity"],
                      stored["BilledCost"].round(9))) == [
        ("robotics", "storage/bulk", 120_000.0, 6.0), ("robotics", "storage/fast-nvme", 24_000.0, 4.8),
        ("vision", "storage/bulk", 48_300.0, 2.415), ("vision", "storage/fast-nvme", 2_400.0, 0.48)]
    assert focus.loc[focus["ServiceCategory"] == "Compute", "SkuId"].tolist() == ["cpu"]


def test_storage_reads_the_same_on_serve_budgets_metrics_and_the_mcp_tools(storage_ledger):
    _, config = storage_ledger
    engine = open_ledger(config.database)
    client = create_app(config).test_client()
    page = read_page(get(client, "/teams/robotics?from=2026-11-20&to=2026-11-20", "root").text)
    assert page.tables["by-workload"][1:] == [["alice", UNATTRIBUTED, "-", "-", "-", "120,000.00", "6.00"],
                                              ["alice", "StatefulSet/trainer", "-", "-", "-", "24,000.00", "4.80"],
                                              ["Total", "", "-", "-", "-", "144,000.00", "10.80"]]
    assert page.tables["by-workload"][0][5] == "storage GiB-h"
    api = get(client, "/api/v1/costs?from=2026-11-20&to=2026-11-20&by=namespace", "root").json
    assert {row["namespace"]: (row["storage_gib_hours"], f"{cents(row['cost']):.2f}") for row in api["rows"]} == {
        "alice": (144_000.0, "10.80"), "team-vision": (50_700.0, "3.90")}
    assert f"{cents(read_budget_status(engine, 'vision', STORAGE_DAY, 10.0).month_to_date):.2f}" == "3.90"
    figures = read_cost_figures(engine, config)
    assert figures is not None and {(team, resource): f"{cents(amount):.2f}" for _, team, resource, _, amount in
                                     figures.costs} == {("robotics", "storage"): "10.80", ("vision", "storage"): "2.90",
                                                        ("vision", "cpu"): "1.00"}
    assert "storage_gib_hours in GiB-hours" in descriptions("USD")["costs"]
    assert "memory in GiB-h, storage in GiB-h" in descriptions("USD")["changes"]  # the same unit, told apart


def test_a_report_without_storage_keeps_its_table_and_its_csv_schema(tmp_path, write_config):
    """A cluster without persistent volumes: the table and HTML read as before storage was billed; CSV and JSON
    carry storage_gib_hours (0) all the same, a schema that does not move with the data."""
    config = str(write_config(database=write_ledger(tmp_path / "ledger.db", {DAY: WIDGET_DAY[2:]}), currency="USD"))
    asked = ["report", "--team", "robotics", "--from", str(DAY), "--to", str(DAY), "--by", "namespace", "--config", config]
    assert "storage" not in _cli(*asked) and "storage" not in _cli(*asked, "--format", "html")
    [row] = csv.DictReader(io.StringIO(_cli(*asked, "--format", "csv")))
    assert float(row["storage_gib_hours"]) == 0.0 and float(row["cost"]) == 1.20
    assert json.loads(_cli(*asked, "--format", "json"))["rows"][0]["storage_gib_hours"] == 0.0
