"""Checks of a FOCUS 1.3 export read back, typed from the FOCUS 1.3 specification's Cost and Usage column
definitions (feature level, nullability, allowed values, formats) and its split cost allocation rules (the
attribute "Data Generator-Calculated Split Cost Allocation Handling" and the Allocated* columns), not from
billing's export."""

import json
import re

import pandas as pd
import pyarrow as pa
import pytest

# FOCUS 1.3 Cost and Usage columns: feature level, allows nulls
COLUMNS = {
    "AllocatedMethodDetails": ("Recommended", True), "AllocatedMethodId": ("Conditional", True),
    "AllocatedResourceId": ("Conditional", True), "AllocatedResourceName": ("Conditional", True),
    "AllocatedTags": ("Conditional", True), "AvailabilityZone": ("Recommended", True),
    "BilledCost": ("Mandatory", False), "BillingAccountId": ("Mandatory", False),
    "BillingAccountName": ("Mandatory", True), "BillingAccountType": ("Conditional", False),
    "BillingCurrency": ("Mandatory", False), "BillingPeriodEnd": ("Mandatory", False),
    "BillingPeriodStart": ("Mandatory", False), "CapacityReservationId": ("Conditional", True),
    "CapacityReservationStatus": ("Conditional", True), "ChargeCategory": ("Mandatory", False),
    "ChargeClass": ("Mandatory", True), "ChargeDescription": ("Mandatory", True),
    "ChargeFrequency": ("Recommended", False), "ChargePeriodEnd": ("Mandatory", False),
    "ChargePeriodStart": ("Mandatory", False), "CommitmentDiscountCategory": ("Conditional", True),
    "CommitmentDiscountId": ("Conditional", True), "CommitmentDiscountName": ("Conditional", True),
    "CommitmentDiscountQuantity": ("Conditional", True), "CommitmentDiscountStatus": ("Conditional", True),
    "CommitmentDiscountType": ("Conditional", True), "CommitmentDiscountUnit": ("Conditional", True),
    "ConsumedQuantity": ("Conditional", True), "ConsumedUnit": ("Conditional", True),
    "ContractApplied": ("Conditional", True), "ContractedCost": ("Mandatory", False),
    "ContractedUnitPrice": ("Conditional", True), "EffectiveCost": ("Mandatory", False),
    "HostProviderName": ("Mandatory", True), "InvoiceId": ("Recommended", True),
    "InvoiceIssuerName": ("Mandatory", False), "ListCost": ("Mandatory", False),
    "ListUnitPrice": ("Conditional", True), "PricingCategory": ("Conditional", True),
    "PricingCurrency": ("Conditional", True), "PricingCurrencyContractedUnitPrice": ("Conditional", True),
    "PricingCurrencyEffectiveCost": ("Conditional", True), "PricingCurrencyListUnitPrice": ("Conditional", True),
    "PricingQuantity": ("Mandatory", True), "PricingUnit": ("Mandatory", True),
    "ProviderName": ("Mandatory", False), "PublisherName": ("Mandatory", False),  # deprecated, still mandatory
    "RegionId": ("Conditional", True), "RegionName": ("Conditional", True), "ResourceId": ("Conditional", True),
    "ResourceName": ("Conditional", True), "ResourceType": ("Conditional", True),
    "ServiceCategory": ("Mandatory", False), "ServiceName": ("Mandatory", False),
    "ServiceProviderName": ("Mandatory", False), "ServiceSubcategory": ("Recommended", False),
    "SkuId": ("Conditional", True), "SkuMeter": ("Conditional", True), "SkuPriceDetails": ("Conditional", True),
    "SkuPriceId": ("Conditional", True), "SubAccountId": ("Conditional", True),
    "SubAccountName": ("Conditional", True), "SubAccountType": ("Conditional", True), "Tags": ("Conditional", True),
}
# the conditional ones whose condition holds for billing: it bills provisioned resources (namespaces, workloads,
# pools) of a type, measures usage, prices SKUs from a price list at list prices, has tags, and splits shared costs;
# PricingCategory besides (allowed where a provider has one pricing category), and the recommended ones
EXPECTED_CONDITIONAL = {
    "AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
    "ConsumedQuantity", "ConsumedUnit", "ListUnitPrice", "ResourceId", "ResourceName", "ResourceType", "SkuId",
    "SkuMeter", "SkuPriceId", "Tags", "PricingCategory", "ChargeFrequency", "ServiceSubcategory", "InvoiceId",
}
# the Data type of each column the export may hold that is no String (nor JSON text: Tags, AllocatedMethodDetails)
DECIMAL = {"BilledCost", "ConsumedQuantity", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost",
           "ListUnitPrice", "PricingQuantity"}
