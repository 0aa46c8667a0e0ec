"""FOCUS 1.4's Invoice Detail and Billing Period datasets: the monthly statements as invoices, and the months as
billing periods, beside the Cost and Usage rows of billing.publish.focus.

A team's statement lines of a cluster in a month are one invoice (InvoiceId `<cluster>/<YYYY-MM>/<team>`, the
cluster its issuer, as in the Cost and Usage rows); a closed month's as `billing close` stored them (Issued on the
day it closed), an open month's from the ledger now (Open: a provisional invoice). Each invoice has one Invoice
Detail record per line, its InvoiceDetailId the Cost and Usage rows' (`focus.correction_lines`):

* a ledger resource's line (`cpu`, `reserved-gpu`, `credit-gpu`, ...), its GPU models and the discount of pod
  priority classes on it together, as FOCUS applies a discount to the charge it discounts;
* `recovery`, the team's cost recovery of a recovered cluster (naming the provider's invoices imported for it);
* `correction/<resource>/<day>`, what a re-run of a closed month's day changed, booked on the first open month's
  invoice, with the corrected month's invoice as ReferenceInvoiceId.

Lines of 0.00 are kept: a statement lists them. The Billing Period dataset has a record per cluster (the invoice
issuer) and month: Closed once `billing close` closed it, else Open. docs/reports.md "FOCUS 1.4: invoices and billing
periods" says how the three datasets reconcile, and which reading of the 1.4 text each column takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo

import pandas as pd

from billing.ledger.read import MonthActivity
from billing.money import total
from billing.publish.credits import CREDIT_MEANINGS, CREDIT_WORDS
from billing.publish.focus import RESOURCE_WORDS, invoice_ids, json_text, periods_of
from billing.publish.statement import CORRECTION, Statement, StatementLine
from billing.resources import CREDIT, LENT, RECOVERY, base

INVOICE_DETAIL_COLUMNS = [
    "BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory",
    "InvoiceDetailCreated", "InvoiceDetailDescription", "InvoiceDetailGrain", "InvoiceDetailId",
    "InvoiceDetailLastUpdated", "InvoiceId", "InvoiceIssueDate", "InvoiceIssueStatus", "InvoiceIssuerName",
    "PaymentDueDate", "PaymentTerms", "ReferenceInvoiceId",
]
BILLING_PERIOD_COLUMNS = ["BillingPeriodCreated", "BillingPeriodEnd", "BillingPeriodLastUpdated", "BillingPeriodStart",
                          "BillingPeriodStatus", "InvoiceIssuerName"]
PAYMENT_TERMS = "None: an internal chargeback statement, settled by the organisation's own accounting"
LINE_WORDS = {"charge": "requested by the team's namespaces", "discount": "requested by the team's namespaces",
              "reserved": "of the team's reserved pools and Kueue quotas",
              "credit": "credited for others' use of the team's pools and quotas",
              "unrequested": "the team's share of the cluster's unrequested capacity"}


@dataclass(frozen=True)
class InvoicedMonth:
    """A month's statement with when its records came about, and the provider invoices imported per cluster."""

    statement: Statement
    activity: MonthActivity
    imported: dict[str, list[str]]  # cluster -> the provider invoice files `billing invoice import` read


def _category(resource: str) -> str:
    """The ChargeCategory of a line's resource, as the Cost and Usage rows have it."""
    if resource == RECOVERY:
        return "Adjustment"
    return "Credit" if resource.startswith((CREDIT, LENT)) or resource in CREDIT_WORDS else "Usage"


def _detail_id(line: StatementLine) -> str:
    if line.kind == CORRECTION:
        return f"correction/{line.resource}/{line.corrects:%Y-%m-%d}"
    return RECOVERY if line.kind == RECOVERY else line.resource


