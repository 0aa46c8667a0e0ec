"""The FOCUS 1.3 table of rules (tests/helpers/focus13.py) checks what it says: hand-made rows that meet every
requirement pass, and a row that breaks one requirement fails with a message naming the column and the rule, for
every rule of the table (so none is a check that cannot fail)."""

import json

import pandas as pd
import pytest

from tests.helpers.focus13 import COLUMNS, MANDATORY, NOT_WRITTEN, violations

NOV, DEC = "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"
USAGE = {
    "AllocatedMethodDetails": None, "AllocatedMethodId": None, "AllocatedResourceId": None,
    "AllocatedResourceName": None, "AllocatedTags": None, "BilledCost": 0.30, "BillingAccountId": "robotics",
    "BillingAccountName": "robotics", "BillingCurrency": "USD", "BillingPeriodEnd": DEC, "BillingPeriodStart": NOV,
    "ChargeCategory": "Usage", "ChargeClass": None, "ChargeDescription": "CPU of jaguar/alice",
    "ChargeFrequency": "Usage-Based", "ChargePeriodEnd": "2026-11-03T00:00:00Z",
    "ChargePeriodStart": "2026-11-02T00:00:00Z", "ConsumedQuantity": 30.0, "ConsumedUnit": "Core-Hours",
    "ContractedCost": 0.30, "EffectiveCost": 0.30, "HostProviderName": "jaguar", "InvoiceId": "jaguar/2026-11/robotics",
    "InvoiceIssuerName": "jaguar", "ListCost": 0.30, "ListUnitPrice": 0.01, "PricingCategory": "Standard",
    "PricingQuantity": 30.0, "PricingUnit": "Core-Hours", "ProviderName": "jaguar", "PublisherName": "jaguar",
    "ResourceId": "jaguar/alice", "ResourceName": "alice", "ResourceType": "Namespace", "ServiceCategory": "Compute",
    "ServiceName": "Kubernetes", "ServiceProviderName": "jaguar", "ServiceSubcategory": "Containers", "SkuId": "cpu",
    "SkuMeter": "CPU-hours", "SkuPriceId": "cpu", "Tags": json.dumps({"billing/team": "robotics"}),
}
# a reserved pool's 24 GPU-hours at 2.00: carol used 6 (a quarter, 12.00), no pod the other 18 (36.00)
POOL = {**USAGE, "ResourceId": "jaguar/pool:p/gpu", "ResourceName": "pool:p", "ResourceType": "Reserved pool",
        "SkuId": "reserved-gpu", "SkuPriceId": "reserved-gpu", "SkuMeter": "GPU-hours", "PricingUnit": "GPU-Hours",
        "ConsumedUnit": "GPU-Hours", "ListUnitPrice": 2.00, "AllocatedMethodId": "billing/reserved-pool"}


def part(ratio: float, hours: float, namespace: str | None) -> dict:
    cost = hours * 2.00
    return {**POOL, "PricingQuantity": hours, "ConsumedQuantity": hours, "BilledCost": cost, "ContractedCost": cost,
            "EffectiveCost": cost, "ListCost": cost,
            "AllocatedMethodDetails": json.dumps({"Elements": [{"AllocatedRatio": ratio, "UsageUnit": "GPU-Hours",
                                                                "UsageQuantity": hours}]}),
            "AllocatedResourceId": namespace and f"jaguar/{namespace}", "AllocatedResourceName": namespace,
            "AllocatedTags": namespace and json.dumps({"billing/namespace": namespace})}


ROWS = [
    USAGE,  # 0
    part(0.25, 6.0, "carol"),  # 1
    part(0.75, 18.0, None),  # 2: the unallocated part
    # 3: the credit robotics gets for carol's use: no unit price, its costs the BilledCost
    {**USAGE, "ChargeCategory": "Credit", "BilledCost": -12.00, "ContractedCost": -12.00, "EffectiveCost": -12.00,
     "ListCost": -12.00, "ListUnitPrice": None, "PricingQuantity": None, "PricingUnit": None, "PricingCategory": None,
     "ConsumedQuantity": None, "ConsumedUnit": None, "SkuPriceId": None, "SkuId": "credit-gpu",
     "SkuMeter": "GPU-hours", "ResourceId": "jaguar/carol", "ResourceName": "carol"},
    # 4: October 5 corrected in November, on November's invoice
    {**USAGE, "ChargeClass": "Correction", "ChargePeriodStart": "2026-10-05T00:00:00Z",
     "ChargePeriodEnd": "2026-10-06T00:00:00Z", "BilledCost": 0.05, "ContractedCost": 0.05, "EffectiveCost": 0.05,
     "ListCost": 0.05, "PricingQuantity": 5.0, "ConsumedQuantity": 5.0},
]
TAX = {0: {"ChargeCategory": "Tax"}}  # a row with a SKU price, as Tax
CREDIT_CONSUMED = {3: {"ConsumedQuantity": 6.0, "ConsumedUnit": "GPU-Hours"}}
NO_LIST_PRICE = {0: {"ListUnitPrice": None}}
OCTOBER = {0: {"BillingPeriodStart": "2026-10-01T00:00:00Z", "BillingPeriodEnd": NOV,
               "ChargePeriodStart": "2026-10-02T00:00:00Z", "ChargePeriodEnd": "2026-10-03T00:00:00Z"}}


