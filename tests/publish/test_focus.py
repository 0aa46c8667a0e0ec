"""`billing export --format focus`: the ledger in the FinOps FOCUS 1.2 layout.

The ledger is tests/helpers/report_ledger.py's, whose totals are worked out by hand;
the mandatory columns are typed here from the FOCUS 1.2 specification.
"""

import io
import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.ledger.database import open_ledger
from tests.helpers.report_ledger import DAY, DAY_TOTAL, H100, MONTH_TOTAL, write_ledger
from tests.helpers.workload_ledger import fill

# FOCUS 1.2, columns whose feature level is Mandatory
FOCUS_MANDATORY = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
]
NOT_NULL = ["BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
            "ChargeCategory", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost", "ListCost",
            "ServiceCategory", "ServiceName", "ProviderName", "InvoiceIssuerName"]


@pytest.fixture
def config(tmp_path, write_config):
    url = write_ledger(tmp_path / "ledger.db")
    return str(write_config(database=url, timezone="Europe/Zurich", currency="USD"))


def export(config, *args):
    return CliRunner().invoke(main, ["export", "--config", config, "--format", "focus", "--focus-version", "1.2", *args])


def csv_of(result) -> pd.DataFrame:
    assert result.exit_code == 0, result.output + result.stderr
    return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, na_values=[""])


def test_mandatory_columns_are_there_and_billed_cost_adds_up_to_the_ledger(config):
    focus = csv_of(export(config, "--from", "2026-11-20", "--to", "2026-11-20"))
    assert set(FOCUS_MANDATORY) <= set(focus.columns)
    assert not focus[NOT_NULL].isna().any().any()
    assert focus["ChargeClass"].isna().all()  # no row corrects an earlier invoice
    assert len(focus) == 7
    assert focus["BilledCost"].sum() == pytest.approx(float(DAY_TOTAL), abs=1e-9)
    # no discounts in this ledger: every cost is the list cost
    assert (focus["ListCost"] == focus["BilledCost"]).all() and (focus["EffectiveCost"] == focus["BilledCost"]).all()

    month = csv_of(export(config, "--from", "2026-11-01", "--to", "2026-11-20"))
    assert month["BilledCost"].sum() == pytest.approx(float(MONTH_TOTAL))


def test_one_row_read_column_by_column(config):
    focus = csv_of(export(config, "--from", "2026-11-20", "--to", "2026-11-20"))
    row = focus[(focus["ResourceName"] == "bob") & (focus["BillingAccountId"] == "vision")].iloc[0]
    assert row["BilledCost"] == pytest.approx(5.90)
    assert row["PricingQuantity"] == row["ConsumedQuantity"] == 2.0
    assert row["PricingUnit"] == row["ConsumedUnit"] == "GPU-Hours"
    assert row["ListUnitPrice"] == 2.95
    assert row["BillingCurrency"] == "USD"
    assert row["ProviderName"] == "ibis" and row["ResourceId"] == "ibis/bob"
    assert row["ServiceCategory"] == "Compute" and row["ChargeCategory"] == "Usage"
    assert json.loads(row["Tags"]) == {"billing/cluster": "ibis", "billing/namespace": "bob", "billing/owner": "bob",
                                       "billing/resource": "gpu", "billing/team": "vision"}
    assert "namespace bob on cluster ibis" in row["ChargeDescription"]


def test_periods_are_utc_instants_of_local_midnights(config):
    focus = csv_of(export(config, "--from", "2026-10-25", "--to", "2026-11-20"))
    periods = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingPeriodEnd"]
    by_day = focus.drop_duplicates("ChargePeriodStart").set_index("ChargePeriodStart")[periods[1:]]
    # Zurich is UTC+1 in November; 2026-10-25 is the 25-hour day summer time ends (UTC+2 until 01:00 UTC)
    assert by_day.loc["2026-11-19T23:00:00Z"].tolist() == [
        "2026-11-20T23:00:00Z", "2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z"]
    assert by_day.loc["2026-10-24T22:00:00Z"].tolist() == [
        "2026-10-25T23:00:00Z", "2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z"]


def test_days_never_run_are_named_and_a_range_without_rows_is_a_header(config):
    result = export(config, "--from", "2026-11-08", "--to", "2026-11-10")
    assert result.stderr == "billing: 2 day(s) never run, so not in the export: 2026-11-08 to 2026-11-09\n"
    assert "2026-11-10" not in result.stderr  # run, nothing used
    assert csv_of(result).empty and "BilledCost" in result.stdout


