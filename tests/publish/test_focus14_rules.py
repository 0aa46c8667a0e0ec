"""The FOCUS 1.4 tables of rules (tests/helpers/focus14.py) check what they say: hand-made datasets that meet every
requirement pass, and a record that breaks one requirement, or datasets that do not tie together, fail with a
message naming the dataset, the column and the rule, for every rule of the tables."""

import json

import pandas as pd
import pytest

from tests.helpers.focus14 import BILLING_PERIOD, COST_AND_USAGE, INVOICE_DETAIL, dataset_violations
from tests.publish.test_focus13_rules import DEC, NOV, ROWS

OCT = "2026-10-01T00:00:00Z"
CLOSED_AT, RUN_AT = "2026-11-02T09:00:00Z", "2026-11-03T02:00:00Z"
# November's charges of robotics on jaguar (test_focus13_rules' rows), each on its resource's line; the correction
# of October 5 on a line of its own
LINES = ["cpu", "reserved-gpu", "reserved-gpu", "credit-gpu", "correction/cpu/2026-10-05"]
COST_AND_USAGE_ROWS = [{**row, "InvoiceDetailId": line} for row, line in zip(ROWS, LINES)]
INVOICE = "jaguar/2026-11/robotics"


def record(line: str, cost: float, category: str, **more) -> dict:
    return {"BilledCost": cost, "BillingAccountId": "robotics", "BillingCurrency": "USD", "BillingPeriodEnd": DEC,
            "BillingPeriodStart": NOV, "ChargeCategory": category, "InvoiceDetailCreated": RUN_AT,
            "InvoiceDetailDescription": f"{line} on cluster jaguar", "InvoiceDetailId": line,
            "InvoiceDetailGrain": json.dumps({"ServiceName": "Kubernetes", "x_Resource": line}),
            "InvoiceDetailLastUpdated": RUN_AT, "InvoiceId": INVOICE, "InvoiceIssueDate": None,
            "InvoiceIssueStatus": "Open", "InvoiceIssuerName": "jaguar", "PaymentDueDate": None,
            "PaymentTerms": "None: an internal chargeback statement", "ReferenceInvoiceId": None, **more}


DETAIL_ROWS = [
    record("cpu", 0.30, "Usage"),  # 0
    record("reserved-gpu", 48.00, "Usage"),  # 1
    record("credit-gpu", -12.00, "Credit"),  # 2
    record("correction/cpu/2026-10-05", 0.05, "Usage", ReferenceInvoiceId="jaguar/2026-10/robotics",  # 3
           InvoiceDetailGrain=json.dumps({"ServiceName": "Kubernetes", "x_Corrects": "2026-10-05"})),
    # 4: October's invoice, issued when October closed
    record("cpu", 0.20, "Usage", InvoiceId="jaguar/2026-10/robotics", BillingPeriodStart=OCT, BillingPeriodEnd=NOV,
           InvoiceIssueStatus="Issued", InvoiceIssueDate=CLOSED_AT, InvoiceDetailCreated=CLOSED_AT,
           InvoiceDetailLastUpdated=CLOSED_AT),
]
PERIOD_ROWS = [
    {"BillingPeriodCreated": "2026-10-02T02:00:00Z", "BillingPeriodEnd": NOV, "BillingPeriodLastUpdated": CLOSED_AT,
     "BillingPeriodStart": OCT, "BillingPeriodStatus": "Closed", "InvoiceIssuerName": "jaguar"},
    {"BillingPeriodCreated": RUN_AT, "BillingPeriodEnd": DEC, "BillingPeriodLastUpdated": RUN_AT,
     "BillingPeriodStart": NOV, "BillingPeriodStatus": "Open", "InvoiceIssuerName": "jaguar"},
]


def found(usage: dict | None = None, detail: dict | None = None, periods: dict | None = None) -> list[str]:
    def frame(rows: list[dict], changes: dict | None) -> pd.DataFrame:
        return pd.DataFrame([{**row, **(changes or {}).get(index, {})} for index, row in enumerate(rows)])
    return dataset_violations(frame(COST_AND_USAGE_ROWS, usage), frame(DETAIL_ROWS, detail),
                              frame(PERIOD_ROWS, periods))


