"""The ledger in the FinOps FOCUS 1.2 column layout, for finance tools.

FOCUS (the FinOps Open Cost and Usage Specification) is the common layout
cloud providers export their bills in; a FinOps tool that reads AWS's or
Azure's FOCUS export reads this one too, so the clusters' costs can sit next
to the cloud bills. Every ledger row becomes one FOCUS row, or one per
workload and cost label set where workload rows break it down (their costs
add up to the ledger row's); all 21 columns FOCUS 1.2 makes mandatory are
there, plus the conditional ones the ledger can fill. How the ledger maps
onto FOCUS terms:

* the team charged is the billing account (BillingAccountId/Name);
* the cluster is the provider, publisher and invoice issuer;
* the workload is the resource (ResourceId `<cluster>/<namespace>/<Kind>/<name>`,
  ResourceType its kind); without one, the namespace (`<cluster>/<namespace>`),
  or a reserved pool for its capacity rows (`<cluster>/pool:<name>`);
* ChargeCategory is Usage, but Credit for the credits of a reserved pool's
  use (negative, no ConsumedQuantity); shared unrequested capacity is the Usage of
  the namespace it is charged to;
* the charge period is the billing day, the billing period its month, both
  as UTC instants of local midnights in the configured time zone;
* BilledCost, EffectiveCost and ContractedCost are the ledger's cost;
  ListCost is its list_cost, quantity x list price: they differ by the
  discounts of pod priority classes (prices.priority_classes);
* cluster, namespace, team, owner, resource, GPU model and workload are also
  in Tags, under the provider-defined prefix `billing/`; the pod's cost labels
  (`cost_labels`) are user-defined tags under their own names, left out where
  the pod had no such label.
"""

from __future__ import annotations

import json
from datetime import date
from importlib.util import find_spec
from pathlib import Path
from typing import IO
from zoneinfo import ZoneInfo

import pandas as pd

from billing.days import billing_day
from billing.errors import UsageError
from billing.ledger.questions import ROW_KEY
from billing.publish.report_formats import spreadsheet_safe
from billing.resources import CPU, CREDIT, GPU, LENT, MEMORY, QUOTA, QUOTA_PREFIX, RESERVED, UNREQUESTED, base

TAG_PREFIX = "billing/"

PRICING_UNITS = {GPU: "GPU-Hours", CPU: "Core-Hours", MEMORY: "GiB-Hours"}
RESOURCE_WORDS = {GPU: "GPU-hours", CPU: "CPU core-hours", MEMORY: "memory GiB-hours"}

MANDATORY_COLUMNS = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
]
CONDITIONAL_COLUMNS = [
    "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit", "ListUnitPrice", "PricingCategory", "ResourceId",
    "ResourceName", "ResourceType", "ServiceSubcategory", "SkuId", "Tags",
]
FOCUS_COLUMNS = sorted(MANDATORY_COLUMNS + CONDITIONAL_COLUMNS)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # FOCUS date/time format: ISO 8601 in UTC


class ParquetUnavailable(UsageError):
    """Parquet output was asked for, but pyarrow is not installed."""