DATE_TIME = {"BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart"}
# Numeric Format (1.3): an integer, a decimal, or E notation "mEn" whose exponent has a sign only when negative;
# no positive sign, no thousands separators (1.2 allowed no exponent at all: billing writes plain decimals)
NUMERIC = re.compile(r"-?\d+(\.\d+)?(E-?\d+)?")
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # Date/Time Format: ISO 8601, UTC, "Z"
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
CHARGE_FREQUENCIES = {"One-Time", "Recurring", "Usage-Based"}
PRICING_CATEGORIES = {"Standard", "Dynamic", "Committed", "Other"}
COMPUTE_SUBCATEGORIES = {"Containers", "End User Computing", "Quantum Compute", "Serverless Compute",
                         "Virtual Machines", "Other (Compute)"}
SPLIT_METHOD_KEYS = {"AllocatedRatio", "UsageUnit", "UsageQuantity"}  # FOCUS-defined; others start with x_


def null(focus: pd.DataFrame, column: str) -> pd.Series:
    return focus[column].isna()


def json_object(text) -> dict:
    value = json.loads(text)
    assert isinstance(value, dict), text  # JSON Object Format / Key-Value Format: an object
    return value


def check_focus_13(focus: pd.DataFrame) -> None:
    """Every requirement of the FOCUS 1.3 Cost and Usage columns an export of billing can be checked against."""
    # presence: every mandatory column, the conditional ones billing's conditions call for, nothing else
    mandatory = {column for column, (level, _) in COLUMNS.items() if level == "Mandatory"}
    assert len(mandatory) == 23 and mandatory <= set(focus.columns)
    assert set(focus.columns) - mandatory == EXPECTED_CONDITIONAL
    assert "ContractApplied" not in focus.columns  # billing has no contract commitments
    # nullability of the columns that allow none
    for column, (_, allows_nulls) in COLUMNS.items():
        if column in focus.columns and not allows_nulls:
            assert not null(focus, column).any(), column
    # allowed values
    assert set(focus["ChargeCategory"]) <= CHARGE_CATEGORIES
    assert set(focus["ChargeClass"].dropna()) <= {"Correction"}
    assert set(focus["ChargeFrequency"]) <= CHARGE_FREQUENCIES
    assert not ((focus["ChargeCategory"] == "Purchase") & (focus["ChargeFrequency"] == "Usage-Based")).any()
    assert set(focus["PricingCategory"].dropna()) <= PRICING_CATEGORIES
    assert set(focus["ServiceCategory"]) == {"Compute"} and set(focus["ServiceSubcategory"]) <= COMPUTE_SUBCATEGORIES
    # formats: date/times, currency, decimals
    for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
        assert focus[column].map(lambda text: bool(DATETIME.fullmatch(text))).all(), column
    assert (focus["BillingPeriodStart"] < focus["BillingPeriodEnd"]).all()
    assert (focus["ChargePeriodStart"] < focus["ChargePeriodEnd"]).all()
    assert focus["BillingCurrency"].map(lambda text: bool(re.fullmatch(r"[A-Z]{3}", text))).all()
    for column in DECIMAL & set(focus.columns):  # read back as numbers (an integer is a decimal too)
        assert pd.api.types.is_numeric_dtype(focus[column]) or focus[column].isna().all(), column

    check_corrections(focus)
    usage = focus["ChargeCategory"].isin(["Usage", "Purchase"]) & null(focus, "ChargeClass")
    # SKU and price: SkuPriceId of every usage row, with one parent SkuId; ListUnitPrice, PricingQuantity,
    # PricingCategory and ConsumedQuantity null without a SkuPriceId (1.3), set on usage rows
    assert not null(focus, "SkuId")[usage].any() and not null(focus, "SkuPriceId")[usage].any()
    assert (focus.dropna(subset=["SkuPriceId"]).groupby("SkuPriceId")["SkuId"].nunique() == 1).all()
    assert (null(focus, "SkuMeter") <= null(focus, "SkuId")).all() and (null(focus, "SkuId") <= null(focus, "SkuMeter")).all()
    for column in ("ListUnitPrice", "PricingQuantity", "PricingCategory", "ConsumedQuantity"):
        assert null(focus, column)[null(focus, "SkuPriceId")].all(), column
    assert not null(focus, "ListUnitPrice")[~null(focus, "SkuPriceId")].any()
    assert (focus["ListUnitPrice"].dropna() >= 0).all()
    assert not focus.loc[usage, ["PricingQuantity", "PricingCategory", "ConsumedQuantity"]].isna().any().any()
    assert null(focus, "ConsumedQuantity")[focus["ChargeCategory"] != "Usage"].all()
    assert (null(focus, "ConsumedUnit") == null(focus, "ConsumedQuantity")).all()
    assert (null(focus, "PricingUnit") == null(focus, "PricingQuantity")).all()
    # costs: ListCost = ListUnitPrice x PricingQuantity; without unit prices a charge unrelated to others is billed
    priced = focus.dropna(subset=["ListUnitPrice", "PricingQuantity"])
    assert priced["ListCost"].to_numpy() == pytest.approx((priced["ListUnitPrice"] * priced["PricingQuantity"]).to_numpy())
    unpriced = focus[null(focus, "ListUnitPrice") & ~focus["ChargeCategory"].isin(["Usage", "Purchase"])]
    assert (unpriced["ListCost"] == unpriced["BilledCost"]).all()
    assert (unpriced["ContractedCost"] == unpriced["BilledCost"]).all()
    assert (unpriced["EffectiveCost"] == unpriced["BilledCost"]).all()
    # resources
    assert (null(focus, "ResourceName") >= null(focus, "ResourceId")).all()
    assert (null(focus, "ResourceType") == null(focus, "ResourceId")).all()
    # providers: the deprecated ProviderName is the ServiceProviderName it was replaced by; HostProviderName may be
    # null only for Tax and Adjustment, else it is the host provider, which is the service provider where no
    # separate host is exposed (billing exposes none)
    assert (focus["ProviderName"] == focus["ServiceProviderName"]).all()
    host_null_allowed = focus["ChargeCategory"].isin(["Tax", "Adjustment"])
    assert not null(focus, "HostProviderName")[~host_null_allowed].any()
    hosted = focus.dropna(subset=["HostProviderName"])
    assert (hosted["HostProviderName"] == hosted["ServiceProviderName"]).all()
    # tags: Key-Value Format
    tags = focus["Tags"].dropna().map(json_object)
    assert tags.map(lambda pairs: all(isinstance(value, (str, int, float, bool)) for value in pairs.values())).all()
    check_allocations(focus)


