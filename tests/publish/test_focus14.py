"""FOCUS 1.4 (`billing export --focus-version 1.4`): the Cost and Usage rows and the Invoice Detail and Billing Period
datasets of hand-worked ledgers (tests/helpers/statements.py) with a closed month, an imported invoice, cost
recovery and corrections, checked against the 1.4 rules (tests/helpers/focus14.py) and against the statements'
figures worked out by hand."""

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from billing.cli import main
from tests.helpers.focus13 import check_parquet_types
from tests.helpers.focus14 import BILLING_PERIOD, INVOICE_DETAIL, check_focus_14
from tests.helpers.statements import corrected_october, recovered_october
from tests.publish.test_focus13 import REPORT_ON_CORRECTIONS, csv_of

DATASETS = ("cost-and-usage", "invoice-detail", "billing-period")
OCTOBER, NOVEMBER = "2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z"


def export_14(config: str, first: str, last: str, dataset: str, *args: str):
    return CliRunner().invoke(main, ["export", "--config", config, "--from", first, "--to", last, "--focus-version",
                                     "1.4", "--dataset", dataset, *args])


def datasets(config: str, first: str, last: str) -> dict[str, pd.DataFrame]:
    return {dataset: csv_of(export_14(config, first, last, dataset)) for dataset in DATASETS}


@pytest.fixture
def recovered(tmp_path, write_config) -> str:
    """tests.helpers.statements' recovered October: closed, an imported invoice, cost recovery, corrections."""
    return str(write_config(database=recovered_october(f"sqlite:///{tmp_path / 'recovered.db'}"), currency="USD"))


def test_a_recovered_closed_month_and_its_corrections_as_the_three_datasets(recovered):
    focus = datasets(recovered, "2026-10-01", "2026-11-30")
    check_focus_14(focus["cost-and-usage"], focus["invoice-detail"], focus["billing-period"])
    detail = focus["invoice-detail"]
    # each team's invoices of a month add up to its statement to the cent: October as closed, November with the
    # corrections; audio, first charged in October by a re-run, has records of 0.00 on October's invoice
    by_month = detail.groupby(["BillingPeriodStart", "BillingAccountId"])["BilledCost"].sum().round(2).to_dict()
    assert by_month == {(OCTOBER, "robotics"): 930.00, (OCTOBER, "vision"): 360.00, (OCTOBER, "audio"): 0.00,
                        (NOVEMBER, "robotics"): -145.00, (NOVEMBER, "vision"): 45.00, (NOVEMBER, "audio"): 120.00}
    # October's invoices are issued (the month closed), November's provisional
    assert set(zip(detail["BillingPeriodStart"], detail["InvoiceIssueStatus"])) == {(OCTOBER, "Issued"),
                                                                                     (NOVEMBER, "Open")}
    assert detail.loc[detail["InvoiceIssueStatus"] == "Open", "InvoiceIssueDate"].isna().all()
    # heron's cost recovery names the provider's invoice it recovers
    recovery = detail[(detail["InvoiceDetailId"] == "recovery") & (detail["InvoiceIssuerName"] == "heron")]
    assert recovery["InvoiceDetailDescription"].str.contains("october.csv (sha256 abababababab…)", regex=False).all()
    assert set(recovery["ChargeCategory"]) == {"Adjustment"}
    # November's corrections reference October's invoice of their cluster and team
    corrections = detail[detail["InvoiceDetailId"].str.startswith("correction/")]
    assert len(corrections) and set(corrections["BillingPeriodStart"]) == {NOVEMBER}
    assert (corrections["ReferenceInvoiceId"] == corrections["InvoiceId"].str.replace("2026-11", "2026-10")).all()
    assert detail.loc[~detail.index.isin(corrections.index), "ReferenceInvoiceId"].isna().all()
    # a billing period per cluster and month: October closed, November open
    periods = focus["billing-period"]
    assert sorted(zip(periods["InvoiceIssuerName"], periods["BillingPeriodStart"], periods["BillingPeriodStatus"])) == [
        ("heron", OCTOBER, "Closed"), ("heron", NOVEMBER, "Open"), ("jaguar", OCTOBER, "Closed"),
        ("jaguar", NOVEMBER, "Open")]


@pytest.fixture
def corrected(tmp_path, write_config) -> str:
    """tests.helpers.statements' October closed unrecovered, October 5 run again, corrected in November."""
    return str(write_config(database=corrected_october(f"sqlite:///{tmp_path / 'corrected.db'}"), currency="USD"))