def test_days_still_to_come_are_not_named_as_never_run(config):
    """A range reaching past yesterday listed today and the future as never run. Today is the config's
    (Europe/Zurich), not the machine's: from 23:00 UTC they differ."""
    today = datetime.now(ZoneInfo("Europe/Zurich")).date()
    tomorrow = today + timedelta(days=1)
    result = export(config, "--from", "2026-11-20", "--to", tomorrow.isoformat())
    assert result.exit_code == 0, result.output
    assert tomorrow.isoformat() not in result.stderr and today.isoformat() not in result.stderr
    assert (today - timedelta(days=1)).isoformat() in result.stderr  # yesterday was never run: it is named


def test_missing_days_since_1970_are_a_few_ranges_not_megabytes(config):
    """Billed were 2026-10-25, 11-01, 11-10, 11-19 and 11-20: of the 20,778 days since 1970-01-01
    (56 years of 365 days, 14 leap days, 304 + 20 days of 2026), 20,773 were never run."""
    result = export(config, "--from", "1970-01-01", "--to", "2026-11-20")
    assert result.exit_code == 0
    assert result.stderr == (
        "billing: 20,773 day(s) never run, so not in the export: 1970-01-01 to 2026-10-24, 2026-10-26 to 2026-10-31, "
        "2026-11-02 to 2026-11-09, 2026-11-11 to 2026-11-18\n"
    )


def test_more_than_ten_ranges_of_missing_days_are_counted_not_listed(tmp_path, write_config):
    """Run on the odd days of September: the even days 2, 4, ..., 30 are 15 ranges of one day each."""
    url = write_ledger(tmp_path / "ledger.db", {date(2026, 9, day): [] for day in range(1, 30, 2)})
    result = export(str(write_config(database=url)), "--from", "2026-09-01", "--to", "2026-09-30")
    assert result.exit_code == 0
    assert result.stderr == (
        "billing: 15 day(s) never run, so not in the export: 2026-09-02, 2026-09-04, 2026-09-06, 2026-09-08, "
        "2026-09-10, 2026-09-12, 2026-09-14, 2026-09-16, 2026-09-18, 2026-09-20, and 5 more ranges\n"
    )


def test_parquet_keeps_types(config, tmp_path):
    pytest.importorskip("pyarrow")
    target = tmp_path / "november.parquet"
    result = export(config, "--from", "2026-11-01", "--to", "2026-11-20", "--output", str(target))
    assert result.exit_code == 0, result.stderr
    focus = pd.read_parquet(target)
    assert set(FOCUS_MANDATORY) <= set(focus.columns)
    assert focus["BilledCost"].sum() == pytest.approx(float(MONTH_TOTAL))
    assert str(focus["ChargePeriodStart"].dt.tz) == "UTC"
    assert focus["ChargePeriodStart"].min() == pd.Timestamp("2026-10-31T23:00:00Z")


def test_parquet_without_pyarrow_and_an_unwritable_file_are_usage_errors(config, tmp_path, monkeypatch):
    monkeypatch.setattr("billing.publish.focus.find_spec", lambda name: None)  # as if no package were installed
    result = export(config, "--from", "2026-11-20", "--to", "2026-11-20", "--output", str(tmp_path / "x.parquet"))
    assert result.exit_code == 2 and "Parquet output needs pyarrow" in result.stderr
    result = export(config, "--from", "2026-11-20", "--to", "2026-11-20", "--output", str(tmp_path / "no" / "x.csv"))
    assert result.exit_code == 2 and "cannot write" in result.stderr and "Traceback" not in result.stderr
    result = export(config, "--from", "2026-11-20", "--to", "2026-11-19")
    assert result.exit_code == 2 and "--to is before --from" in result.stderr


def test_a_discount_is_list_cost_less_billed_cost(tmp_path, write_config):
    # 10 GPU-h at 2.40 list: 24.00; half of them backfill at multiplier 0 -> billed 12.00
    discounted = {DAY: [("jaguar", "alice", "robotics", "alice", "gpu", H100, 10.0, 2.40, 12.00, 24.00)]}
    config = str(write_config(database=write_ledger(tmp_path / "discounted.db", discounted)))
    row = csv_of(export(config, "--from", str(DAY), "--to", str(DAY))).iloc[0]
    assert (row["ListCost"], row["BilledCost"], row["EffectiveCost"], row["ContractedCost"]) == (24.0, 12.0, 12.0, 12.0)
    assert row["ListUnitPrice"] == 2.40 and row["PricingQuantity"] == 10.0


