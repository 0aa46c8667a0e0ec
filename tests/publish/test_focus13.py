"""`billing export`: the ledger in the FinOps FOCUS 1.3 layout, read back and checked column by column
(tests/helpers/focus13.py, from the specification's text); the allocated ratios expected are worked out by
hand from the ledgers' rows.
"""

import io
import json

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.ledger.database import open_ledger
from tests.helpers.focus13 import check_focus_13, check_numeric_text, check_parquet_types, ratio
from tests.helpers.report_ledger import DAY, H100, write_ledger
from tests.helpers.statements import closed_october, corrected_october, recovered_october
from tests.helpers.workload_ledger import fill


def csv_of(result) -> pd.DataFrame:
    assert result.exit_code == 0, result.output + result.stderr
    return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, na_values=[""])


def export(config: str, first: str, last: str, *args: str) -> pd.DataFrame:
    return csv_of(CliRunner().invoke(main, ["export", "--config", config, "--from", first, "--to", last, *args]))


def split(focus: pd.DataFrame, method: str) -> dict[tuple[str, str | None], tuple[float, float, float]]:
    """(ResourceId, AllocatedResourceId or None for the unallocated part) -> (ratio, PricingQuantity, BilledCost)
    of the allocated charges of a method."""
    rows = focus[focus["AllocatedMethodId"] == method]
    return {(resource, None if pd.isna(allocated) else allocated): (ratio(details), quantity, cost)
            for resource, allocated, details, quantity, cost in
            zip(rows["ResourceId"], rows["AllocatedResourceId"], rows["AllocatedMethodDetails"],
                rows["PricingQuantity"], rows["BilledCost"])}