def _description(line: StatementLine, imported: list[str]) -> str:
    if line.kind == RECOVERY:
        invoiced = f", the cost as its provider invoiced it in {'; '.join(imported)}" if imported else ""
        return f"cost recovery of cluster {line.cluster}: the team's share of the month's cost less its charges{invoiced}"
    if line.kind in CREDIT_WORDS:
        return f"{CREDIT_WORDS[line.kind].lower()} on cluster {line.cluster}: {CREDIT_MEANINGS[line.kind]}"
    what = "cost recovery" if line.resource == RECOVERY else RESOURCE_WORDS[base(line.resource)]
    if line.kind == CORRECTION:
        return (f"correction of {line.corrects:%Y-%m-%d}: what running it again after {line.corrects:%Y-%m} was "
                f"invoiced changed in {what} on cluster {line.cluster}")
    return f"{what} {LINE_WORDS[line.kind]} on cluster {line.cluster}"


def _grain(line: StatementLine) -> str:
    """The line's grain: the service, and billing's own properties (FOCUS has none for a ledger resource, which
    spans SkuIds, one per GPU model)."""
    grain = {"ServiceName": "Kubernetes", "x_Line": line.kind if line.kind != "discount" else "charge"}
    if line.kind != RECOVERY:
        grain["x_Resource"] = line.resource
    if line.corrects is not None:
        grain["x_Corrects"] = f"{line.corrects:%Y-%m-%d}"
    return json_text(grain)


def _moments(*moments: datetime | None) -> list[datetime]:
    return [moment for moment in moments if moment is not None]


