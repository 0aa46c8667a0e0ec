"""`billing export`: the ledger in the FinOps FOCUS 1.3 layout, read back and checked column by column
(tests/helpers/focus13.py, from the specification's text); the allocated ratios expected are worked out by
hand from the ledgers' rows.
"""

import io
import json
from datetime import date

import pandas as pd
import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.config import CostRecovery
from billing.ledger.database import open_ledger
from billing.publish.statement import close_month
from tests.helpers.focus13 import check_focus_13, ratio
from tests.helpers.report_ledger import DAY, H100, write_ledger
from tests.helpers.statements import OCT, OCT_5, OCT_6, TODAY_DONE, write_month
from tests.helpers.workload_ledger import fill


def csv_of(result) -> pd.DataFrame:
    assert result.exit_code == 0, result.output + result.stderr
    return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, na_values=[""])


def export(config: str, first: str, last: str, *args: str) -> pd.DataFrame:
    return csv_of(CliRunner().invoke(main, ["export", "--config", config, "--from", first, "--to", last, *args]))


def allocated_to(focus: pd.DataFrame, method: str) -> dict[tuple[str, str], float]:
    rows = focus[focus["AllocatedMethodId"] == method]
    return {(resource, account): ratio(details) for resource, account, details in
            zip(rows["AllocatedResourceId"], rows["BillingAccountId"], rows["AllocatedMethodDetails"])}


@pytest.fixture
def october(tmp_path, write_config) -> str:
    """tests.helpers.statements' October, closed recovering each cluster's cost (jaguar 100.00, heron 60.00)."""
    url = f"sqlite:///{tmp_path / 'october.db'}"
    engine = open_ledger(url)
    write_month(engine, OCT, {date(2026, 10, 5): OCT_5, date(2026, 10, 6): OCT_6})
    close_month(engine, OCT, "finance", TODAY_DONE, "USD", {},
                recover={"jaguar": CostRecovery(monthly_cost=100.00), "heron": CostRecovery(monthly_cost=60.00)})
    engine.dispose()
    return str(write_config(database=url, currency="USD"))


def test_an_export_with_reserved_pools_unrequested_capacity_and_cost_recovery_passes_the_focus_13_checks(october):
    focus = export(october, "2026-10-01", "2026-10-31")
    check_focus_13(focus)
    assert focus["BilledCost"].sum() == pytest.approx(160.00)  # the closed month recovered what both clusters cost
    # heron's pool p1: 24 GPU-h, carol (vision) used 5 of them: 5/24 to carol, the 19/24 no pod requested stays
    # robotics' (the pool's row); both rows have the pool as their resource
    assert allocated_to(focus, "billing/reserved-pool") == pytest.approx({
        ("heron/carol", "robotics"): 5 / 24, ("heron/pool:p1", "robotics"): 19 / 24})
    pool = focus[focus["AllocatedMethodId"] == "billing/reserved-pool"]
    assert set(pool["ResourceId"]) == {"heron/pool:p1"} and set(pool["ChargeCategory"]) == {"Usage", "Credit"}
    # jaguar's unrequested CPU, all of it to team-robotics
    assert allocated_to(focus, "billing/unrequested-share") == {("jaguar/team-robotics", "robotics"): 1.0}
    # cost recovery (tests/helpers/statements.py by hand): jaguar 62.80 all robotics'; heron 12.00 split 38 : 10
    # as robotics and vision were charged 38.00 and 10.00 there
    assert allocated_to(focus, "billing/cost-recovery") == pytest.approx({
        ("jaguar/team:robotics", "robotics"): 1.0, ("heron/team:robotics", "robotics"): 38 / 48,
        ("heron/team:vision", "vision"): 10 / 48})
    recovery = focus[focus["ChargeCategory"] == "Adjustment"].set_index("AllocatedResourceId")
    assert recovery.loc["heron/team:vision", "BilledCost"] == pytest.approx(2.50)
    assert json.loads(recovery.loc["heron/team:vision", "Tags"]) == {"billing/cluster": "heron", "billing/kind": "recovery"}
    assert json.loads(recovery.loc["heron/team:vision", "AllocatedTags"]) == {"billing/team": "vision"}
    assert recovery.loc["heron/team:vision", "ResourceId"] == "heron"