def test_a_reserved_pool_is_usage_and_its_credits_are_credit_rows(tmp_path, write_config):
    rows = {DAY: [
        ("jaguar", "pool:robotics-h100", "robotics", None, "reserved-gpu", H100, 192.0, 2.40, 460.80),
        ("jaguar", "carol", "nlp", "carol", "gpu", H100, 4.0, 2.40, 9.60),
        ("jaguar", "carol", "robotics", "carol", "credit-gpu", H100, -4.0, 2.40, -9.60),
    ]}
    config = str(write_config(database=write_ledger(tmp_path / "pool.db", rows)))
    focus = csv_of(export(config, "--from", str(DAY), "--to", str(DAY))).set_index("ResourceId")
    assert focus["BilledCost"].sum() == pytest.approx(460.80)  # nlp's use is paid by nlp, not twice
    reserved, credit = focus.loc["jaguar/pool:robotics-h100"], focus[focus["ChargeCategory"] == "Credit"].iloc[0]
    assert reserved["ChargeCategory"] == "Usage" and reserved["ResourceType"] == "Reserved pool"
    assert reserved["ConsumedQuantity"] == 192.0 and reserved["PricingUnit"] == "GPU-Hours"
    assert credit["BillingAccountId"] == "robotics" and credit["BilledCost"] == -9.60
    assert pd.isna(credit["ConsumedQuantity"]) and credit["PricingQuantity"] == -4.0
    assert "reserved pool" in credit["ChargeDescription"]


@pytest.fixture
def workload_config(tmp_path, write_config):
    url = f"sqlite:///{tmp_path / 'workloads.db'}"
    engine = open_ledger(url)
    fill(engine)
    engine.dispose()
    return str(write_config(database=url, currency="USD", cost_labels=["experiment"]))


def test_workloads_are_the_resources_and_their_rows_still_add_up_to_the_ledger(workload_config):
    focus = csv_of(export(workload_config, "--from", "2026-11-01", "--to", "2026-11-03"))
    # Nov 1: 7 workload rows for 5 ledger rows; Nov 2: its ledger row, not broken down; Nov 3: 1 workload row
    assert len(focus) == 9
    assert focus["BilledCost"].sum() == pytest.approx(52.90)  # 38.50 + 12.00 + 2.40 (tests/helpers/workload_ledger.py)
    per_account = focus.groupby("BillingAccountId")["BilledCost"].sum()
    assert per_account.to_dict() == pytest.approx({"robotics": 47.00, "vision": 5.90})
    train = focus[(focus["ResourceId"] == "jaguar/alice/Job/train-a") & (focus["PricingUnit"] == "GPU-Hours")].iloc[0]
    assert (train["ResourceName"], train["ResourceType"]) == ("Job/train-a", "Job")
    assert (train["BilledCost"], train["ListCost"], train["PricingQuantity"], train["ListUnitPrice"]) == \
        pytest.approx((14.40, 14.40, 6.0, 2.40))
    assert json.loads(train["Tags"]) == {
        "billing/cluster": "jaguar", "billing/gpu_model": H100, "billing/namespace": "alice", "billing/owner": "alice",
        "billing/resource": "gpu", "billing/team": "robotics", "billing/workload": "Job/train-a",
        "experiment": "exp-1"}
    assert "workload Job/train-a in namespace alice on cluster jaguar" in train["ChargeDescription"]
    notebook = focus[focus["ResourceName"] == "Deployment/notebook"].iloc[0]
    assert "experiment" not in json.loads(notebook["Tags"])  # the pod had no such label: no tag
    not_broken_down = focus[focus["ChargePeriodStart"] == "2026-11-02T00:00:00Z"]  # the config's zone is UTC
    assert len(not_broken_down) == 1
    row = not_broken_down.iloc[0]
    assert (row["ResourceId"], row["ResourceType"], row["BilledCost"]) == ("jaguar/alice", "Namespace", 12.00)
    assert "billing/workload" not in json.loads(row["Tags"])
