"""The FOCUS 1.4 rules of the three datasets billing writes, as tables written from the 1.4 text (each column's
content constraints and requirements in its column file under specification/datasets/<dataset>/columns), read by
the 1.3 checker (tests/helpers/focus13.py `violations`), and the rules that tie the datasets together (the datasets'
Relationships sections and the InvoiceId and BilledCost requirements of Invoice Detail).

Where the 1.4 text says two things, the reading taken is in the predicate's docstring and in docs/reports.md
"FOCUS 1.4: invoices and billing periods".
"""

from __future__ import annotations

import pandas as pd

from tests.helpers.focus13 import (
    COLUMNS,
    CONDITIONAL,
    CURRENCY_FORMAT,
    DATE_TIME,
    DATE_TIME_FORMAT,
    DECIMAL,
    JSON,
    KEY_VALUE_FORMAT,
    MANDATORY,
    NOT_WRITTEN,
    NUMERIC_FORMAT,
    STRING,
    Column,
    json_value,
    null,
    on_an_invoice,
    starts_before_its_end,
    violations,
)

CHARGE_CATEGORIES = frozenset({"Usage", "Purchase", "Tax", "Credit", "Adjustment"})


def unique_within_invoice(focus: pd.DataFrame, column: str) -> pd.Series:
    """InvoiceDetailId MUST uniquely identify a specific record within a given InvoiceId."""
    return ~focus.duplicated(["InvoiceIssuerName", "InvoiceId", column], keep=False)


def not_before_created(created: str):
    """The requirement that a last-updated moment is not before the record's creation."""
    def predicate(focus: pd.DataFrame, column: str) -> pd.Series:
        return null(focus, column) | null(focus, created) | (focus[column] >= focus[created])
    predicate.__name__ = f"not_before_{created}"
    predicate.__doc__ = f"<column> MUST be greater than or equal to {created}."
    return predicate


def set_unless_open(focus: pd.DataFrame, column: str) -> pd.Series:
    """InvoiceIssueDate MAY be null; it MUST represent the official date of issuance. Reading taken: null exactly
    while the invoice is provisional ("Open"), set once "Issued"."""
    return null(focus, column) == (focus["InvoiceIssueStatus"] == "Open")


def described(focus: pd.DataFrame, column: str) -> pd.Series:
    """<column> SHOULD NOT be null (a SHOULD billing follows)."""
    return ~null(focus, column)


def focus_or_custom_keys(focus: pd.DataFrame, column: str) -> pd.Series:
    """InvoiceDetailGrain MUST NOT be null when one or more properties uniquely define the granularity (billing's
    lines always have some), and its property keys MUST begin with "x_" unless FOCUS-defined."""
    defined = {"ContractId", "RegionId", "ResourceId", "ResourceType", "ServiceName", "SkuId", "SkuMeter",
               "SkuPriceId", "SubAccountId"}

    def valid(text: object) -> bool:
        grain = json_value(text) if isinstance(text, str) else None
        return isinstance(grain, dict) and bool(grain) and all(key in defined or key.startswith("x_") for key in grain)
    return focus[column].map(valid).astype(bool)


def references_an_earlier_invoice(focus: pd.DataFrame, column: str) -> pd.Series:
    """ReferenceInvoiceId MUST be the InvoiceId of the original invoice the adjustment applies to, and MUST be null
    for charges that reference no previous invoice. Reading taken: its table's "Allows nulls False" yields to that
    sentence; a reference is another invoice of the same issuer, of a billing period before the record's (checked
    against the dataset's records where it holds the referenced invoice)."""
    starts = focus.drop_duplicates("InvoiceId").set_index("InvoiceId")["BillingPeriodStart"]
    referenced = focus[column].map(starts)
    earlier = referenced.isna() | (referenced < focus["BillingPeriodStart"])
    return null(focus, column) | ((focus[column] != focus["InvoiceId"]) & earlier)


def referenced_by_corrections(focus: pd.DataFrame, column: str) -> pd.Series:
    """ReferenceInvoiceId MUST NOT be null where a specific original invoice is identified: billing's corrections
    (InvoiceDetailGrain's x_Corrects, the day a re-run corrected) each identify the invoice of the day's month."""
    corrects = focus["InvoiceDetailGrain"].map(
        lambda text: isinstance(text, str) and "x_Corrects" in (json_value(text) or {})).astype(bool)
    return ~corrects | ~null(focus, column)


def one_record_per_period(focus: pd.DataFrame, column: str) -> pd.Series:
    """A Billing Period record is one invoice issuer's billing period (the dataset's Description: "an invoice
    issuer's billing cycles"): one record per InvoiceIssuerName and BillingPeriodStart."""
    return ~focus.duplicated(["InvoiceIssuerName", column], keep=False)


# FOCUS 1.4 Cost and Usage: 1.3's columns and InvoiceDetailId (Conditional: billing issues invoices of lines)
COST_AND_USAGE: dict[str, Column] = {
    **COLUMNS,
    "InvoiceDetailId": Column(CONDITIONAL, True, STRING, rules=(on_an_invoice,)),
}

