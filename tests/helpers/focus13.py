"""The FOCUS 1.3 Cost and Usage rules, as one table written from the specification's column files (each column's
feature level, allows nulls, data type, value format, allowed values and conditional requirements), one row per
column billing writes, and one checker that reads the table and checks every row of an export against it; typed
from the specification's text, not from billing's export.

A conditional requirement is a small named predicate: given the export and the column, it is True on each row that
meets the requirement; its docstring is the specification's sentence. The checker names the column and the
predicate of every requirement a row breaks. The split cost allocation rules come from the attribute "Data
Generator-Calculated Split Cost Allocation Handling" as well as the Allocated* columns, the correction rules from
ChargeClass and the attribute "Correction Handling".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

Predicate = Callable[[pd.DataFrame, str], pd.Series]

# Value formats (the specification's attributes)
NUMERIC = re.compile(r"-?\d+(\.\d+)?(E-?\d+)?")  # Numeric Format: no "+", no separators, E notation's sign if negative
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # Date/Time Format: ISO 8601 in UTC, with "Z"
CURRENCY = re.compile(r"[A-Z]{3}")  # Currency Format: an ISO 4217 code
FOCUS_RATIO_KEYS = {"AllocatedRatio", "UsageUnit", "UsageQuantity"}  # AllocatedMethodDetails' FOCUS-defined keys


def null(focus: pd.DataFrame, column: str) -> pd.Series:
    return focus[column].isna()


def usage_or_purchase_not_correction(focus: pd.DataFrame) -> pd.Series:
    return focus["ChargeCategory"].isin(["Usage", "Purchase"]) & (focus["ChargeClass"] != "Correction")


def correction(focus: pd.DataFrame) -> pd.Series:
    return focus["ChargeClass"] == "Correction"


def json_value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def key_value_object(text: object) -> bool:
    """Key-Value Format: a JSON object whose values are primitives (a string, number, boolean or null)."""
    value = json_value(text) if isinstance(text, str) else None
    return isinstance(value, dict) and all(isinstance(item, (str, int, float, bool, type(None)))
                                           for item in value.values())


# Conditional requirements. Each is True on the rows that meet it.

def not_null_when_sku_price_id_not_null(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST NOT be null when SkuPriceId is not null."""
    return null(focus, "SkuPriceId") | ~null(focus, column)