def assert_split(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, values in expected.items():
        assert actual[key] == pytest.approx(values), key


def by_account(focus: pd.DataFrame) -> dict[str, float]:
    """FOCUS's use case "cost by billing account": BilledCost summed per BillingAccountId."""
    return focus.groupby("BillingAccountId")["BilledCost"].sum().to_dict()


def by_allocated_resource(focus: pd.DataFrame) -> dict[str, float]:
    """Cost by allocated resource, as FOCUS's split cost allocation examples query it: the allocated charges'
    EffectiveCost per AllocatedResourceId (the unallocated parts, with none, left out)."""
    return focus.dropna(subset=["AllocatedResourceId"]).groupby("AllocatedResourceId")["EffectiveCost"].sum().to_dict()


@pytest.fixture
def october(tmp_path, write_config) -> str:
    """tests.helpers.statements' October, closed recovering each cluster's cost (jaguar 100.00, heron 60.00)."""
    return str(write_config(database=closed_october(f"sqlite:///{tmp_path / 'october.db'}"), currency="USD"))


def test_an_export_with_reserved_pools_unrequested_capacity_and_cost_recovery_passes_the_focus_13_checks(october):
    focus = export(october, "2026-10-01", "2026-10-31")
    check_focus_13(focus)
    assert focus["BilledCost"].sum() == pytest.approx(160.00)  # the closed month recovered what both clusters cost
    # heron's pool p1: 24 GPU-h at 2.00 (48.00), carol used 5 of them: 5/24 of its hours and cost allocated to
    # heron/carol, the 19/24 no pod requested its unallocated part; both robotics' Usage, the pool as resource
    assert_split(split(focus, "billing/reserved-pool"), {
        ("heron/pool:p1/gpu", "heron/carol"): (5 / 24, 5.0, 10.00), ("heron/pool:p1/gpu", None): (19 / 24, 19.0, 38.00)})
    pool = focus[focus["AllocatedMethodId"] == "billing/reserved-pool"]
    assert set(pool["ChargeCategory"]) == {"Usage"} and set(pool["BillingAccountId"]) == {"robotics"}
    # the credit robotics gets for carol's use is a charge of its own, on carol's namespace
    credit = focus[focus["ChargeCategory"] == "Credit"]
    assert credit[["BillingAccountId", "ResourceId", "BilledCost"]].values.tolist() == [["robotics", "heron/carol", -10.00]]
    assert credit["AllocatedMethodId"].isna().all()
    # robotics' share of jaguar's unrequested CPU, all team-robotics'
    assert_split(split(focus, "billing/unrequested-share"), {
        ("jaguar/unrequested/cpu", "jaguar/team-robotics"): (1.0, 50.0, 0.60)})
    # cost recovery (tests/helpers/statements.py by hand): jaguar 62.80 all robotics'; heron 12.00 split 38 : 10
    # as robotics and vision were charged 38.00 and 10.00 there; each line its team's Adjustment, no split
    recovery = focus[focus["ChargeCategory"] == "Adjustment"].set_index(["ResourceId", "BillingAccountId"])
    assert recovery["BilledCost"].to_dict() == pytest.approx({
        ("jaguar", "robotics"): 62.80, ("heron", "robotics"): 9.50, ("heron", "vision"): 2.50})
    assert recovery["AllocatedMethodId"].isna().all()
    assert json.loads(recovery.loc[("heron", "vision"), "Tags"]) == {
        "billing/cluster": "heron", "billing/kind": "recovery", "billing/team": "vision"}
    # the teams' October: vision 10.00 on heron + 2.50 recovery; robotics the rest of the 160.00
    assert by_account(focus) == pytest.approx({"vision": 12.50, "robotics": 147.50})
    # each row is on its team's statement's lines of its cluster (October's, closed), which add up to the
    # cluster's cost recovered: jaguar's 100.00 all robotics', heron's 60.00 as 47.50 and 12.50
    assert focus.groupby("InvoiceId")["BilledCost"].sum().to_dict() == pytest.approx({
        "jaguar/2026-10/robotics": 100.00, "heron/2026-10/robotics": 47.50, "heron/2026-10/vision": 12.50})


def test_shares_of_unrequested_capacity_and_several_pools_of_a_team(tmp_path, write_config):
    rows = {DAY: [
        # ibis' unrequested core-hours: vision's 40 (x 30, z 10), nlp's 10 (y)
        ("ibis", "x", "vision", None, "unrequested-cpu", "", 30.0, 0.01, 0.30),
        ("ibis", "z", "vision", None, "unrequested-cpu", "", 10.0, 0.01, 0.10),
        ("ibis", "y", "nlp", None, "unrequested-cpu", "", 10.0, 0.01, 0.10),
        # robotics holds 24 H100-hours in two pools, carol (nlp) used 6: 6/24 of each pool to carol (a: 4 h,
        # b: 2 h), the 18/24 no pod requested unallocated
        ("jaguar", "pool:a", "robotics", None, "reserved-gpu", H100, 16.0, 2.40, 38.40),
        ("jaguar", "pool:b", "robotics", None, "reserved-gpu", H100, 8.0, 2.40, 19.20),
        ("jaguar", "carol", "nlp", "carol", "gpu", H100, 6.0, 2.40, 14.40),
        ("jaguar", "carol", "robotics", "carol", "credit-gpu", H100, -6.0, 2.40, -14.40),
    ]}
    config = str(write_config(database=write_ledger(tmp_path / "shares.db", rows), currency="USD"))
    focus = export(config, str(DAY), str(DAY))
    check_focus_13(focus)
    assert_split(split(focus, "billing/unrequested-share"), {
        ("ibis/unrequested/cpu", "ibis/x"): (0.75, 30.0, 0.30), ("ibis/unrequested/cpu", "ibis/z"): (0.25, 10.0, 0.10),
        ("ibis/unrequested/cpu", "ibis/y"): (1.0, 10.0, 0.10)})
    a, b = f"jaguar/pool:a/gpu/{H100}", f"jaguar/pool:b/gpu/{H100}"
    assert_split(split(focus, "billing/reserved-pool"), {
        (a, "jaguar/carol"): (0.25, 4.0, 9.60), (a, None): (0.75, 12.0, 28.80),
        (b, "jaguar/carol"): (0.25, 2.0, 4.80), (b, None): (0.75, 6.0, 14.40)})
    share = focus[focus["AllocatedResourceId"] == "ibis/x"].iloc[0]
    assert (share["ResourceType"], share["AllocatedResourceName"], share["BillingAccountId"]) == (
        "Unrequested capacity", "x", "vision")
    assert json.loads(share["Tags"]) == {"billing/cluster": "ibis", "billing/resource": "unrequested-cpu",
                                         "billing/team": "vision"}
    assert json.loads(share["AllocatedTags"]) == {"billing/namespace": "x"}
    # carol's own use is hers, not a split: no allocation, the namespace its resource
    own = focus[(focus["BillingAccountId"] == "nlp") & (focus["PricingUnit"] == "GPU-Hours")].iloc[0]
    assert pd.isna(own["AllocatedMethodId"]) and own["ResourceId"] == "jaguar/carol"
    assert own["SkuPriceId"] == own["SkuId"] == f"gpu/{H100}" and own["SkuMeter"] == "GPU-hours"
    assert own["ServiceProviderName"] == own["HostProviderName"] == own["ProviderName"] == "jaguar"
    # the money as the ledger's teams have it: robotics 38.40 + 19.20 - 14.40, nlp 14.40 + 0.10, vision 0.40;
    # credits -14.40; carol's 6 h of robotics' pools at their price 9.60 + 4.80
    assert by_account(focus) == pytest.approx({"robotics": 43.20, "nlp": 14.50, "vision": 0.40})
    assert focus.loc[focus["ChargeCategory"] == "Credit", "BilledCost"].sum() == pytest.approx(-14.40)
    assert by_allocated_resource(focus) == pytest.approx({
        "jaguar/carol": 14.40, "ibis/x": 0.30, "ibis/z": 0.10, "ibis/y": 0.10})


# a Kueue-managed cluster and a reserved pool on one day (the allocations and money worked out by hand below)
KUEUE_DAY = {DAY: [
    # jaguar is Kueue-managed: vision's ClusterQueue holds 24 H100-hours, nlp's 48 (2.40 a GPU-hour)
    ("jaguar", "quota:vision-q", "vision", None, "quota-gpu", H100, 24.0, 2.40, 57.60),
    ("jaguar", "quota:nlp-q", "nlp", None, "quota-gpu", H100, 48.0, 2.40, 115.20),
    # team-vision ran 30 GPU-hours, half at a 50 % priority-class discount (list 72.00, paid 54.00): 18 within
    # vision's quota, 12 borrowed from nlp's; its credits are those parts of what it paid
    ("jaguar", "team-vision", "vision", None, "gpu", H100, 30.0, 2.40, 54.00, 72.00),
    ("jaguar", "team-vision", "vision", None, "credit-gpu", H100, -18.0, 2.40, -32.40),
    ("jaguar", "team-vision", "nlp", None, "lent-gpu", H100, -12.0, 2.40, -21.60),
    # team-nlp ran 24 GPU-hours within nlp's quota
    ("jaguar", "team-nlp", "nlp", None, "gpu", H100, 24.0, 2.40, 57.60),
    ("jaguar", "team-nlp", "nlp", None, "credit-gpu", H100, -24.0, 2.40, -57.60),
    # heron has a reserved pool: its credit stays the pool's
    ("heron", "pool:p1", "robotics", None, "reserved-gpu", H100, 24.0, 2.40, 57.60),
    ("heron", "carol", "nlp", "carol", "gpu", H100, 6.0, 2.40, 14.40),
    ("heron", "carol", "robotics", "carol", "credit-gpu", H100, -6.0, 2.40, -14.40),
]}


def test_kueue_quotas_are_split_as_the_quota_method_and_their_credits_keep_list_cost_at_list_price(tmp_path, write_config):
    config = str(write_config(database=write_ledger(tmp_path / "kueue.db", KUEUE_DAY), currency="USD"))
    focus = export(config, str(DAY), str(DAY))
    check_focus_13(focus)
    # vision's 24 quota hours: 18 used within (18/24), 6 unused (6/24); nlp's 48: 24 its own use (24/48), 12 lent
    # to team-vision (12/48), 12 unused (12/48); each part of the quota's 2.40 an hour
    vision_q, nlp_q = f"jaguar/quota:vision-q/gpu/{H100}", f"jaguar/quota:nlp-q/gpu/{H100}"
    assert_split(split(focus, "billing/kueue-quota"), {
        (vision_q, "jaguar/team-vision"): (0.75, 18.0, 43.20), (vision_q, None): (0.25, 6.0, 14.40),
        (nlp_q, "jaguar/team-nlp"): (0.5, 24.0, 57.60), (nlp_q, "jaguar/team-vision"): (0.25, 12.0, 28.80),
        (nlp_q, None): (0.25, 12.0, 28.80)})
    assert_split(split(focus, "billing/reserved-pool"), {
        (f"heron/pool:p1/gpu/{H100}", "heron/carol"): (0.25, 6.0, 14.40),
        (f"heron/pool:p1/gpu/{H100}", None): (0.75, 18.0, 43.20)})
    quota = focus[focus["AllocatedMethodId"] == "billing/kueue-quota"]
    assert set(zip(quota["BillingAccountId"], quota["ResourceType"], quota["ChargeCategory"])) == {
        ("vision", "Kueue quota", "Usage"), ("nlp", "Kueue quota", "Usage")}
    # a credit gives back what was paid, and is worth its hours at list price: -18 x 2.40 and -12 x 2.40
    credits = focus[focus["ChargeCategory"] == "Credit"].set_index(["BillingAccountId", "SkuId"])
    assert credits.loc[("vision", f"credit-gpu/{H100}"), ["BilledCost", "ListCost"]].tolist() == pytest.approx(
        [-32.40, -43.20])
    assert credits.loc[("nlp", f"lent-gpu/{H100}"), ["BilledCost", "ListCost"]].tolist() == pytest.approx(
        [-21.60, -28.80])
    assert credits["AllocatedMethodId"].isna().all()
    # the money as the ledger's teams have it: vision 57.60 + 54.00 - 32.40; nlp 115.20 + 57.60 - 21.60 - 57.60
    # + 14.40; robotics 57.60 - 14.40; the credits what the ledger credits
    assert by_account(focus) == pytest.approx({"vision": 79.20, "nlp": 108.00, "robotics": 43.20})
    assert credits["BilledCost"].sum() == pytest.approx(-32.40 - 21.60 - 57.60 - 14.40)
    # by allocated resource, each namespace's hours of the quotas and pools at their price: team-vision's 30 h
    # 72.00 (it paid 54.00 after its discount), team-nlp's 24 h 57.60, carol's 6 h 14.40
    assert by_allocated_resource(focus) == pytest.approx({
        "jaguar/team-vision": 72.00, "jaguar/team-nlp": 57.60, "heron/carol": 14.40})
    assert focus["BilledCost"].sum() == pytest.approx(57.60 + 115.20 + 57.60)  # as the ledger: quotas and pool
    older = export(config, str(DAY), str(DAY), "--focus-version", "1.2")  # FOCUS 1.2 asks the same of ListCost
    assert older["ListCost"].to_numpy() == pytest.approx((older["ListUnitPrice"] * older["PricingQuantity"]).to_numpy())


def test_workload_rows_pass_the_focus_13_checks_and_are_no_split(tmp_path, write_config):
    url = f"sqlite:///{tmp_path / 'workloads.db'}"
    engine = open_ledger(url)
    fill(engine)
    engine.dispose()
    config = str(write_config(database=url, currency="USD", cost_labels=["experiment"]))
    focus = export(config, "2026-11-01", "2026-11-03")
    check_focus_13(focus)
    assert focus["AllocatedMethodId"].isna().all()
    # November is open: its rows are on the statements closing it will issue, by team and cluster
    assert (focus["InvoiceId"] == focus["InvoiceIssuerName"] + "/2026-11/" + focus["BillingAccountId"]).all()
    train = focus[focus["ResourceId"] == "jaguar/alice/Job/train-a"].iloc[0]
    assert json.loads(train["Tags"])["experiment"] == "exp-1"  # measured per workload: its tags all in Tags


def test_the_1_2_option_writes_the_1_2_columns(october):
    focus = export(october, "2026-10-01", "2026-10-31", "--focus-version", "1.2")
    assert not {"ServiceProviderName", "HostProviderName", "AllocatedMethodId", "SkuPriceId"} & set(focus.columns)
    assert len(focus.columns) == 33 and "InvoiceId" in focus and focus["BilledCost"].sum() == pytest.approx(160.00)


def test_numbers_are_plain_decimals_and_text_columns_are_strings_in_parquet(tmp_path, write_config):
    """A cost of 1/10,909 of a cent came out as `9.166666666666667e-05`; ChargeClass, null on every row, was a
    Parquet column of type null."""
    rows = {DAY: [("jaguar", "x", "robotics", None, "cpu", "", 0.011, 1 / 120, 0.011 / 120),
                  ("jaguar", "x", "robotics", None, "memory", "", 2.5, 0.0015, 0.00375)]}
    config = str(write_config(database=write_ledger(tmp_path / "small.db", rows), currency="USD"))
    for version in ("1.3", "1.2"):
        result = CliRunner().invoke(main, ["export", "--config", config, "--from", str(DAY), "--to", str(DAY),
                                           "--focus-version", version])
        text = pd.read_csv(io.StringIO(result.stdout), dtype=str, keep_default_na=False, na_values=[""])
        check_numeric_text(text)
        assert set(text["BilledCost"]) == {"0.00009166666666666667", "0.00375"}
        assert set(text["PricingQuantity"]) == {"0.011", "2.5"} and set(text["ListUnitPrice"]) == {
            "0.008333333333333333", "0.0015"}
    target = tmp_path / "small.parquet"
    result = CliRunner().invoke(main, ["export", "--config", config, "--from", str(DAY), "--to", str(DAY),
                                       "--output", str(target)])
    assert result.exit_code == 0, result.output
    check_parquet_types(pq.read_schema(target))


# FOCUS's published use-case queries, as published but for the table's name and the period's bounds filled in:
# "Verify service charges" (the FinOps Foundation's use case library), and the split cost allocation examples'
# "Total cost by consumer resource" and "Unallocated remainder by resource" (the FOCUS specification's appendix)
VERIFY_SERVICE_CHARGES = """
SELECT ProviderName, BillingAccountId, BillingAccountName, BillingCurrency, ServiceName,
       SUM(BilledCost) AS TotalBilledCost
FROM focus_data_table WHERE BillingPeriodStart >= ? AND BillingPeriodEnd < ?
GROUP BY ProviderName, BillingAccountName, BillingAccountId, BillingCurrency, ServiceName"""
COST_BY_CONSUMER_RESOURCE = """
SELECT AllocatedResourceId, SUM(EffectiveCost) AS TotalEffectiveCost
FROM focus_data WHERE AllocatedResourceId IS NOT NULL GROUP BY AllocatedResourceId"""
UNALLOCATED_REMAINDER = """
SELECT ResourceId, SUM(EffectiveCost) AS UnallocatedEffectiveCost
FROM focus_data WHERE AllocatedMethodId IS NOT NULL AND AllocatedResourceId IS NULL GROUP BY ResourceId"""
CREDITS = """
SELECT BillingAccountId, SUM(BilledCost) AS Credits FROM focus_data WHERE ChargeCategory = 'Credit'
GROUP BY BillingAccountId"""  # no published query: the credits per account, as the ledger's credit rows


def test_duckdb_answers_focus_use_cases_on_the_parquet_export_with_the_ledgers_figures(tmp_path, write_config):
    config = str(write_config(database=write_ledger(tmp_path / "kueue.db", KUEUE_DAY), currency="USD"))
    target = tmp_path / "day.parquet"
    result = CliRunner().invoke(main, ["export", "--config", config, "--from", str(DAY), "--to", str(DAY),
                                       "--output", str(target)])
    assert result.exit_code == 0, result.output
    db = duckdb.connect()
    db.execute(f"CREATE VIEW focus_data AS SELECT * FROM read_parquet('{target}')")
    db.execute("CREATE VIEW focus_data_table AS SELECT * FROM focus_data")

    def answer(query: str, *bounds: str) -> dict:
        rows = db.execute(query, list(bounds)).fetchall()
        return {tuple(row[:-1]) if len(row) > 2 else row[0]: round(row[-1], 2) for row in rows}

    # by account, as the ledger's teams (test_kueue_quotas_... works them out): vision 79.20, nlp 93.60 on jaguar
    # and 14.40 on heron, robotics 43.20 on heron
    assert answer(VERIFY_SERVICE_CHARGES, "2026-11-01", "2026-12-02") == {
        ("jaguar", "vision", "vision", "USD", "Kubernetes"): 79.20, ("jaguar", "nlp", "nlp", "USD", "Kubernetes"): 93.60,
        ("heron", "nlp", "nlp", "USD", "Kubernetes"): 14.40, ("heron", "robotics", "robotics", "USD", "Kubernetes"): 43.20}
    # each namespace's hours of the quotas and the pool at their price
    assert answer(COST_BY_CONSUMER_RESOURCE) == {"jaguar/team-vision": 72.00, "jaguar/team-nlp": 57.60,
                                                 "heron/carol": 14.40}
    # what no one used: 6 h of vision's quota, 12 of nlp's, 18 of the pool
    assert answer(UNALLOCATED_REMAINDER) == {f"jaguar/quota:vision-q/gpu/{H100}": 14.40,
                                             f"jaguar/quota:nlp-q/gpu/{H100}": 28.80, f"heron/pool:p1/gpu/{H100}": 43.20}
    assert answer(CREDITS) == {"vision": -32.40, "nlp": -79.20, "robotics": -14.40}


# FOCUS's "Report on Corrections" (the specification's Charge Categorization feature), as published but for the
# table's name and the billing periods' bounds filled in
REPORT_ON_CORRECTIONS = """
SELECT ProviderName, BillingAccountId, ChargeCategory, ServiceCategory, ServiceName, SUM(BilledCost) AS TotalBilledCost
FROM focus_data_table WHERE BillingPeriodStart >= ? AND BillingPeriodEnd < ? AND ChargeClass = 'Correction'
GROUP BY ProviderName, BillingAccountId, ChargeCategory, ServiceCategory, ServiceName"""


def test_a_day_of_a_closed_month_run_again_is_corrected_in_the_month_that_invoices_it(tmp_path, write_config):
    """tests.helpers.statements' closing: October closed (robotics 75.20, vision 10.00), then October 5 run again at
    new prices, which books OCT_5_CORRECTIONS in November. The export wrote October 5's new rows in October, whose
    InvoiceIds then no longer added up to October's statement, and November's corrections not at all."""
    config = str(write_config(database=corrected_october(f"sqlite:///{tmp_path / 'corrected.db'}"), currency="USD"))
    focus = export(config, "2026-10-01", "2026-11-30")
    check_focus_13(focus)
    # each invoice adds up to its statement, by cluster: October as closed (robotics jaguar 36.00 GPU + 0.60 CPU
    # + 0.60 unrequested, heron 48.00 pool - 10.00 credit; vision heron 10.00), November its 0.12 CPU and what the
    # re-run changed (robotics jaguar +6.00 - 0.60, heron +12.00 - 2.50; vision heron +2.50)
    assert focus.groupby("InvoiceId")["BilledCost"].sum().to_dict() == pytest.approx({
        "jaguar/2026-10/robotics": 37.20, "heron/2026-10/robotics": 38.00, "heron/2026-10/vision": 10.00,
        "jaguar/2026-11/robotics": 5.52, "heron/2026-11/robotics": 9.50, "heron/2026-11/vision": 2.50})
    # the corrections: in November's billing period, over the day they correct, each its resource's category
    corrected = focus[focus["ChargeClass"] == "Correction"]
    assert {(row.BillingAccountId, row.ResourceId, row.SkuId, row.ChargeCategory): round(row.BilledCost, 2)
            for row in corrected.itertuples()} == {
        ("robotics", "jaguar", "gpu", "Usage"): 6.00, ("robotics", "jaguar", "unrequested-cpu", "Usage"): -0.60,
        ("robotics", "heron", "reserved-gpu", "Usage"): 12.00, ("robotics", "heron", "credit-gpu", "Credit"): -2.50,
        ("vision", "heron", "gpu", "Usage"): 2.50}
    assert set(corrected["BillingPeriodStart"]) == {"2026-11-01T00:00:00Z"}
    assert set(corrected["ChargePeriodStart"]) == {"2026-10-05T00:00:00Z"}
    assert set(corrected["ChargePeriodEnd"]) == {"2026-10-06T00:00:00Z"}
    # October's own rows of October 5 are the ledger's as it is now; what they changed is left out of October's
    # invoice by an Adjustment each, the opposite of its correction
    left_out = focus[focus["ChargeClass"].isna() & focus["Tags"].str.contains('"billing/kind": "corrected-later"')]
    assert set(left_out["ChargeCategory"]) == {"Adjustment"} and len(left_out) == 5
    assert set(left_out["BillingPeriodStart"]) == {"2026-10-01T00:00:00Z"}
    assert left_out["BilledCost"].sum() == pytest.approx(-(6.00 - 0.60 + 12.00 - 2.50 + 2.50))
    # by the day the money is for, October 5 is the ledger's now (90.60): its new rows, +17.40 less 17.40
    october_5 = focus[focus["ChargePeriodStart"] == "2026-10-05T00:00:00Z"]
    assert october_5["BilledCost"].sum() == pytest.approx(90.60)
    assert focus["BilledCost"].sum() == pytest.approx(90.60 + 12.00 + 0.12)  # October as corrected, November's CPU
    # FOCUS's own query of November's corrections, in DuckDB on the Parquet export
    target = tmp_path / "corrected.parquet"
    result = CliRunner().invoke(main, ["export", "--config", config, "--from", "2026-10-01", "--to", "2026-11-30",
                                       "--output", str(target)])
    assert result.exit_code == 0, result.output
    db = duckdb.connect()
    db.execute(f"CREATE VIEW focus_data_table AS SELECT * FROM read_parquet('{target}')")
    rows = db.execute(REPORT_ON_CORRECTIONS, ["2026-11-01", "2026-12-02"]).fetchall()
    assert {row[:3]: round(row[-1], 2) for row in rows} == {
        ("jaguar", "robotics", "Usage"): 5.40, ("heron", "robotics", "Usage"): 12.00,
        ("heron", "robotics", "Credit"): -2.50, ("heron", "vision", "Usage"): 2.50}
    # an export of November alone holds its corrections (booked in it), not October's rows nor their Adjustments
    november = export(config, "2026-11-01", "2026-11-30")
    assert november.groupby("InvoiceId")["BilledCost"].sum().to_dict() == pytest.approx({
        "jaguar/2026-11/robotics": 5.52, "heron/2026-11/robotics": 9.50, "heron/2026-11/vision": 2.50})


def test_corrections_on_a_recovered_cluster_keep_each_invoice_and_each_month_as_the_ledger_has_it(tmp_path,
                                                                                                  write_config):
    """tests.helpers.statements' recovered October (jaguar 1,200.00, heron 90.00, closed as robotics 930.00 and
    vision 360.00) with two days corrected, which moves cost between teams in November (robotics -165.00 beside
    its own 20.00, vision +45.00, audio +120.00, adding up to zero on each cluster)."""
    url = recovered_october(f"sqlite:///{tmp_path / 'recovered.db'}")
    focus = export(str(write_config(database=url, currency="USD")), "2026-10-01", "2026-11-30")
    check_focus_13(focus)
    by_billing_period = focus.groupby(["BillingPeriodStart", "BillingAccountId"])["BilledCost"].sum().round(2)
    # audio's October rows (dana's namespace, audio's since) are left out of October's invoice by as much
    assert by_billing_period.pop(("2026-10-01T00:00:00Z", "audio")) == 0.00
    assert by_billing_period.to_dict() == {  # each month's statement: October as closed, November with corrections
        ("2026-10-01T00:00:00Z", "robotics"): 930.00, ("2026-10-01T00:00:00Z", "vision"): 360.00,
        ("2026-11-01T00:00:00Z", "robotics"): -145.00, ("2026-11-01T00:00:00Z", "vision"): 45.00,
        ("2026-11-01T00:00:00Z", "audio"): 120.00}
    # by when the cost was incurred, October is the ledger's as corrected, still 1,290.00 in all
    october = focus[focus["ChargePeriodStart"] < "2026-11-01"].groupby("BillingAccountId")["BilledCost"].sum()
    assert october.round(2).to_dict() == {"robotics": 765.00, "vision": 405.00, "audio": 120.00}
    recovery = focus[(focus["ChargeClass"] == "Correction") & (focus["SkuId"] == "recovery")]
    assert set(recovery["ChargeCategory"]) == {"Adjustment"} and set(recovery["ChargePeriodStart"]) == {
        "2026-10-01T00:00:00Z"}  # a cost recovery line's correction is over the month the line is for