def test_shares_of_unrequested_capacity_and_several_pools_of_a_team(tmp_path, write_config):
    rows = {DAY: [
        # ibis' 40 unrequested core-hours, split 30 : 10 by what x and y paid there
        ("ibis", "x", "vision", None, "unrequested-cpu", "", 30.0, 0.01, 0.30),
        ("ibis", "y", "nlp", None, "unrequested-cpu", "", 10.0, 0.01, 0.10),
        # robotics holds 24 H100-hours in two pools, carol (nlp) used 6: 6/24 to carol; of the 18 unrequested,
        # pool a (16 of 24 h) keeps 16/24 x 18/24 = 1/2, pool b 8/24 x 18/24 = 1/4
        ("jaguar", "pool:a", "robotics", None, "reserved-gpu", H100, 16.0, 2.40, 38.40),
        ("jaguar", "pool:b", "robotics", None, "reserved-gpu", H100, 8.0, 2.40, 19.20),
        ("jaguar", "carol", "nlp", "carol", "gpu", H100, 6.0, 2.40, 14.40),
        ("jaguar", "carol", "robotics", "carol", "credit-gpu", H100, -6.0, 2.40, -14.40),
    ]}
    config = str(write_config(database=write_ledger(tmp_path / "shares.db", rows), currency="USD"))
    focus = export(config, str(DAY), str(DAY))
    check_focus_13(focus)
    assert allocated_to(focus, "billing/unrequested-share") == pytest.approx({
        ("ibis/x", "vision"): 0.75, ("ibis/y", "nlp"): 0.25})
    assert allocated_to(focus, "billing/reserved-pool") == pytest.approx({
        ("jaguar/carol", "robotics"): 0.25, ("jaguar/pool:a", "robotics"): 0.5, ("jaguar/pool:b", "robotics"): 0.25})
    share = focus[focus["AllocatedResourceId"] == "ibis/x"].iloc[0]
    assert (share["ResourceId"], share["ResourceType"], share["AllocatedResourceName"]) == ("ibis", "Cluster", "x")
    assert json.loads(share["Tags"]) == {"billing/cluster": "ibis", "billing/resource": "cpu"}
    assert json.loads(share["AllocatedTags"]) == {"billing/namespace": "x", "billing/team": "vision"}
    assert set(focus.loc[focus["AllocatedMethodId"] == "billing/reserved-pool", "ResourceId"]) == {"jaguar/pool:a+pool:b"}
    # carol's own use is hers, not a split: no allocation, the namespace its resource
    own = focus[(focus["BillingAccountId"] == "nlp") & (focus["PricingUnit"] == "GPU-Hours")].iloc[0]
    assert pd.isna(own["AllocatedMethodId"]) and own["ResourceId"] == "jaguar/carol"
    assert own["SkuPriceId"] == own["SkuId"] == f"gpu/{H100}" and own["SkuMeter"] == "GPU-hours"
    assert own["ServiceProviderName"] == own["HostProviderName"] == own["ProviderName"] == "jaguar"
    assert focus["BilledCost"].sum() == pytest.approx(0.40 + 38.40 + 19.20)  # as the ledger


def test_kueue_quotas_are_split_as_the_quota_method_and_their_credits_keep_list_cost_at_list_price(tmp_path, write_config):
    rows = {DAY: [
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
    config = str(write_config(database=write_ledger(tmp_path / "kueue.db", rows), currency="USD"))
    focus = export(config, str(DAY), str(DAY))
    check_focus_13(focus)
    # vision's 24 quota hours: 18 used within (18/24), 6 unused stay the quota's (6/24); nlp's 48: 24 its own use
    # (24/48), 12 lent to team-vision (12/48), 12 unused (12/48)
    assert allocated_to(focus, "billing/kueue-quota") == pytest.approx({
        ("jaguar/team-vision", "vision"): 0.75, ("jaguar/quota:vision-q", "vision"): 0.25,
        ("jaguar/team-nlp", "nlp"): 0.5, ("jaguar/team-vision", "nlp"): 0.25, ("jaguar/quota:nlp-q", "nlp"): 0.25})
    assert allocated_to(focus, "billing/reserved-pool") == pytest.approx({
        ("heron/carol", "robotics"): 0.25, ("heron/pool:p1", "robotics"): 0.75})
    quota = focus[focus["AllocatedMethodId"] == "billing/kueue-quota"]
    assert set(zip(quota["BillingAccountId"], quota["ResourceId"], quota["ResourceType"])) == {
        ("vision", "jaguar/quota:vision-q", "Kueue quota"), ("nlp", "jaguar/quota:nlp-q", "Kueue quota")}
    # a credit gives back what was paid, and is worth its hours at list price: -18 x 2.40 and -12 x 2.40
    credits = quota[quota["ChargeCategory"] == "Credit"].set_index("BillingAccountId")
    assert credits.loc["vision", ["BilledCost", "ListCost"]].tolist() == pytest.approx([-32.40, -43.20])
    assert credits.loc["nlp"].set_index("AllocatedResourceId").loc["jaguar/team-vision", ["BilledCost", "ListCost"]] \
        .tolist() == pytest.approx([-21.60, -28.80])
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
    train = focus[focus["ResourceId"] == "jaguar/alice/Job/train-a"].iloc[0]
    assert json.loads(train["Tags"])["experiment"] == "exp-1"  # measured per workload: its tags all in Tags


def test_the_1_2_option_writes_the_1_2_columns(october):
    focus = export(october, "2026-10-01", "2026-10-31", "--focus-version", "1.2")
    assert not {"ServiceProviderName", "HostProviderName", "AllocatedMethodId", "SkuPriceId"} & set(focus.columns)
    assert len(focus.columns) == 32 and focus["BilledCost"].sum() == pytest.approx(160.00)