def export(changes: dict[int, dict]) -> pd.DataFrame:
    return pd.DataFrame([{**row, **changes.get(index, {})} for index, row in enumerate(ROWS)])


# (column, the rule's name, the rows changed to break it)
BROKEN = [
    ("BilledCost", "allows nulls", {0: {"BilledCost": None}}),
    ("ChargeFrequency", "allows nulls", {0: {"ChargeFrequency": None}}),
    ("BilledCost", "data type", {0: {"BilledCost": "0.30"}}),
    ("BillingCurrency", "data type", {0: {"BillingCurrency": "usd"}}),
    ("ChargePeriodStart", "data type", {0: {"ChargePeriodStart": "2026-11-02 00:00:00"}}),
    ("Tags", "data type", {0: {"Tags": json.dumps(["billing/team"])}}),
    ("Tags", "data type", {0: {"Tags": json.dumps({"billing/team": ["robotics"]})}}),
    ("AllocatedMethodDetails", "data type", {1: {"AllocatedMethodDetails": "a quarter"}}),
    ("ChargeCategory", "allowed values", {0: {"ChargeCategory": "Discount"}}),
    ("ChargeClass", "allowed values", {4: {"ChargeClass": "Refund"}}),
    ("ServiceSubcategory", "allowed values", {0: {"ServiceSubcategory": "Kubernetes"}}),
    ("AllocatedMethodDetails", "null_off_a_split", {0: {"AllocatedMethodDetails": ROWS[1]["AllocatedMethodDetails"]}}),
    ("AllocatedMethodDetails", "set_on_a_split", {1: {"AllocatedMethodDetails": None}}),
    ("AllocatedMethodDetails", "elements_of_ratios",
     {1: {"AllocatedMethodDetails": json.dumps({"Elements": [{"AllocatedRatio": 0.25, "UsageQuantity": 6}]})}}),
    ("AllocatedMethodDetails", "elements_of_ratios",
     {1: {"AllocatedMethodDetails": json.dumps({"Elements": [{"AllocatedRatio": 0.25, "Nodes": 1}]})}}),
    ("AllocatedMethodId", "add_up_to_their_origin", {1: {"BilledCost": 13.00}}),
    ("AllocatedMethodId", "add_up_to_their_origin",
     {2: {"AllocatedMethodDetails": json.dumps({"Elements": [{"AllocatedRatio": 0.70}]})}}),
    ("AllocatedResourceId", "null_off_a_split", {0: {"AllocatedResourceId": "jaguar/alice"}}),
    ("AllocatedResourceId", "unique_within_resource_and_charge_period",
     {2: {"AllocatedResourceId": "jaguar/carol", "AllocatedResourceName": "carol"}}),
    ("AllocatedResourceName", "null_exactly_with_AllocatedResourceId", {1: {"AllocatedResourceName": None}}),
    ("AllocatedTags", "null_off_a_split", {0: {"AllocatedTags": json.dumps({"billing/namespace": "alice"})}}),
    ("AllocatedTags", "not_in_tags", {1: {"AllocatedTags": json.dumps({"billing/team": "robotics"})}}),
    ("BillingPeriodStart", "starts_before_its_end", {0: {"BillingPeriodEnd": NOV}}),
    ("ChargePeriodStart", "starts_before_its_end", {0: {"ChargePeriodEnd": "2026-11-02T00:00:00Z"}}),
    ("ChargeClass", "charge_class_for_a_previous_billing_period", {4: {"ChargeClass": None}}),
    ("ChargeClass", "charge_class_for_a_previous_billing_period", {0: {"ChargeClass": "Correction"}}),
    ("ChargeFrequency", "not_usage_based_purchase", {0: {"ChargeCategory": "Purchase"}}),
    ("ConsumedQuantity", "null_when_SkuPriceId_null", CREDIT_CONSUMED),
    ("ConsumedQuantity", "null_unless_usage", CREDIT_CONSUMED),
    ("ConsumedQuantity", "set_on_usage", {0: {"ConsumedQuantity": None, "ConsumedUnit": None}}),
    ("ConsumedUnit", "null_exactly_with_ConsumedQuantity", {0: {"ConsumedUnit": None}}),
    ("ContractedCost", "billed_cost_unless_priced", {3: {"ContractedCost": -14.40}}),
    ("EffectiveCost", "billed_cost_unless_usage_or_purchase", {3: {"EffectiveCost": 0.0}}),
    ("HostProviderName", "host_provider_set_unless_tax_or_adjustment", {0: {"HostProviderName": None}}),
    ("HostProviderName", "equals_service_provider", {0: {"HostProviderName": "a cloud"}}),
    ("InvoiceId", "on_an_invoice", {0: {"InvoiceId": None}}),
    ("InvoiceId", "correction_on_another_invoice", OCTOBER),  # October's row on the invoice correcting October
    ("ListCost", "list_cost_is_price_times_quantity", {0: {"ListCost": 0.31}}),
    ("ListCost", "list_cost_is_price_times_quantity", {0: {"ListCost": 0.30 + 2e-8}}),
    ("ListCost", "billed_cost_unless_priced", {3: {"ListCost": -14.40}}),
    ("ListUnitPrice", "null_when_SkuPriceId_null", {3: {"ListUnitPrice": 2.00}}),
    ("ListUnitPrice", "null_for_tax", TAX),
    ("ListUnitPrice", "set_on_usage_and_purchase", NO_LIST_PRICE),
    ("ListUnitPrice", "not_null_when_sku_price_id_not_null", NO_LIST_PRICE),
    ("ListUnitPrice", "non_negative", {0: {"ListUnitPrice": -0.01, "ListCost": -0.30}}),
    ("PricingCategory", "null_when_SkuPriceId_null", {3: {"PricingCategory": "Standard"}}),
    ("PricingCategory", "null_for_tax", TAX),
    ("PricingCategory", "set_on_usage_and_purchase", {0: {"PricingCategory": None}}),
    ("PricingQuantity", "null_when_SkuPriceId_null", {3: {"PricingQuantity": -6.0, "PricingUnit": "GPU-Hours"}}),
    ("PricingQuantity", "null_for_tax", TAX),
    ("PricingQuantity", "set_on_usage_and_purchase", {0: {"PricingQuantity": None, "PricingUnit": None}}),
    ("PricingUnit", "null_exactly_with_PricingQuantity", {0: {"PricingUnit": None}}),
    ("ProviderName", "equals_service_provider", {0: {"ProviderName": "acme"}}),
    ("ResourceName", "null_when_ResourceId_null", {0: {"ResourceId": None, "ResourceType": None}}),
    ("ResourceType", "null_exactly_with_ResourceId", {0: {"ResourceType": None}}),
    ("ServiceName", "one_service_category_per_service",
     {0: {"ServiceCategory": "Storage", "ServiceSubcategory": "Block Storage"}}),
    ("ServiceSubcategory", "subcategory_of_its_category", {0: {"ServiceSubcategory": "Block Storage"}}),
    ("SkuId", "null_for_tax", TAX),
    ("SkuId", "set_on_usage_and_purchase", {0: {"SkuId": None, "SkuMeter": None}}),
    ("SkuMeter", "null_when_SkuId_null", {3: {"SkuId": None}}),
    ("SkuMeter", "skumeter_set_with_sku", {0: {"SkuMeter": None}}),
    ("SkuPriceId", "null_for_tax", TAX),
    ("SkuPriceId", "set_on_usage_and_purchase", {0: {"SkuPriceId": None}}),
    ("SkuPriceId", "one_sku_per_sku_price", {4: {"SkuId": "cpu-fast"}}),  # cpu's price under two SKUs
]