def null_for_tax(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST be null when ChargeCategory is "Tax"."""
    return (focus["ChargeCategory"] != "Tax") | null(focus, column)


def set_on_usage_and_purchase(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST NOT be null when ChargeCategory is "Usage" or "Purchase" and ChargeClass is not "Correction"."""
    return ~usage_or_purchase_not_correction(focus) | ~null(focus, column)


def null_unless_usage(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST be null when ChargeCategory is not "Usage" (billing has no CommitmentDiscountStatus)."""
    return (focus["ChargeCategory"] == "Usage") | null(focus, column)


def set_on_usage(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST NOT be null when ChargeCategory is "Usage" and ChargeClass is not "Correction"."""
    return (focus["ChargeCategory"] != "Usage") | correction(focus) | ~null(focus, column)


def null_exactly_with(other: str) -> Predicate:
    """The requirement that a column be null exactly where another is (its unit, name or type)."""
    def predicate(focus: pd.DataFrame, column: str) -> pd.Series:
        return null(focus, column) == null(focus, other)
    predicate.__name__ = f"null_exactly_with_{other}"
    predicate.__doc__ = f"<column> MUST be null when {other} is null, and MUST NOT be null when {other} is not null."
    return predicate


def null_when(other: str) -> Predicate:
    """The requirement that a column be null where another is."""
    def predicate(focus: pd.DataFrame, column: str) -> pd.Series:
        return ~null(focus, other) | null(focus, column)
    predicate.__name__ = f"null_when_{other}_null"
    predicate.__doc__ = f"<column> MUST be null when {other} is null."
    return predicate


def non_negative(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST be a non-negative decimal value (when not null)."""
    return null(focus, column) | (focus[column] >= 0)


def not_usage_based_purchase(focus: pd.DataFrame, column: str) -> pd.Series:
    """ChargeFrequency MUST NOT be "Usage-Based" when ChargeCategory is "Purchase"."""
    return ~((focus["ChargeCategory"] == "Purchase") & (focus[column] == "Usage-Based"))


def starts_before_its_end(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> (a start, inclusive) is before the matching end (exclusive): the period holds time. Reading taken:
    the specification says so only by its examples of the bounds."""
    return focus[column] < focus[column.replace("Start", "End")]


def list_cost_is_price_times_quantity(focus: pd.DataFrame, column: str) -> pd.Series:
    """ListCost MUST equal the product of ListUnitPrice and PricingQuantity when ListUnitPrice is not null and
    PricingQuantity is not null. Reading taken: equal as the amounts are written, to the billionth, where a split's
    parts each rounded to it (and its largest part carrying what rounding left, to add up to the origin) stay a few
    billionths off the product: equal within a hundred-millionth of the currency unit."""
    priced = ~null(focus, "ListUnitPrice") & ~null(focus, "PricingQuantity")
    gap = (focus[column] - focus["ListUnitPrice"] * focus["PricingQuantity"]).abs()
    return ~priced | (gap < 1e-8)


def billed_cost_unless_priced(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> of a charge unrelated to other charges (e.g. a Credit) MUST match the BilledCost, when ListUnitPrice
    (ContractedUnitPrice, which billing does not write) is null. Reading taken: every charge without a unit price
    that is no Usage or Purchase is unrelated to others (billing writes no Tax)."""
    unpriced = null(focus, "ListUnitPrice") & ~focus["ChargeCategory"].isin(["Usage", "Purchase"])
    return ~unpriced | np.isclose(focus[column], focus["BilledCost"], rtol=1e-9, atol=1e-9)


def billed_cost_unless_usage_or_purchase(focus: pd.DataFrame, column: str) -> pd.Series:
    """When ChargeCategory is not "Usage" or "Purchase", EffectiveCost of a charge unrelated to other charges (e.g. a
    Credit) MUST match the BilledCost. Reading taken: billing's Credits and Adjustments are unrelated to others."""
    unrelated = ~focus["ChargeCategory"].isin(["Usage", "Purchase", "Tax"])
    return ~unrelated | np.isclose(focus[column], focus["BilledCost"], rtol=1e-9, atol=1e-9)


def host_provider_set_unless_tax_or_adjustment(focus: pd.DataFrame, column: str) -> pd.Series:
    """HostProviderName MAY be null when the host cannot be uniquely determined (e.g. ChargeCategory "Tax" or
    "Adjustment"), MUST NOT be null in all other cases (billing's services all run on the cluster's nodes)."""
    return focus["ChargeCategory"].isin(["Tax", "Adjustment"]) | ~null(focus, column)


def equals_service_provider(focus: pd.DataFrame, column: str) -> pd.Series:
    """HostProviderName MUST equal ServiceProviderName unless the customer selects the host or the service provider
    exposes it (billing exposes none); ProviderName, deprecated, is "Replaced by ServiceProviderName": reading taken,
    the same value."""
    return null(focus, column) | (focus[column] == focus["ServiceProviderName"])


def one_service_category_per_service(focus: pd.DataFrame, column: str) -> pd.Series:
    """ServiceName MUST have one and only one ServiceCategory."""
    return focus.groupby(column)["ServiceCategory"].transform("nunique") == 1


def subcategory_of_its_category(focus: pd.DataFrame, column: str) -> pd.Series:
    """ServiceSubcategory MUST have one and only one parent ServiceCategory as specified in the allowed values."""
    return pd.Series([category in SUBCATEGORIES and subcategory in SUBCATEGORIES[category]
                      for category, subcategory in zip(focus["ServiceCategory"], focus[column])], index=focus.index)


def one_sku_per_sku_price(focus: pd.DataFrame, column: str) -> pd.Series:
    """SkuPriceId MUST have one and only one parent SkuId (when not null)."""
    parents = focus.groupby(column)["SkuId"].transform("nunique")
    return null(focus, column) | (parents == 1)


def skumeter_set_with_sku(focus: pd.DataFrame, column: str) -> pd.Series:
    """SkuMeter SHOULD NOT be null when SkuId is not null (a SHOULD billing follows)."""
    return null(focus, "SkuId") | ~null(focus, column)


def charge_class_for_a_previous_billing_period(focus: pd.DataFrame, column: str) -> pd.Series:
    """ChargeClass MUST NOT be null when the row represents a correction to a previously invoiced billing period,
    and MUST be null otherwise. Reading taken: billing has no charge spanning months, so a row's charge period lies
    within its billing period unless it corrects one "in which the cost was originally incurred" (Correction
    Handling), which is then wholly before its billing period."""
    within = (focus["BillingPeriodStart"] <= focus["ChargePeriodStart"]) & (
        focus["ChargePeriodEnd"] <= focus["BillingPeriodEnd"])
    before = focus["ChargePeriodEnd"] <= focus["BillingPeriodStart"]
    return (correction(focus) & before) | (~correction(focus) & within)


def on_an_invoice(focus: pd.DataFrame, column: str) -> pd.Series:
    """InvoiceId MUST NOT be null when the charge is associated with either an issued invoice or a pre-generated
    provisional invoice. Reading taken: every charge billing exports is on a statement, a closed month's or the one
    closing its month will issue (a provisional invoice), so no row has a null InvoiceId."""
    return ~null(focus, column)


def correction_on_another_invoice(focus: pd.DataFrame, column: str) -> pd.Series:
    """A correction of a previously invoiced billing period is not on that period's invoice (Correction Handling)."""
    original = focus[~correction(focus)]
    return pd.Series([
        not corrects or invoice not in set(original.loc[(original["BillingPeriodStart"] <= charged)
                                                        & (charged < original["BillingPeriodEnd"]), "InvoiceId"])
        for corrects, invoice, charged in zip(correction(focus), focus[column], focus["ChargePeriodStart"])],
        index=focus.index, dtype=bool)


def null_off_a_split(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> MUST be null when a charge is not related to a data generator-calculated split cost allocation."""
    return ~null(focus, "AllocatedMethodId") | null(focus, column)


def set_on_a_split(focus: pd.DataFrame, column: str) -> pd.Series:
    """AllocatedMethodDetails SHOULD NOT be null when a charge is related to a split cost allocation (a SHOULD
    billing follows)."""
    return null(focus, "AllocatedMethodId") | ~null(focus, column)


def unique_within_resource_and_charge_period(focus: pd.DataFrame, column: str) -> pd.Series:
    """AllocatedResourceId SHOULD be a locally unique identifier within the associated ResourceId and ChargePeriod
    (a SHOULD billing follows)."""
    return null(focus, column) | ~focus.duplicated(
        ["ResourceId", "ChargePeriodStart", "ChargePeriodEnd", column], keep=False)


def elements_of_ratios(focus: pd.DataFrame, column: str) -> pd.Series:
    """AllocatedMethodDetails MUST have a top-level key "Elements" holding an array of objects, each with a numeric
    "AllocatedRatio", a "UsageUnit" where it has a "UsageQuantity", and no key but FOCUS's that does not begin
    with "x_"."""
    def valid(text: object) -> bool:
        details = json_value(text) if isinstance(text, str) else None
        elements = details.get("Elements") if isinstance(details, dict) else None
        return isinstance(elements, list) and bool(elements) and all(
            isinstance(element, dict) and isinstance(element.get("AllocatedRatio"), (int, float))
            and ("UsageUnit" in element or "UsageQuantity" not in element)
            and all(key in FOCUS_RATIO_KEYS or key.startswith("x_") for key in element)
            for element in elements)
    return null(focus, column) | focus[column].map(valid).astype(bool)


def not_in_tags(focus: pd.DataFrame, column: str) -> pd.Series:
    """AllocatedTags MUST NOT include resource tags already present in Tags."""
    def apart(tags: object, allocated: object) -> bool:
        if not isinstance(allocated, str) or not isinstance(tags, str):
            return True
        return not set(json_value(allocated) or {}) & set(json_value(tags) or {})
    return pd.Series([apart(tags, allocated) for tags, allocated in zip(focus["Tags"], focus[column])],
                     index=focus.index, dtype=bool)


# Cost and Usage metrics (Column type Metric) that add up over an origin's allocated charges; the unit prices and
# every dimension are the origin's on each of them
SUMMABLE = ["BilledCost", "ContractedCost", "EffectiveCost", "ListCost", "PricingQuantity", "ConsumedQuantity"]


def ratio(details: object) -> float:
    """An allocated charge's AllocatedRatios summed; NaN where its AllocatedMethodDetails hold none."""
    value = json_value(details) if isinstance(details, str) else None
    elements = value.get("Elements") if isinstance(value, dict) else None
    parts = [element.get("AllocatedRatio") if isinstance(element, dict) else None
             for element in (elements if isinstance(elements, list) else [None])]
    numbers = all(isinstance(part, (int, float)) and not isinstance(part, bool) for part in parts)
    return float(sum(parts)) if numbers else float("nan")  # type: ignore[arg-type]


def add_up_to_their_origin(focus: pd.DataFrame, column: str) -> pd.Series:
    """Split Cost Allocation Handling: the allocated charges of one origin charge match it in every dimension (so an
    origin is a group of allocated rows equal in all dimensions and unit prices), their "AllocatedRatio"s sum up to
    1, and they sum up to it in every aggregatable metric: each is the origin's at its ratio."""
    meets = pd.Series(True, index=focus.index)
    allocated = focus[~null(focus, column)]
    origin = [name for name in allocated.columns if name not in SUMMABLE and not name.startswith("Allocated")]
    for _, rows in allocated.groupby(origin, dropna=False, sort=False):
        parts = rows["AllocatedMethodDetails"].map(ratio)
        fits = pd.Series(bool(np.isclose(parts.sum(), 1.0)), index=rows.index)
        for metric in (name for name in SUMMABLE if name in rows and not rows[name].isna().all()):
            fits &= np.isclose(rows[metric], rows[metric].sum() * parts, rtol=1e-6, atol=1e-9)
        meets[rows.index] = fits
    return meets


@dataclass(frozen=True)
class Column:
    """One column's row of the table: its content constraints and its conditional requirements."""
    level: str  # Feature level: Mandatory, Conditional or Recommended
    nulls: bool  # Allows nulls
    type: str  # Data type: String, Decimal, Date/Time or JSON
    format: str | None = None  # Value format, where one is specified
    allowed: frozenset[str] | None = None  # Allowed values
    rules: tuple[Predicate, ...] = ()


# ServiceSubcategory's allowed values by their parent ServiceCategory; each category's "Other (<category>)" besides
SUBCATEGORIES = {category: {f"Other ({category})", *named} for category, named in {
    "AI and Machine Learning": {"AI Platforms", "Bots", "Generative AI", "Machine Learning",
                                "Natural Language Processing"},
    "Analytics": {"Analytics Platforms", "Business Intelligence", "Data Processing", "Search", "Streaming Analytics"},
    "Business Applications": {"Productivity and Collaboration"},
    "Compute": {"Containers", "End User Computing", "Quantum Compute", "Serverless Compute", "Virtual Machines"},
    "Databases": {"Caching", "Data Warehouses", "Ledger Databases", "NoSQL Databases", "Relational Databases",
                  "Time Series Databases"},
    "Developer Tools": {"Developer Platforms", "Continuous Integration and Deployment", "Development Environments",
                        "Source Code Management", "Quality Assurance"},
    "Identity": {"Identity and Access Management"},
    "Integration": {"API Management", "Messaging", "Workflow Orchestration"},
    "Internet of Things": {"IoT Analytics", "IoT Platforms"},
    "Management and Governance": {"Architecture", "Compliance", "Cost Management", "Data Governance",
                                  "Disaster Recovery", "Endpoint Management", "Observability", "Support"},
    "Media": {"Content Creation", "Gaming", "Media Streaming", "Mixed Reality"},
    "Migration": {"Data Migration", "Resource Migration"},
    "Mobile": set(),
    "Multicloud": {"Multicloud Integration"},
    "Networking": {"Application Networking", "Content Delivery", "Network Connectivity", "Network Infrastructure",
                   "Network Routing", "Network Security"},
    "Security": {"Secret Management", "Security Posture Management", "Threat Detection and Response"},
    "Storage": {"Backup Storage", "Block Storage", "File Storage", "Object Storage", "Storage Platforms"},
    "Web": {"Application Platforms"},
    "Other": set(),
}.items()}
SERVICE_CATEGORIES = frozenset(SUBCATEGORIES)  # ServiceCategory's allowed values

MANDATORY, CONDITIONAL, RECOMMENDED = "Mandatory", "Conditional", "Recommended"
STRING, DECIMAL, DATE_TIME, JSON = "String", "Decimal", "Date/Time", "JSON"
NUMERIC_FORMAT, DATE_TIME_FORMAT, CURRENCY_FORMAT = "Numeric Format", "Date/Time Format", "Currency Format"
KEY_VALUE_FORMAT, JSON_OBJECT_FORMAT = "Key-Value Format", "JSON Object Format"
PRICED = (null_when("SkuPriceId"), null_for_tax, set_on_usage_and_purchase)
ALLOCATED = (null_off_a_split,)

# The FOCUS 1.3 Cost and Usage columns billing writes: the 23 mandatory ones, the conditional ones whose condition
# holds for billing (it bills provisioned resources of a type, measures usage, prices SKUs from a price list at list
# prices, has tags and splits shared costs; PricingCategory is allowed besides) and the recommended ones
COLUMNS: dict[str, Column] = {
    # its requirements say "of type String", its content constraints "Data type JSON": reading taken, JSON text (a
    # string in a CSV and in Parquet, as Tags), in the JSON Object Format
    "AllocatedMethodDetails": Column(RECOMMENDED, True, JSON, JSON_OBJECT_FORMAT,
                                     rules=(*ALLOCATED, set_on_a_split, elements_of_ratios)),
    "AllocatedMethodId": Column(CONDITIONAL, True, STRING, rules=(add_up_to_their_origin,)),
    "AllocatedResourceId": Column(CONDITIONAL, True, STRING,
                                  rules=(*ALLOCATED, unique_within_resource_and_charge_period)),
    "AllocatedResourceName": Column(CONDITIONAL, True, STRING, rules=(null_exactly_with("AllocatedResourceId"),)),
    "AllocatedTags": Column(CONDITIONAL, True, JSON, KEY_VALUE_FORMAT, rules=(*ALLOCATED, not_in_tags)),
    "BilledCost": Column(MANDATORY, False, DECIMAL, NUMERIC_FORMAT),
    "BillingAccountId": Column(MANDATORY, False, STRING),
    "BillingAccountName": Column(MANDATORY, True, STRING),
    "BillingCurrency": Column(MANDATORY, False, STRING, CURRENCY_FORMAT),
    "BillingPeriodEnd": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "BillingPeriodStart": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT, rules=(starts_before_its_end,)),
    "ChargeCategory": Column(MANDATORY, False, STRING,
                             allowed=frozenset({"Usage", "Purchase", "Tax", "Credit", "Adjustment"})),
    "ChargeClass": Column(MANDATORY, True, STRING, allowed=frozenset({"Correction"}),
                          rules=(charge_class_for_a_previous_billing_period,)),
    "ChargeDescription": Column(MANDATORY, True, STRING),
    "ChargeFrequency": Column(RECOMMENDED, False, STRING, allowed=frozenset({"One-Time", "Recurring", "Usage-Based"}),
                              rules=(not_usage_based_purchase,)),
    "ChargePeriodEnd": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "ChargePeriodStart": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT, rules=(starts_before_its_end,)),
    "ConsumedQuantity": Column(CONDITIONAL, True, DECIMAL, NUMERIC_FORMAT,
                               rules=(null_when("SkuPriceId"), null_unless_usage, set_on_usage)),
    # Unit Format is a SHOULD for the units: not checked
    "ConsumedUnit": Column(CONDITIONAL, True, STRING, rules=(null_exactly_with("ConsumedQuantity"),)),
    "ContractedCost": Column(MANDATORY, False, DECIMAL, NUMERIC_FORMAT, rules=(billed_cost_unless_priced,)),
    "EffectiveCost": Column(MANDATORY, False, DECIMAL, NUMERIC_FORMAT, rules=(billed_cost_unless_usage_or_purchase,)),
    "HostProviderName": Column(MANDATORY, True, STRING,
                               rules=(host_provider_set_unless_tax_or_adjustment, equals_service_provider)),
    "InvoiceId": Column(RECOMMENDED, True, STRING, rules=(on_an_invoice, correction_on_another_invoice)),
    "InvoiceIssuerName": Column(MANDATORY, False, STRING),
    "ListCost": Column(MANDATORY, False, DECIMAL, NUMERIC_FORMAT,
                       rules=(list_cost_is_price_times_quantity, billed_cost_unless_priced)),
    "ListUnitPrice": Column(CONDITIONAL, True, DECIMAL, NUMERIC_FORMAT,
                            rules=(*PRICED, not_null_when_sku_price_id_not_null, non_negative)),
    "PricingCategory": Column(CONDITIONAL, True, STRING,
                              allowed=frozenset({"Standard", "Dynamic", "Committed", "Other"}), rules=PRICED),
    "PricingQuantity": Column(MANDATORY, True, DECIMAL, NUMERIC_FORMAT, rules=PRICED),
    "PricingUnit": Column(MANDATORY, True, STRING, rules=(null_exactly_with("PricingQuantity"),)),
    "ProviderName": Column(MANDATORY, False, STRING, rules=(equals_service_provider,)),  # deprecated in 1.3
    "PublisherName": Column(MANDATORY, False, STRING),  # deprecated in 1.3, still mandatory
    "ResourceId": Column(CONDITIONAL, True, STRING),
    "ResourceName": Column(CONDITIONAL, True, STRING, rules=(null_when("ResourceId"),)),
    "ResourceType": Column(CONDITIONAL, True, STRING, rules=(null_exactly_with("ResourceId"),)),
    "ServiceCategory": Column(MANDATORY, False, STRING, allowed=SERVICE_CATEGORIES),
    "ServiceName": Column(MANDATORY, False, STRING, rules=(one_service_category_per_service,)),
    "ServiceProviderName": Column(MANDATORY, False, STRING),
    "ServiceSubcategory": Column(RECOMMENDED, False, STRING,
                                 allowed=frozenset().union(*SUBCATEGORIES.values()),
                                 rules=(subcategory_of_its_category,)),
    "SkuId": Column(CONDITIONAL, True, STRING, rules=(null_for_tax, set_on_usage_and_purchase)),
    "SkuMeter": Column(CONDITIONAL, True, STRING, rules=(null_when("SkuId"), skumeter_set_with_sku)),
    "SkuPriceId": Column(CONDITIONAL, True, STRING,
                         rules=(null_for_tax, set_on_usage_and_purchase, one_sku_per_sku_price)),
    "Tags": Column(CONDITIONAL, True, JSON, KEY_VALUE_FORMAT),
}
# The other 1.3 Cost and Usage columns, and why billing writes none (each condition of presence that does not hold)
NOT_WRITTEN = {
    **dict.fromkeys(["AvailabilityZone", "RegionId", "RegionName"], "the host provider has no zones or regions"),
    "BillingAccountType": "a team is the one type of billing account",
    **dict.fromkeys(["CapacityReservationId", "CapacityReservationStatus"], "no capacity reservations"),
    **dict.fromkeys(["CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName",
                     "CommitmentDiscountQuantity", "CommitmentDiscountStatus", "CommitmentDiscountType",
                     "CommitmentDiscountUnit"], "no commitment discounts"),
    "ContractApplied": "no contract commitments",
    "ContractedUnitPrice": "no negotiated pricing",
    **dict.fromkeys(["PricingCurrency", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
                     "PricingCurrencyListUnitPrice"], "priced and billed in one currency"),
    "SkuPriceDetails": "billing has no SKU price properties to write",
    **dict.fromkeys(["SubAccountId", "SubAccountName", "SubAccountType"], "no sub account construct"),
}


def conforms(column: Column, value: object) -> bool:
    """A value not null is of the column's data type and in its value format (as read back from a CSV: a Decimal a
    number, a Date/Time its text)."""
    if column.type == DECIMAL:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not isinstance(value, str):
        return False
    if column.format == DATE_TIME_FORMAT:
        return bool(DATETIME.fullmatch(value))
    if column.format == CURRENCY_FORMAT:
        return bool(CURRENCY.fullmatch(value))
    if column.format == KEY_VALUE_FORMAT:
        return key_value_object(value)
    if column.format == JSON_OBJECT_FORMAT:
        return isinstance(json_value(value), dict)
    return True


def violations(focus: pd.DataFrame, table: dict[str, Column] | None = None, not_written: dict[str, str] | None = None,
               release: str = "FOCUS 1.3") -> list[str]:
    """Every requirement of the table (by default the 1.3 Cost and Usage one) a row of the export breaks, as
    "<column>: <rule> ...": presence, data type and value format, nullability, allowed values and the conditional
    requirements."""
    columns = table or COLUMNS
    unwritten = NOT_WRITTEN if not_written is None else not_written
    found = [f"{name}: presence: missing ({column.level})" for name, column in columns.items()
             if name not in focus.columns]
    found += [f"{name}: presence: written though {unwritten.get(name, f'it is no {release} column')}"
              for name in focus.columns if name not in columns]
    if found:
        return found

    def rows(broken: pd.Series) -> str:
        return f"rows {focus.index[broken.to_numpy()].tolist()[:5]}"

    typed = focus.copy()  # the conditional requirements read the values of their data type, the others as null
    for name, column in columns.items():
        values = focus[name]
        unset = values.isna()
        mistyped = ~unset & ~values.map(lambda value, column=column: conforms(column, value)).astype(bool)
        if mistyped.any():
            found.append(f"{name}: data type {column.type} ({column.format or 'no format'}): {rows(mistyped)}")
            typed[name] = values.where(~mistyped)
            if column.type == DECIMAL:
                typed[name] = pd.to_numeric(typed[name])
        if not column.nulls and unset.any():
            found.append(f"{name}: allows nulls False: null on {rows(unset)}")
        if column.allowed is not None:
            outside = ~unset & ~values.isin(column.allowed)
            if outside.any():
                found.append(f"{name}: allowed values: {sorted(set(values[outside]))} on {rows(outside)}")
    for name, column in columns.items():
        for rule in column.rules:
            broken = ~rule(typed, name).astype(bool)
            if broken.any():
                text = " ".join((rule.__doc__ or "").replace("<column>", name).split()).split(" Reading taken")[0]
                found.append(f"{name}: {rule.__name__} ({text}): {rows(broken)}")
    return found


def check_focus_13(focus: pd.DataFrame) -> None:
    """Every row of a FOCUS 1.3 export (a CSV read back) meets every requirement of the table."""
    found = violations(focus)
    assert not found, "\n".join(found)


def check_numeric_text(focus: pd.DataFrame) -> None:
    """The export's numbers as written (a CSV read as text) follow the Numeric Format."""
    for name in (name for name, column in COLUMNS.items() if column.type == DECIMAL and name in focus):
        bad = focus[name].dropna().map(lambda text: not NUMERIC.fullmatch(text))
        assert not bad.any(), (name, focus.loc[bad[bad].index, name].tolist())


def check_parquet_types(schema: pa.Schema, table: dict[str, Column] | None = None) -> None:
    """A Parquet export's column types are their FOCUS data types (by the table, the 1.3 Cost and Usage one by
    default): Decimal a floating point or decimal number, Date/Time a UTC timestamp, String and JSON text; a column
    null on every row too."""
    for field in schema:
        kind = (table or COLUMNS)[field.name].type
        if kind == DECIMAL:
            assert pa.types.is_floating(field.type) or pa.types.is_decimal(field.type), field
        elif kind == DATE_TIME:
            assert pa.types.is_timestamp(field.type) and field.type.tz in ("UTC", "+00:00"), field
        else:
            assert pa.types.is_string(field.type) or pa.types.is_large_string(field.type), field