def invoice_detail(months: Sequence[InvoicedMonth], zone: ZoneInfo) -> pd.DataFrame:
    """The Invoice Detail records of the months' statements, in INVOICE_DETAIL_COLUMNS order."""
    records = []
    for month in months:
        statement, activity = month.statement, month.activity
        closed = statement.closing.closed_at if statement.closing is not None else None
        created = closed or min(_moments(activity.first_run, activity.last_booked), default=None)
        updated = closed or max(_moments(activity.last_run, activity.last_booked, activity.last_closing), default=None)
        lines: dict[tuple[str, str, str], list[StatementLine]] = {}
        for line in statement.lines:
            lines.setdefault((line.team, line.cluster, _detail_id(line)), []).append(line)
        for (team, cluster, detail), parts in lines.items():
            first = parts[0]
            records.append({
                "BilledCost": total(part.amount for part in parts),
                "BillingAccountId": team,
                "BillingCurrency": statement.currency,
                "ChargeCategory": _category(first.resource if first.kind != RECOVERY else RECOVERY),
                "InvoiceDetailCreated": created,
                "InvoiceDetailDescription": _description(first, month.imported.get(cluster, [])),
                "InvoiceDetailGrain": _grain(first),
                "InvoiceDetailId": detail,
                "InvoiceDetailLastUpdated": updated,
                "InvoiceIssueDate": closed,
                "InvoiceIssueStatus": "Issued" if closed else "Open",
                "InvoiceIssuerName": cluster,
                "PaymentDueDate": None,
                "PaymentTerms": PAYMENT_TERMS,
                "ReferenceInvoiceId": f"{cluster}/{first.corrects:%Y-%m}/{team}" if first.corrects else None,
                "month": statement.month,
            })
    if not records:
        return pd.DataFrame(columns=INVOICE_DETAIL_COLUMNS)
    frame = pd.DataFrame(records)
    periods = periods_of(frame["month"], zone)
    frame = frame.assign(BillingPeriodStart=periods["BillingPeriodStart"], BillingPeriodEnd=periods["BillingPeriodEnd"],
                         InvoiceId=invoice_ids(frame["InvoiceIssuerName"], frame["month"], frame["BillingAccountId"]))
    for column in ("InvoiceDetailCreated", "InvoiceDetailLastUpdated", "InvoiceIssueDate", "PaymentDueDate"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame[INVOICE_DETAIL_COLUMNS]


def billing_periods(months: Sequence[InvoicedMonth], issuers: dict[date, set[str]], zone: ZoneInfo) -> pd.DataFrame:
    """A Billing Period record per month and cluster invoicing in it (`issuers`, by the month's first day), in
    BILLING_PERIOD_COLUMNS order. Created when the month's first day ran (or its first correction was booked); last
    updated when it was last closed or reopened, its status the one column that changes."""
    records = []
    for month in months:
        activity, first = month.activity, month.statement.month
        created = min(_moments(activity.first_run, activity.last_booked, activity.last_closing), default=None)
        if created is None:
            continue  # a month nothing happened in has no billing period yet
        updated = max(_moments(created, activity.last_closing))
        records += [{"month": first, "InvoiceIssuerName": cluster, "BillingPeriodCreated": created,
                     "BillingPeriodLastUpdated": updated,
                     "BillingPeriodStatus": "Closed" if month.statement.closing is not None else "Open"}
                    for cluster in sorted(issuers.get(first, set()))]
    if not records:
        return pd.DataFrame(columns=BILLING_PERIOD_COLUMNS)
    frame = pd.DataFrame(records)
    periods = periods_of(frame["month"], zone)
    frame = frame.assign(BillingPeriodStart=periods["BillingPeriodStart"], BillingPeriodEnd=periods["BillingPeriodEnd"])
    for column in ("BillingPeriodCreated", "BillingPeriodLastUpdated"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame[BILLING_PERIOD_COLUMNS]


def with_unlisted_lines(detail: pd.DataFrame, cost_and_usage: pd.DataFrame) -> pd.DataFrame:
    """The Invoice Detail records, and a record of 0.00 for each line the Cost and Usage rows name that its invoice
    does not list: a re-run of a closed month's day charged a team or resource its issued invoice has no line for,
    and what it charged there is left out of the invoice by as much (focus.correction_rows), so every InvoiceId and
    InvoiceDetailId of the Cost and Usage rows has its record, adding up to the same."""
    key = ["InvoiceId", "InvoiceDetailId"]
    listed = detail.set_index(key).index
    unlisted = cost_and_usage[~cost_and_usage.set_index(key).index.isin(listed)].drop_duplicates(key)
    if unlisted.empty:
        return detail
    month = detail.drop_duplicates("BillingPeriodStart").set_index("BillingPeriodStart")[
        ["InvoiceDetailCreated", "InvoiceDetailLastUpdated", "InvoiceIssueDate", "InvoiceIssueStatus"]]
    periods = pd.to_datetime(unlisted["BillingPeriodStart"], utc=True)
    added = pd.DataFrame({
        "BilledCost": 0.0, "BillingAccountId": unlisted["BillingAccountId"],
        "BillingCurrency": unlisted["BillingCurrency"], "BillingPeriodEnd": pd.to_datetime(
            unlisted["BillingPeriodEnd"], utc=True), "BillingPeriodStart": periods,
        "ChargeCategory": unlisted["InvoiceDetailId"].map(_category),
        "InvoiceDetailDescription": "nothing invoiced: what a re-run of a day after its month was invoiced charged "
                                    "here is booked as a correction on a later invoice",
        "InvoiceDetailGrain": unlisted["InvoiceDetailId"].map(
            lambda resource: json_text({"ServiceName": "Kubernetes", "x_Line": "charge", "x_Resource": resource})),
        "InvoiceDetailId": unlisted["InvoiceDetailId"], "InvoiceId": unlisted["InvoiceId"],
        "InvoiceIssuerName": unlisted["InvoiceIssuerName"], "PaymentDueDate": pd.NaT, "PaymentTerms": PAYMENT_TERMS,
        "ReferenceInvoiceId": None,
    }).join(month, on="BillingPeriodStart")
    return pd.concat([detail, added[INVOICE_DETAIL_COLUMNS]], ignore_index=True)