def test_hand_made_rows_that_meet_every_requirement_pass():
    assert violations(export({})) == []


@pytest.mark.parametrize(("column", "rule", "changes"), BROKEN, ids=[f"{c}-{r}" for c, r, _ in BROKEN])
def test_a_row_that_breaks_a_rule_fails_naming_its_column_and_rule(column, rule, changes):
    found = violations(export(changes))
    assert any(message.startswith(f"{column}: {rule}") for message in found), found


def test_every_rule_of_the_table_has_a_row_that_breaks_it():
    rules = {(name, rule.__name__) for name, column in COLUMNS.items() for rule in column.rules}
    assert rules <= {(column, rule) for column, rule, _ in BROKEN}


def test_a_mandatory_column_missing_or_a_column_written_though_its_condition_does_not_hold_fails():
    assert violations(export({}).drop(columns="InvoiceIssuerName")) == [
        "InvoiceIssuerName: presence: missing (Mandatory)"]
    assert violations(export({}).assign(CommitmentDiscountId=None)) == [
        "CommitmentDiscountId: presence: written though no commitment discounts"]


def test_the_table_holds_the_23_mandatory_columns_of_1_3_and_no_column_twice():
    assert sum(column.level == MANDATORY for column in COLUMNS.values()) == 23
    assert not set(COLUMNS) & set(NOT_WRITTEN)