def _periods(days: pd.Series, zone: ZoneInfo) -> pd.DataFrame:
    """UTC bounds of each day and of its month: local midnight to local midnight."""
    bounds = {}
    for day in days.unique():
        month = day.replace(day=1)
        next_month = date(month.year + month.month // 12, month.month % 12 + 1, 1)
        bounds[day] = (
            billing_day(day, zone).start, billing_day(day, zone).end,
            billing_day(month, zone).start, billing_day(next_month, zone).start,
        )
    columns = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingPeriodEnd"]
    frame = pd.DataFrame([bounds[d] for d in days], columns=columns, index=days.index)
    return frame.apply(lambda column: pd.to_datetime(column, utc=True))  # type: ignore[return-value]  # pandas-stubs: DataFrame.apply of a column function gives a DataFrame


def broken_down(ledger: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Ledger rows (ledger.read_rows) with each one that workload rows (ledger.read_workload_costs) break
    down replaced by them, at its unit price; the others kept with workload and labels None.

    The workload rows of a ledger row add up to it, so the costs still add up to the ledger's.
    """
    key = list(ROW_KEY)
    priced = workloads.merge(ledger[[*key, "unit_price"]], on=key, validate="many_to_one")
    covered = ledger.set_index(key).index.isin(workloads.set_index(key).index)
    kept = ledger[~covered].assign(workload=None, labels=None)
    return pd.concat([kept, priced], ignore_index=True).sort_values([*key, "workload"], na_position="first",
                                                                   ignore_index=True)


def _is_workload(name: object) -> bool:
    """A workload `Kind/name`, not a row no workload requested (a pool's, a share of unrequested capacity)."""
    return isinstance(name, str) and "/" in name


def _tags(row) -> str:
    tags = {"cluster": row.cluster, "namespace": row.namespace, "team": row.team, "resource": row.resource}
    if isinstance(row.owner, str):
        tags["owner"] = row.owner
    if row.gpu_model:
        tags["gpu_model"] = row.gpu_model
    if isinstance(row.workload, str):
        tags["workload"] = row.workload
    provider = {TAG_PREFIX + key: value for key, value in tags.items()}
    labels = json.loads(row.labels) if isinstance(row.labels, str) else {}
    user = {name: value for name, value in labels.items() if value != ""}  # a pod without the label has no tag
    return json.dumps(dict(sorted((provider | user).items())), ensure_ascii=False)


def _description(row) -> str:
    kind = row.resource.removesuffix(base(row.resource))
    what = RESOURCE_WORDS[base(row.resource)] + (f" of {row.gpu_model}" if row.gpu_model else "")
    by = f"workload {row.workload} in namespace" if _is_workload(row.workload) else "namespace"
    return {
        "": f"{what} requested by {by} {row.namespace} on cluster {row.cluster}",
        UNREQUESTED: f"share of the unrequested {what} capacity of cluster {row.cluster}, charged to namespace {row.namespace}",
        RESERVED: f"{what} of the reserved {row.namespace.replace(':', ' ', 1)} on cluster {row.cluster}",
        CREDIT: f"credit for the {what} namespace {row.namespace} used in a reserved pool or within a quota on cluster "
                f"{row.cluster}",
        QUOTA: f"{what} of the Kueue ClusterQueue {row.namespace.removeprefix(QUOTA_PREFIX)}'s nominal quota on cluster "
               f"{row.cluster}",
        LENT: f"credit for the {what} of quota lent to namespace {row.namespace} on cluster {row.cluster}",
    }[kind]


def _resource_type(resource: str) -> str:
    """What a row's namespace stands for: a reserved pool's or a Kueue quota's capacity, or a namespace."""
    return "Reserved pool" if resource.startswith(RESERVED) else "Kueue quota" if resource.startswith(QUOTA) else "Namespace"


def focus_rows(ledger: pd.DataFrame, zone: ZoneInfo, recovered: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows of `broken_down` as FOCUS rows, one for one, in FOCUS_COLUMNS order; then closed months' cost
    recovery lines (`recovery_rows`), each a row of its own."""
    units = ledger["resource"].map(base).map(PRICING_UNITS)
    credit = ledger["resource"].str.startswith((CREDIT, LENT))
    workload = ledger["workload"].map(_is_workload).astype(bool)
    namespace_type = ledger["resource"].map(_resource_type)
    focus = pd.DataFrame(
        {
            "BilledCost": ledger["cost"],
            "BillingAccountId": ledger["team"],
            "BillingAccountName": ledger["team"],
            "BillingCurrency": ledger["currency"],
            "ChargeCategory": credit.map({True: "Credit", False: "Usage"}),
            "ChargeClass": None,  # no row corrects an earlier invoiced period
            "ChargeDescription": [_description(row) for row in ledger.itertuples()],
            "ChargeFrequency": "Usage-Based",
            "ConsumedQuantity": ledger["quantity"].mask(credit),  # FOCUS: only Usage rows consume
            "ConsumedUnit": units.mask(credit),
            "ContractedCost": ledger["cost"],
            "EffectiveCost": ledger["cost"],
            "InvoiceIssuerName": ledger["cluster"],
            "ListCost": ledger["list_cost"],
            "ListUnitPrice": ledger["unit_price"],
            "PricingCategory": "Standard",
            "PricingQuantity": ledger["quantity"],
            "PricingUnit": units,
            "ProviderName": ledger["cluster"],
            "PublisherName": ledger["cluster"],
            "ResourceId": (ledger["cluster"] + "/" + ledger["namespace"]).mask(
                workload, ledger["cluster"] + "/" + ledger["namespace"] + "/" + ledger["workload"]),
            "ResourceName": ledger["namespace"].mask(workload, ledger["workload"]),
            "ResourceType": namespace_type.mask(workload, ledger["workload"].str.split("/", n=1).str[0]),
            "ServiceCategory": "Compute",
            "ServiceName": "Kubernetes",
            "ServiceSubcategory": "Containers",
            "SkuId": ledger["resource"].where(ledger["gpu_model"] == "", ledger["resource"] + "/" + ledger["gpu_model"]),
            "Tags": [_tags(row) for row in ledger.itertuples()],
        },
        index=ledger.index,
    )
    rows = focus.join(_periods(ledger["day"], zone))[FOCUS_COLUMNS].reset_index(drop=True)
    if recovered is None or recovered.empty:
        return rows
    return pd.concat([rows, recovery_rows(recovered, zone)], ignore_index=True)


def recovery_rows(recovered: pd.DataFrame, zone: ZoneInfo) -> pd.DataFrame:
    """Cost recovery lines of closed months, with what corrections of their days moved (ledger.read.read_recovery:
    month, team, cluster, amount, currency) as FOCUS rows of their own: ChargeCategory Adjustment over the whole
    month, no quantity or price."""
    periods = _periods(recovered["month"], zone)
    focus = pd.DataFrame(
        {
            "BilledCost": recovered["amount"],
            "BillingAccountId": recovered["team"],
            "BillingAccountName": recovered["team"],
            "BillingCurrency": recovered["currency"],
            "ChargeCategory": "Adjustment",
            "ChargeClass": None,
            "ChargeDescription": "cost recovery of cluster " + recovered["cluster"] + ": the team's share of the "
                                 "month's cost less the month's charges on it",
            "ChargeFrequency": "Recurring",
            "ConsumedQuantity": None,
            "ConsumedUnit": None,
            "ContractedCost": recovered["amount"],
            "EffectiveCost": recovered["amount"],
            "InvoiceIssuerName": recovered["cluster"],
            "ListCost": recovered["amount"],
            "ListUnitPrice": None,
            "PricingCategory": None,
            "PricingQuantity": None,
            "PricingUnit": None,
            "ProviderName": recovered["cluster"],
            "PublisherName": recovered["cluster"],
            "ResourceId": recovered["cluster"],
            "ResourceName": recovered["cluster"],
            "ResourceType": "Cluster",
            "ServiceCategory": "Compute",
            "ServiceName": "Kubernetes",
            "ServiceSubcategory": "Containers",
            "SkuId": "recovery",
            "Tags": [json.dumps({TAG_PREFIX + "cluster": cluster, TAG_PREFIX + "kind": "recovery", TAG_PREFIX + "team": team},
                                ensure_ascii=False) for cluster, team in zip(recovered["cluster"], recovered["team"])],
        },
        index=recovered.index,
    )
    # the charge period is the month: from its first day's start to the next month's
    focus = focus.join(periods.assign(ChargePeriodStart=periods["BillingPeriodStart"],
                                      ChargePeriodEnd=periods["BillingPeriodEnd"]))
    return focus[FOCUS_COLUMNS].reset_index(drop=True)


def write_focus(focus: pd.DataFrame, output: Path | None, stdout: IO[str]) -> None:
    """Parquet to a `.parquet` file, else CSV (to stdout without a file).

    CSV writes date/times in FOCUS's UTC format and null as an empty field, and a text cell that starts like a
    formula (= + - @) with a leading quote, as the reports do; Parquet keeps the types and the text as it is:
    decimals as doubles, date/times as UTC timestamps.
    """
    if output is not None and output.suffix.lower() == ".parquet":
        if find_spec("pyarrow") is None:  # pandas writes Parquet with it
            raise ParquetUnavailable("Parquet output needs pyarrow: pip install 'billing[parquet]', or write CSV")
        focus.to_parquet(output, index=False)
    else:  # text a spreadsheet would run as a formula (a team named =HYPERLINK(...)) stays text
        text = [column for column in focus.columns if not (pd.api.types.is_numeric_dtype(focus[column])
                                                           or pd.api.types.is_datetime64_any_dtype(focus[column]))]
        safe = focus.assign(**{column: focus[column].map(spreadsheet_safe) for column in text})
        safe.to_csv(output or stdout, index=False, date_format=TIME_FORMAT)