# FOCUS 1.4's Invoice Reconciliation feature, its queries as published but for the GROUP BY its Cost and Usage
# subquery lacks (without it the query is no valid SQL)
RECONCILE_BY_INVOICE_ID = """
SELECT
  COALESCE(ID.InvoiceId, CU.InvoiceId) AS InvoiceId,
  ID.TotalBilledCost_InvoiceDetail,
  CU.TotalBilledCost_CostAndUsage,
  (ID.TotalBilledCost_InvoiceDetail - CU.TotalBilledCost_CostAndUsage) AS Variance
FROM (
  SELECT
    InvoiceId,
    SUM(BilledCost) AS TotalBilledCost_InvoiceDetail
  FROM InvoiceDetail
  WHERE ChargeCategory != 'Tax'
  GROUP BY InvoiceId
) ID
FULL OUTER JOIN (
  SELECT
    InvoiceId,
    SUM(BilledCost) AS TotalBilledCost_CostAndUsage
  FROM CostAndUsage
  GROUP BY InvoiceId
) CU ON ID.InvoiceId = CU.InvoiceId
WHERE ID.InvoiceId = ?"""
VALIDATE_TAX_VARIANCE = """
SELECT
  InvoiceId,
  SUM(CASE WHEN ChargeCategory = 'Tax' THEN BilledCost ELSE 0 END) AS TotalTaxAmount,
  SUM(CASE WHEN ChargeCategory != 'Tax' THEN BilledCost ELSE 0 END) AS TotalServiceAmount,
  SUM(BilledCost) AS GrandTotalPayable
FROM InvoiceDetail
WHERE InvoiceId = ?
GROUP BY InvoiceId"""


def test_focus_s_published_queries_in_duckdb_reconcile_the_parquet_datasets_to_the_statements(corrected, tmp_path):
    focus = datasets(corrected, "2026-10-01", "2026-11-30")
    check_focus_14(focus["cost-and-usage"], focus["invoice-detail"], focus["billing-period"])
    db = duckdb.connect()
    for dataset, table in (("cost-and-usage", None), ("invoice-detail", INVOICE_DETAIL),
                           ("billing-period", BILLING_PERIOD)):
        target = tmp_path / f"{dataset}.parquet"
        result = export_14(corrected, "2026-10-01", "2026-11-30", dataset, "--output", str(target))
        assert result.exit_code == 0, result.output
        if table is not None:
            check_parquet_types(pq.read_schema(target), table)
        view = {"cost-and-usage": "CostAndUsage", "invoice-detail": "InvoiceDetail"}.get(dataset, "BillingPeriod")
        db.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{target}')")
    # the statements by hand (test_focus13's closed October and its corrections in November)
    statements = {"jaguar/2026-10/robotics": 37.20, "heron/2026-10/robotics": 38.00, "heron/2026-10/vision": 10.00,
                  "jaguar/2026-11/robotics": 5.52, "heron/2026-11/robotics": 9.50, "heron/2026-11/vision": 2.50}
    for invoice, figure in statements.items():
        (found, invoiced, charged, variance), = db.execute(RECONCILE_BY_INVOICE_ID, [invoice]).fetchall()
        assert (found, round(invoiced, 2), round(charged, 2), round(variance, 2)) == (invoice, figure, figure, 0.00)
        (_, tax, service, payable), = db.execute(VALIDATE_TAX_VARIANCE, [invoice]).fetchall()
        assert (tax, round(service, 2), round(payable, 2)) == (0, figure, figure)
    db.execute("CREATE VIEW focus_data_table AS SELECT * FROM CostAndUsage")
    rows = db.execute(REPORT_ON_CORRECTIONS, ["2026-11-01", "2026-12-02"]).fetchall()
    assert {row[:3]: round(row[-1], 2) for row in rows} == {
        ("jaguar", "robotics", "Usage"): 5.40, ("heron", "robotics", "Usage"): 12.00,
        ("heron", "robotics", "Credit"): -2.50, ("heron", "vision", "Usage"): 2.50}
    status = db.execute("SELECT DISTINCT BillingPeriodStart, BillingPeriodStatus FROM BillingPeriod "
                        "ORDER BY 1").fetchall()
    assert [(f"{start:%Y-%m}", state) for start, state in status] == [("2026-10", "Closed"), ("2026-11", "Open")]


def test_the_invoice_datasets_need_focus_1_4(corrected):
    result = CliRunner().invoke(main, ["export", "--config", corrected, "--from", "2026-10-01", "--to", "2026-10-31",
                                       "--dataset", "invoice-detail"])
    assert result.exit_code == 2
    assert "--dataset invoice-detail is a FOCUS 1.4 dataset: add --focus-version 1.4" in result.output