INVOICE_DETAIL: dict[str, Column] = {
    "BilledCost": Column(MANDATORY, False, DECIMAL, NUMERIC_FORMAT),
    "BillingAccountId": Column(MANDATORY, False, STRING),
    "BillingCurrency": Column(MANDATORY, False, STRING, CURRENCY_FORMAT),
    "BillingPeriodEnd": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "BillingPeriodStart": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT, rules=(starts_before_its_end,)),
    "ChargeCategory": Column(MANDATORY, False, STRING, allowed=CHARGE_CATEGORIES),
    "InvoiceDetailCreated": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "InvoiceDetailDescription": Column(MANDATORY, True, STRING, rules=(described,)),
    "InvoiceDetailGrain": Column(MANDATORY, True, JSON, KEY_VALUE_FORMAT, rules=(focus_or_custom_keys,)),
    "InvoiceDetailId": Column(MANDATORY, False, STRING, rules=(unique_within_invoice,)),
    "InvoiceDetailLastUpdated": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT,
                                       rules=(not_before_created("InvoiceDetailCreated"),)),
    "InvoiceId": Column(MANDATORY, False, STRING),
    "InvoiceIssueDate": Column(MANDATORY, True, DATE_TIME, DATE_TIME_FORMAT, rules=(set_unless_open,)),
    "InvoiceIssueStatus": Column(MANDATORY, False, STRING, allowed=frozenset({"Open", "Issued", "Voided"})),
    "InvoiceIssuerName": Column(MANDATORY, False, STRING),
    "PaymentDueDate": Column(MANDATORY, True, DATE_TIME, DATE_TIME_FORMAT),
    "PaymentTerms": Column(MANDATORY, False, STRING),
    "ReferenceInvoiceId": Column(MANDATORY, True, STRING,
                                 rules=(references_an_earlier_invoice, referenced_by_corrections)),
}
INVOICE_DETAIL_NOT_WRITTEN = {
    **dict.fromkeys(["PaymentCurrency", "PaymentCurrencyBilledCost"], "billing and payment are in one currency"),
    "PaymentCurrencyInvoiceDetailId": "billing and payment currency are at one aggregation level",
    "PurchaseOrderNumber": "no customer input of purchase order numbers",
}

# Reading taken: InvoiceIssuerName, whose column file is among Billing Period's (Introduced 1.4) though the dataset's
# table lists five columns: a billing period is an issuer's, and billing's clusters each issue invoices
BILLING_PERIOD: dict[str, Column] = {
    "BillingPeriodCreated": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "BillingPeriodEnd": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT),
    "BillingPeriodLastUpdated": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT,
                                       rules=(not_before_created("BillingPeriodCreated"),)),
    "BillingPeriodStart": Column(MANDATORY, False, DATE_TIME, DATE_TIME_FORMAT,
                                 rules=(starts_before_its_end, one_record_per_period)),
    "BillingPeriodStatus": Column(MANDATORY, False, STRING, allowed=frozenset({"Open", "Closed"})),
    "InvoiceIssuerName": Column(MANDATORY, False, STRING),
}


def dataset_violations(cost_and_usage: pd.DataFrame, invoice_detail: pd.DataFrame,
                       billing_period: pd.DataFrame) -> list[str]:
    """Every rule of the three tables a record breaks, and every rule tying the datasets together that they break:
    each Cost and Usage InvoiceId and InvoiceDetailId has its Invoice Detail record (joined on InvoiceIssuerName
    and InvoiceId), adding up to it to the cent; each billing period of both has its Billing Period record (joined
    on BillingPeriodStart); an invoice's records are of one billing period, as its charges are."""
    found = [f"Cost and Usage {text}" for text in violations(cost_and_usage, COST_AND_USAGE, NOT_WRITTEN, "FOCUS 1.4")]
    found += [f"Invoice Detail {text}" for text in violations(invoice_detail, INVOICE_DETAIL,
                                                              INVOICE_DETAIL_NOT_WRITTEN, "FOCUS 1.4 Invoice Detail")]
    found += [f"Billing Period {text}" for text in violations(billing_period, BILLING_PERIOD, {},
                                                              "FOCUS 1.4 Billing Period")]
    if found:
        return found
    line = ["InvoiceIssuerName", "InvoiceId", "InvoiceDetailId"]
    charged = cost_and_usage.groupby(line)["BilledCost"].sum().round(2)
    invoiced = invoice_detail.groupby(line)["BilledCost"].sum().round(2)
    missing = sorted(set(charged.index) - set(invoiced.index))
    if missing:
        found.append(f"relationship: Cost and Usage lines without an Invoice Detail record: {missing[:5]}")
    apart = [key for key in charged.index if key in invoiced.index and charged[key] != invoiced[key]]
    if apart:
        found.append(f"relationship: lines whose Cost and Usage and Invoice Detail differ: {apart[:5]}")
    for name, dataset in (("Cost and Usage", cost_and_usage), ("Invoice Detail", invoice_detail)):
        unknown = set(dataset["BillingPeriodStart"]) - set(billing_period["BillingPeriodStart"])
        if unknown:
            found.append(f"relationship: {name} billing periods without a Billing Period record: {sorted(unknown)}")
        periods = dataset.groupby("InvoiceId")["BillingPeriodStart"].nunique()
        if (periods > 1).any():
            found.append(f"relationship: {name} invoices over several billing periods: {list(periods[periods > 1].index)}")
    return found


def check_focus_14(cost_and_usage: pd.DataFrame, invoice_detail: pd.DataFrame, billing_period: pd.DataFrame) -> None:
    """The three datasets of a FOCUS 1.4 export (CSVs read back) meet every rule of the tables and tie together."""
    found = dataset_violations(cost_and_usage, invoice_detail, billing_period)
    assert not found, "\n".join(found)