def check_corrections(focus: pd.DataFrame) -> None:
    """ChargeClass and the Correction Handling attribute (1.3): a row of ChargeClass "Correction" corrects a
    previously invoiced billing period, so it is in a later billing period than the charge period "in which the cost
    was originally incurred", on another invoice than that period's rows; every other row's charge period lies
    within its billing period (billing has no charge spanning months)."""
    correction = focus["ChargeClass"] == "Correction"
    corrections, others = focus[correction], focus[~correction]
    assert (corrections["ChargePeriodStart"] < corrections["BillingPeriodStart"]).all()
    assert (corrections["ChargePeriodEnd"] <= corrections["BillingPeriodStart"]).all()
    assert ((others["BillingPeriodStart"] <= others["ChargePeriodStart"])
            & (others["ChargePeriodEnd"] <= others["BillingPeriodEnd"])).all()
    for invoice, charged in zip(corrections["InvoiceId"], corrections["ChargePeriodStart"]):
        original = others[(others["BillingPeriodStart"] <= charged) & (charged < others["BillingPeriodEnd"])]
        assert invoice not in set(original["InvoiceId"]), invoice


# Cost and Usage metrics (Column type Metric) that add up over an origin's allocated charges; the others (unit
# prices) and every dimension are the origin's on each of them
SUMMABLE = ["BilledCost", "ContractedCost", "EffectiveCost", "ListCost", "PricingQuantity", "ConsumedQuantity"]