# (the message's start: dataset, column, rule; the Cost and Usage, Invoice Detail and Billing Period changes)
BROKEN = [
    ("Cost and Usage InvoiceDetailId: on_an_invoice", {0: {"InvoiceDetailId": None}}, None, None),
    ("Cost and Usage InvoiceDetailId: data type", {0: {"InvoiceDetailId": 7}}, None, None),
    ("Invoice Detail BilledCost: allows nulls", None, {0: {"BilledCost": None}}, None),
    ("Invoice Detail BillingCurrency: data type", None, {0: {"BillingCurrency": "usd"}}, None),
    ("Invoice Detail BillingPeriodStart: starts_before_its_end", None, {0: {"BillingPeriodEnd": NOV}}, None),
    ("Invoice Detail ChargeCategory: allowed values", None, {0: {"ChargeCategory": "Refund"}}, None),
    ("Invoice Detail InvoiceDetailCreated: allows nulls", None, {0: {"InvoiceDetailCreated": None}}, None),
    ("Invoice Detail InvoiceDetailDescription: described", None, {0: {"InvoiceDetailDescription": None}}, None),
    ("Invoice Detail InvoiceDetailGrain: focus_or_custom_keys", None,
     {0: {"InvoiceDetailGrain": json.dumps({"Resource": "cpu"})}}, None),
    ("Invoice Detail InvoiceDetailGrain: focus_or_custom_keys", None, {0: {"InvoiceDetailGrain": None}}, None),
    ("Invoice Detail InvoiceDetailId: unique_within_invoice", None, {1: {"InvoiceDetailId": "cpu"}}, None),
    ("Invoice Detail InvoiceDetailLastUpdated: not_before_InvoiceDetailCreated", None,
     {0: {"InvoiceDetailLastUpdated": "2026-11-03T01:59:59Z"}}, None),
    ("Invoice Detail InvoiceId: allows nulls", None, {0: {"InvoiceId": None}}, None),
    ("Invoice Detail InvoiceIssueDate: set_unless_open", None, {0: {"InvoiceIssueDate": CLOSED_AT}}, None),
    ("Invoice Detail InvoiceIssueDate: set_unless_open", None, {4: {"InvoiceIssueDate": None}}, None),
    ("Invoice Detail InvoiceIssueStatus: allowed values", None, {0: {"InvoiceIssueStatus": "Draft"}}, None),
    ("Invoice Detail PaymentDueDate: data type", None, {0: {"PaymentDueDate": "30 days"}}, None),
    ("Invoice Detail PaymentTerms: allows nulls", None, {0: {"PaymentTerms": None}}, None),
    ("Invoice Detail ReferenceInvoiceId: references_an_earlier_invoice", None, {3: {"ReferenceInvoiceId": INVOICE}},
     None),
    ("Invoice Detail ReferenceInvoiceId: references_an_earlier_invoice", None,
     {3: {"ReferenceInvoiceId": "jaguar/2026-10/robotics"}, 4: {"BillingPeriodStart": NOV, "BillingPeriodEnd": DEC}},
     None),
    ("Invoice Detail ReferenceInvoiceId: referenced_by_corrections", None, {3: {"ReferenceInvoiceId": None}}, None),
    ("Billing Period BillingPeriodCreated: allows nulls", None, None, {0: {"BillingPeriodCreated": None}}),
    ("Billing Period BillingPeriodEnd: data type", None, None, {0: {"BillingPeriodEnd": "2026-11-01"}}),
    ("Billing Period BillingPeriodLastUpdated: not_before_BillingPeriodCreated", None, None,
     {0: {"BillingPeriodLastUpdated": "2026-10-01T00:00:00Z"}}),
    ("Billing Period BillingPeriodStart: starts_before_its_end", None, None, {1: {"BillingPeriodEnd": NOV}}),
    ("Billing Period BillingPeriodStart: one_record_per_period", None, None,
     {0: {"BillingPeriodStart": NOV, "BillingPeriodEnd": DEC}}),
    ("Billing Period BillingPeriodStatus: allowed values", None, None, {1: {"BillingPeriodStatus": "Invoiced"}}),
    ("Billing Period InvoiceIssuerName: allows nulls", None, None, {1: {"InvoiceIssuerName": None}}),
    # the datasets together
    ("relationship: Cost and Usage lines without an Invoice Detail record", {0: {"InvoiceDetailId": "gpu"}}, None,
     None),
    ("relationship: lines whose Cost and Usage and Invoice Detail differ", None, {0: {"BilledCost": 0.31}}, None),
    ("relationship: Cost and Usage billing periods without a Billing Period record", None, None,
     {1: {"BillingPeriodStart": "2026-12-01T00:00:00Z", "BillingPeriodEnd": "2027-01-01T00:00:00Z"}}),
    ("relationship: Invoice Detail invoices over several billing periods", None,
     {3: {"InvoiceId": "jaguar/2026-10/robotics", "ReferenceInvoiceId": None,
          "InvoiceDetailGrain": json.dumps({"ServiceName": "Kubernetes"})}}, None),
]


def test_hand_made_datasets_that_meet_every_requirement_pass():
    assert found() == []


@pytest.mark.parametrize(("message", "usage", "detail", "periods"), BROKEN, ids=[message for message, *_ in BROKEN])
def test_a_record_that_breaks_a_rule_fails_naming_its_dataset_column_and_rule(message, usage, detail, periods):
    messages = found(usage, detail, periods)
    assert any(text.startswith(message) for text in messages), messages


def test_every_rule_of_the_1_4_tables_has_a_record_that_breaks_it():
    rules = {f"{dataset} {name}: {rule.__name__}" for dataset, table in (
        ("Cost and Usage", {"InvoiceDetailId": COST_AND_USAGE["InvoiceDetailId"]}),
        ("Invoice Detail", INVOICE_DETAIL), ("Billing Period", BILLING_PERIOD))
        for name, column in table.items() for rule in column.rules}
    assert rules <= {message for message, *_ in BROKEN}


def test_a_mandatory_column_missing_or_one_whose_condition_does_not_hold_fails():
    detail = pd.DataFrame(DETAIL_ROWS)
    usage, periods = pd.DataFrame(COST_AND_USAGE_ROWS), pd.DataFrame(PERIOD_ROWS)
    assert dataset_violations(usage, detail.drop(columns="PaymentTerms"), periods) == [
        "Invoice Detail PaymentTerms: presence: missing (Mandatory)"]
    assert dataset_violations(usage, detail.assign(PurchaseOrderNumber=None), periods) == [
        "Invoice Detail PurchaseOrderNumber: presence: written though no customer input of purchase order numbers"]
    assert dataset_violations(usage.drop(columns="InvoiceDetailId"), detail, periods) == [
        "Cost and Usage InvoiceDetailId: presence: missing (Conditional)"]