def check_allocations(focus: pd.DataFrame) -> None:
    """The split cost allocation columns (AllocatedMethodId, AllocatedResourceId, AllocatedResourceName,
    AllocatedMethodDetails, AllocatedTags) and Data Generator-Calculated Split Cost Allocation Handling.

    Off a split all are null. On an allocated charge the method and AllocatedMethodDetails are set; the
    AllocatedResourceId is null exactly on the unallocated portion, and locally unique within a ResourceId and
    ChargePeriod. The allocated charges of one origin charge match it in every dimension and unit price (so an
    origin is a group of allocated rows equal in all of them), and add up to it in every summable metric: the
    ratios add up to 1 and each row's metrics are the origin's at its ratio."""
    split = ~null(focus, "AllocatedMethodId")
    for column in ("AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"):
        assert null(focus, column)[~split].all(), column
    allocated = focus[split]
    assert not null(allocated, "AllocatedMethodDetails").any()
    assert (null(allocated, "AllocatedResourceId") == null(allocated, "AllocatedResourceName")).all()
    assert null(allocated, "AllocatedTags")[null(allocated, "AllocatedResourceId")].all()
    for details in allocated["AllocatedMethodDetails"].map(json_object):
        assert isinstance(details["Elements"], list) and details["Elements"]
        for element in details["Elements"]:
            assert isinstance(element, dict) and isinstance(element["AllocatedRatio"], (int, float))
            assert "UsageUnit" in element or "UsageQuantity" not in element
            assert all(key in SPLIT_METHOD_KEYS or key.startswith("x_") for key in element)
    for tags, allocated_tags in zip(allocated["Tags"], allocated["AllocatedTags"]):
        if isinstance(allocated_tags, str):
            assert not set(json_object(allocated_tags)) & set(json_object(tags))
    named = allocated.dropna(subset=["AllocatedResourceId"])
    assert not named.duplicated(["ResourceId", "ChargePeriodStart", "ChargePeriodEnd", "AllocatedResourceId"]).any()
    for rows in origins(allocated):
        parts = rows["AllocatedMethodDetails"].map(ratio)
        assert parts.sum() == pytest.approx(1.0), rows
        for column in SUMMABLE:
            if column in rows and not rows[column].isna().all():
                assert rows[column].to_numpy() == pytest.approx((rows[column].sum() * parts).to_numpy()), column


def origins(allocated: pd.DataFrame) -> list[pd.DataFrame]:
    """Allocated charges grouped by their origin charge: the rows equal in every dimension and unit price."""
    origin = [column for column in allocated.columns
              if column not in SUMMABLE and not column.startswith("Allocated")]
    return [rows for _, rows in allocated.groupby(origin, dropna=False, sort=False)]


def check_numeric_text(focus: pd.DataFrame) -> None:
    """The export's numbers as written (a CSV read as text) follow the Numeric Format."""
    for column in DECIMAL & set(focus.columns):
        bad = focus[column].dropna().map(lambda text: not NUMERIC.fullmatch(text))
        assert not bad.any(), (column, focus.loc[bad[bad].index, column].tolist())


def check_parquet_types(schema: pa.Schema) -> None:
    """A Parquet export's column types are their FOCUS data types: Decimal a floating point or decimal number,
    Date/Time a UTC timestamp, String and JSON text; a column null on every row too."""
    for field in schema:
        if field.name in DECIMAL:
            assert pa.types.is_floating(field.type) or pa.types.is_decimal(field.type), field
        elif field.name in DATE_TIME:
            assert pa.types.is_timestamp(field.type) and field.type.tz in ("UTC", "+00:00"), field
        else:
            assert pa.types.is_string(field.type) or pa.types.is_large_string(field.type), field


def ratio(details: str) -> float:
    return sum(element["AllocatedRatio"] for element in json.loads(details)["Elements"])
