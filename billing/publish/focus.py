"""The ledger in the FinOps FOCUS 1.3 column layout (or 1.2 or 1.4, on request), for finance tools.

FOCUS (the FinOps Open Cost and Usage Specification) is the common layout
cloud providers export their bills in; a FinOps tool that reads AWS's or
Azure's FOCUS export reads this one too, so the clusters' costs can sit next
to the cloud bills. Every ledger row becomes one FOCUS row, or one per
workload and cost label set where workload rows break it down (their costs
add up to the ledger row's); all the columns FOCUS makes mandatory are there
(21 in 1.2, 23 in 1.3), plus the conditional ones the ledger can fill. How
the ledger maps onto FOCUS terms:

* the team charged is the billing account (BillingAccountId/Name);
* the cluster is the provider, publisher and invoice issuer;
* the workload is the resource (ResourceId `<cluster>/<namespace>/<Kind>/<name>`,
  ResourceType its kind); without one, the namespace (`<cluster>/<namespace>`),
  or a reserved pool or Kueue quota for its capacity rows (`<cluster>/pool:<name>`,
  `<cluster>/quota:<queue>`);
* ChargeCategory is Usage, but Credit for the credits of a reserved pool's or a
  Kueue quota's use and of lent quota (negative, no ConsumedQuantity); shared
  unrequested capacity is the Usage of the namespace it is charged to;
* the charge period is the billing day, the billing period its month, both
  as UTC instants of local midnights in the configured time zone; a correction
  of a closed month's day is ChargeClass Correction, over the day it corrects,
  in the billing period of the month whose statement books it;
* BilledCost, EffectiveCost and ContractedCost are the ledger's cost;
  ListCost is quantity x list price (the ledger's list_cost, but for a
  credit's): they differ by the discounts of pod priority classes
  (prices.priority_classes);
* cluster, namespace, team, owner, resource, GPU model and workload are also
  in Tags, under the provider-defined prefix `billing/` (an energy row's grams
  of CO2e too, `billing/carbon_g`); the pod's cost labels
  (`cost_labels`) are user-defined tags under their own names, left out where
  the pod had no such label.

FOCUS 1.3 adds (docs/reports.md lists them):

* ServiceProviderName and HostProviderName, the cluster (it runs its own
  nodes, as far as billing knows); the deprecated ProviderName and
  PublisherName stay, as 1.3 still makes them mandatory, with the same value;
* SkuPriceId (the SkuId: one price per SKU and day) and SkuMeter, as 1.3
  nulls ListUnitPrice, PricingQuantity and ConsumedQuantity without a SkuPriceId;
* split cost allocation: each origin charge (a reserved pool's or Kueue
  quota's capacity row, a team's share of a cluster's unrequested capacity)
  is written as its allocated charges, the origin's row at each namespace's
  ratio of its hours (and the part no one used, with no
  AllocatedResourceId), keeping all its dimensions; the credits of a pool's
  or quota's use are charges of their own (docs/reports.md "Allocated
  charges" maps each FOCUS question onto the ledger's figures).

FOCUS 1.4's Cost and Usage is 1.3's and InvoiceDetailId, the statement line a row
is on (`correction_lines`); its Invoice Detail and Billing Period datasets are
billing.publish.focus_invoices'.
"""

from __future__ import annotations

import json
import math
from datetime import date
from importlib.util import find_spec
from pathlib import Path
from typing import IO
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from billing.days import billing_day
from billing.errors import UsageError
from billing.ledger.questions import ROW_KEY
from billing.publish.credits import CREDIT_MEANINGS, CREDIT_WORDS
from billing.publish.report_formats import spreadsheet_safe
from billing.resources import (
    CPU,
    CREDIT,
    ENERGY,
    LENT,
    QUOTA,
    QUOTA_PREFIX,
    RECOVERY,
    REGISTRY,
    RESERVED,
    UNATTRIBUTED,
    UNATTRIBUTED_ENERGY,
    UNREQUESTED,
    base,
    per_resource,
)

TAG_PREFIX = "billing/"

PRICING_UNITS = per_resource("focus_unit")
RESOURCE_WORDS = per_resource("focus_meter")
SERVICE_COLUMNS = {"ServiceCategory": "focus_category", "ServiceSubcategory": "focus_subcategory",
                   "ServiceName": "focus_service"}  # each row's, from its resource (cost recovery's: Compute)

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
PROVIDER_COLUMNS = ["HostProviderName", "ServiceProviderName"]  # mandatory since FOCUS 1.3
ALLOCATION_COLUMNS = ["AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName",
                      "AllocatedTags"]
SKU_PRICE_COLUMNS = ["SkuMeter", "SkuPriceId"]
INVOICE = "InvoiceId"  # recommended since FOCUS 1.2
INVOICE_DETAIL = "InvoiceDetailId"  # since FOCUS 1.4: the invoice line (publish/focus_invoices.py) a charge is on
COLUMNS_13 = MANDATORY_COLUMNS + PROVIDER_COLUMNS + CONDITIONAL_COLUMNS + ALLOCATION_COLUMNS + SKU_PRICE_COLUMNS + [INVOICE]
FOCUS_COLUMNS = {
    "1.2": sorted([*MANDATORY_COLUMNS, *CONDITIONAL_COLUMNS, INVOICE]),
    "1.3": sorted(COLUMNS_13),
    "1.4": sorted([*COLUMNS_13, INVOICE_DETAIL]),
}
DEFAULT_VERSION = "1.3"

# AllocatedMethodId of each kind of row that splits a shared cost (docs/reports.md documents each method)
UNREQUESTED_SHARE, RESERVED_POOL, KUEUE_QUOTA = "billing/unrequested-share", "billing/reserved-pool", \
    "billing/kueue-quota"
ALLOCATIONS = {UNREQUESTED: UNREQUESTED_SHARE, RESERVED: RESERVED_POOL, QUOTA: KUEUE_QUOTA}
CAPACITY = (RESERVED, QUOTA)  # the kinds of a team's capacity (a pool's, a quota's) that its credits' use splits

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # FOCUS date/time format: ISO 8601 in UTC


class ParquetUnavailable(UsageError):
    """Parquet output was asked for, but pyarrow is not installed."""


def periods_of(days: pd.Series, zone: ZoneInfo) -> pd.DataFrame:
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


def with_carbon(rows: pd.DataFrame, energy: pd.DataFrame) -> pd.DataFrame:
    """`broken_down`'s rows with `carbon_g`: an energy row's grams of CO2e, and an unattributed-energy row's those of
    its share (ledger.read.read_energy; docs/spec.md "Energy and carbon"), which its Tags carry, FOCUS having no column
    for it; NaN on every other row and where unknown. An energy row is one part under no workload, so the namespace's
    carbon is its."""
    key = ["day", "cluster", "namespace", "team"]
    carbon = pd.concat([energy[[*key, "carbon_g"]].assign(resource=ENERGY),
                        energy[[*key, "shared_carbon_g"]].rename(columns={"shared_carbon_g": "carbon_g"})
                        .assign(resource=UNATTRIBUTED_ENERGY)], ignore_index=True)
    return rows.merge(carbon, on=[*key, "resource"], how="left", validate="many_to_one")


def _is_workload(name: object) -> bool:
    """A workload `Kind/name`, not a row no workload requested (a pool's, a share of unrequested capacity)."""
    return isinstance(name, str) and "/" in name


def _kind(resource: str) -> str:
    """The row's kind: "" for what a namespace requested, else RESERVED, CREDIT or UNREQUESTED."""
    return resource.removesuffix(base(resource))


def _prefixed(tags: dict[str, str]) -> dict[str, str]:
    return {TAG_PREFIX + key: value for key, value in tags.items()}


def _tags(row) -> dict[str, str]:
    """The row's tags: what it charges (cluster, resource, GPU model), whom (namespace, team, owner, workload)
    and the pod's cost labels, left out where the pod had no such label."""
    tags = {"cluster": row.cluster, "resource": row.resource, "namespace": row.namespace, "team": row.team}
    if row.gpu_model:
        tags["gpu_model"] = row.gpu_model
    if isinstance(row.owner, str):
        tags["owner"] = row.owner
    if isinstance(row.workload, str) and row.workload:
        tags["workload"] = row.workload
    carbon = getattr(row, "carbon_g", None)
    if isinstance(carbon, float) and not math.isnan(carbon):
        tags["carbon_g"] = f"{carbon:.6g}"  # grams of CO2e of an energy row
    labels = json.loads(row.labels) if isinstance(row.labels, str) else {}
    return _prefixed(tags) | {name: value for name, value in labels.items() if value != ""}


def json_text(tags: dict[str, str]) -> str:
    """Key-value JSON (Tags, InvoiceDetailGrain) with its keys sorted: the same text for the same pairs."""
    return json.dumps(dict(sorted(tags.items())), ensure_ascii=False)


def _description(row) -> str:
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
        UNATTRIBUTED: f"share of the energy no pod accounts for (idle power) on cluster {row.cluster}, charged to "
                      f"namespace {row.namespace} in proportion to its own",
    }[_kind(row.resource)]


def _resource_type(resource: str) -> str:
    """What a row's namespace stands for: a reserved pool's or a Kueue quota's capacity, or a namespace."""
    return "Reserved pool" if resource.startswith(RESERVED) else "Kueue quota" if resource.startswith(QUOTA) else "Namespace"


def focus_rows(ledger: pd.DataFrame, zone: ZoneInfo, recovered: pd.DataFrame | None = None,
               version: str = DEFAULT_VERSION, corrections: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows of `broken_down` as FOCUS rows of the version, in its FOCUS_COLUMNS order; then closed months' cost
    recovery lines (`recovery_rows`) and the corrections of closed months' days (`correction_rows`), each a row of
    its own.

    FOCUS 1.2 gets one row per row. FOCUS 1.3 gets the rows a namespace pays for itself and the credits one for
    one too, but each origin charge (a pool's or quota's capacity row, a team's share of a cluster's unrequested
    capacity) as its allocated charges (`allocated_rows`).
    """
    if version == "1.2":
        rows = _charges(ledger)
    else:
        split = ledger["resource"].map(_kind).isin([*CAPACITY, UNREQUESTED])
        own = _charges(ledger[~split])
        own = own.assign(**_columns_13(ledger[~split], own), **{column: None for column in ALLOCATION_COLUMNS})
        allocated = allocated_rows(ledger)
        rows = pd.concat([own, *([_allocated_charges(allocated)] if len(allocated) else [])], ignore_index=True)
        ledger = pd.concat([ledger[~split], allocated], ignore_index=True)
    rows = rows.join(periods_of(ledger["day"], zone)).assign(
        InvoiceId=invoice_ids(ledger["cluster"], ledger["day"], ledger["team"]), InvoiceDetailId=ledger["resource"])
    rows = rows[FOCUS_COLUMNS[version]].reset_index(drop=True)
    more = [*([recovery_rows(recovered, zone, version)] if recovered is not None and len(recovered) else []),
            *([correction_rows(corrections, zone, version)] if corrections is not None and len(corrections) else [])]
    return pd.concat([rows, *more], ignore_index=True) if more else rows


def invoice_ids(cluster: pd.Series, day: pd.Series, team: pd.Series) -> pd.Series:
    """InvoiceId: the team's statement of the month, its lines of the cluster (the invoice issuer):
    `<cluster>/<YYYY-MM>/<team>`. An open month's is the statement closing it will issue, which FOCUS allows
    ("MAY be generated prior to an invoice being issued"): its rows add up to `billing statement` of the month."""
    return cluster + "/" + day.map(lambda first: f"{first:%Y-%m}") + "/" + team


def correction_lines(resource: pd.Series, corrects: pd.Series) -> pd.Series:
    """InvoiceDetailId of corrections booked on an invoice: `correction/<resource>/<day corrected>`, a line per
    resource and day as the statement has them. The other lines of an invoice are its ledger resources'
    (`cpu`, `credit-gpu`, ...) and its cost recovery (`recovery`): a charge's InvoiceDetailId is its resource."""
    return "correction/" + resource + "/" + corrects.map(lambda day: f"{day:%Y-%m-%d}")


def _charges(ledger: pd.DataFrame) -> pd.DataFrame:
    """The FOCUS 1.2 columns of ledger rows, each its own charge, on the ledger's index.

    A credit's ListCost is its hours at list price, as FOCUS has ListCost = ListUnitPrice x PricingQuantity:
    the ledger's list_cost of a credit is what it gives back (its cost), so that statements show no discount on it.
    """
    units = ledger["resource"].map(base).map(PRICING_UNITS)
    credit = ledger["resource"].str.startswith((CREDIT, LENT))
    workload = ledger["workload"].map(_is_workload).astype(bool)
    namespace_type = ledger["resource"].map(_resource_type)
    return pd.DataFrame(
        {
            "BilledCost": ledger["cost"],
            "BillingAccountId": ledger["team"],
            "BillingAccountName": ledger["team"],
            "BillingCurrency": ledger["currency"],
            "ChargeCategory": credit.map({True: "Credit", False: "Usage"}),
            "ChargeClass": None,  # a ledger row is its own day's: corrections are `correction_rows`
            "ChargeDescription": [_description(row) for row in ledger.itertuples()],
            "ChargeFrequency": "Usage-Based",
            "ConsumedQuantity": ledger["quantity"].mask(credit),  # FOCUS: only Usage rows consume
            "ConsumedUnit": units.mask(credit),
            "ContractedCost": ledger["cost"],
            "EffectiveCost": ledger["cost"],
            "InvoiceIssuerName": ledger["cluster"],
            "ListCost": ledger["list_cost"].mask(credit, ledger["quantity"] * ledger["unit_price"]),
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
            **_services(ledger["resource"]),
            "SkuId": ledger["resource"].where(ledger["gpu_model"] == "", ledger["resource"] + "/" + ledger["gpu_model"]),
            "Tags": [json_text(_tags(row)) for row in ledger.itertuples()],
        },
        index=ledger.index,
    )


def _services(resource: pd.Series) -> dict[str, pd.Series]:
    """ServiceCategory, ServiceSubcategory and ServiceName of ledger resources as their registered resource gives
    them (storage's Storage); cost recovery, subsidies and monthly credits, of no one resource, are the clusters'
    Compute."""
    compute = REGISTRY[CPU]
    registered = resource.map(lambda name: REGISTRY.get(base(name), compute))
    return {column: registered.map(lambda found, field=field: getattr(found, field))
            for column, field in SERVICE_COLUMNS.items()}


def _columns_13(ledger: pd.DataFrame, focus: pd.DataFrame) -> dict[str, pd.Series]:
    """The columns FOCUS 1.3 adds to every ledger row's: the cluster as service and host provider; the SkuId as
    SkuPriceId (one price per SKU and day) and what it meters."""
    return {"HostProviderName": ledger["cluster"], "ServiceProviderName": ledger["cluster"],
            "SkuPriceId": focus["SkuId"], "SkuMeter": ledger["resource"].map(base).map(RESOURCE_WORDS)}


# the origin charge's dimensions an allocated row keeps (ROW_KEY less the namespace, which a pool's row has)
ORIGIN = ["day", "cluster", "team", "resource", "gpu_model"]
AMOUNTS = ["quantity", "cost", "list_cost"]


def allocated_rows(ledger: pd.DataFrame) -> pd.DataFrame:
    """The origin charges of `broken_down` rows split into their allocated charges, as ledger rows (the origin's
    ROW_KEY, unit price, currency and AMOUNTS' parts) with `method`, `ratio` and what each charges: the
    `allocated` namespace and its `allocated_owner` (None for the part no one used).

    A pool's or a quota's capacity row is split by the hours the namespaces its team credits used of it
    (`_capacity_parts`); a team's unrequested rows of a resource on a cluster and day are its share of the
    cluster's unrequested capacity, split over its namespaces as the ledger has it (`_unrequested_parts`).
    """
    kind = ledger["resource"].map(_kind)
    rows = [parts for parts in (_capacity_parts(ledger[kind.isin(CAPACITY)], ledger[kind.isin([CREDIT, LENT])]),
                                _unrequested_parts(ledger[kind == UNREQUESTED])) if len(parts)]
    if not rows:
        return pd.DataFrame(columns=ledger.columns)
    return pd.concat(rows, ignore_index=True).sort_values([*ORIGIN, "namespace", "allocated"], na_position="last",
                                                          ignore_index=True)


def _per_row(rows: pd.DataFrame) -> pd.DataFrame:
    """Ledger rows summed over the workloads `broken_down` split them into: one per ROW_KEY."""
    return rows.astype({amount: float for amount in AMOUNTS}).groupby(list(ROW_KEY), as_index=False, sort=True).agg(
        **{amount: (amount, "sum") for amount in AMOUNTS}, unit_price=("unit_price", "first"),
        currency=("currency", "first"), owner=("owner", "first"))


def _capacity_parts(capacity: pd.DataFrame, credits: pd.DataFrame) -> pd.DataFrame:
    """Each capacity row split by the hours used of its team's capacity of a resource (`_pool_key`): a
    namespace's part is the hours its credits give back over the capacity's hours (billing credits a team's
    pools or queues together, so a namespace's hours are spread over them by their capacity); the rest, the
    hours no one used, is the unallocated part."""
    if capacity.empty:
        return pd.DataFrame()
    origins = _per_row(capacity)
    origins["method"] = origins["resource"].map(_kind).map(ALLOCATIONS)
    held = origins.groupby(_pool_key(origins))["quantity"].transform("sum")
    key = ["day", "cluster", "team", "base", "gpu_model"]
    used = credits.assign(base=credits["resource"].map(base), hours=-credits["quantity"].astype(float)) \
        .groupby([*key, "namespace"], as_index=False).agg(hours=("hours", "sum"), allocated_owner=("owner", "first"))
    parts = origins.assign(base=origins["resource"].map(base), held=held).merge(
        used.rename(columns={"namespace": "allocated"}), on=key, how="left")
    total = parts.groupby(list(ROW_KEY))["hours"].transform("sum")
    parts["ratio"] = (parts["hours"] / parts["held"].where(parts["held"] >= total, total)).fillna(0.0)
    return _with_rest(parts[parts["allocated"].notna()], origins)


def _unrequested_parts(unrequested: pd.DataFrame) -> pd.DataFrame:
    """A team's share of a cluster's unrequested capacity of a resource and GPU model on a day, split over its
    namespaces by their hours of it (the ledger's rows: billing shares the capacity by what each namespace paid
    on the cluster that day)."""
    if unrequested.empty:
        return pd.DataFrame()
    parts = _per_row(unrequested).rename(columns={"namespace": "allocated", "owner": "allocated_owner"})
    groups = parts.groupby(ORIGIN, sort=False)
    totals, count = groups[AMOUNTS].transform("sum"), groups["quantity"].transform("size")
    parts["ratio"] = (parts["quantity"] / totals["quantity"].where(totals["quantity"] != 0)).fillna(1 / count)
    parts[AMOUNTS] = totals[AMOUNTS]  # the origin's amounts, split again by the ratio below
    origins = parts.drop_duplicates(ORIGIN).assign(namespace="", method=UNREQUESTED_SHARE)  # the cluster's
    return _with_rest(parts.assign(namespace="", method=UNREQUESTED_SHARE), origins)


def _with_rest(parts: pd.DataFrame, origins: pd.DataFrame) -> pd.DataFrame:
    """The allocated parts of origin charges at their ratio of its AMOUNTS, and each origin's rest (its part no
    one is allocated, the AMOUNTS less the parts' so that they add up exactly) where there is one."""
    key = [*ORIGIN, "namespace"]
    # each part to the billionth, as the ledger's sums count money (money.total)
    parts = parts.assign(**{amount: (parts[amount] * parts["ratio"]).round(9) for amount in AMOUNTS})
    given = parts.groupby(key, as_index=False)[[*AMOUNTS, "ratio"]].sum()
    rest = origins.drop(columns=["ratio"], errors="ignore").merge(given, on=key, how="left", suffixes=("", "_given"),
                                                                  validate="one_to_one")
    rest = rest.assign(**{amount: rest[amount] - rest[f"{amount}_given"].fillna(0.0) for amount in AMOUNTS},
                       ratio=1.0 - rest["ratio"].fillna(0.0), allocated=None, allocated_owner=None)
    unallocated = rest["ratio"] > RATIO_EPSILON
    # of an origin used in full, what rounding its parts left (a billionth or so) goes to its largest part
    left = rest.loc[~unallocated, [*key, *AMOUNTS]]
    largest = parts.loc[parts.groupby(key, sort=False, dropna=False)["ratio"].idxmax(), key].reset_index()
    topped = largest.merge(left, on=key)
    parts.loc[topped["index"], AMOUNTS] += topped[AMOUNTS].to_numpy()
    rest = rest[unallocated]
    columns = [*ROW_KEY, *AMOUNTS, "unit_price", "currency", "method", "ratio", "allocated", "allocated_owner"]
    return pd.concat([parts[columns], rest[columns]], ignore_index=True).assign(owner=None, workload="", labels=None)


RATIO_EPSILON = 1e-12  # a rest below this is what floating point left of an origin used in full


def _allocated_charges(allocated: pd.DataFrame) -> pd.DataFrame:
    """`allocated_rows` as FOCUS 1.3 rows: the origin charge's columns (`_charges`) with the origin as resource
    and its tags, and the split cost allocation columns."""
    focus = _charges(allocated)
    kind = allocated["resource"].map(_kind)
    unrequested = kind == UNREQUESTED
    model = ("/" + allocated["gpu_model"]).where(allocated["gpu_model"] != "", "")
    what = allocated["namespace"].where(~unrequested, "unrequested") + "/" + allocated["resource"].map(base) + model
    named = allocated["allocated"].notna()
    # a namespace whose owner is on k teams is charged to each of them (docs/spec.md): k allocated resources, told
    # apart by the team, so that an AllocatedResourceId is unique within its origin's ResourceId and ChargePeriod
    resource_id = allocated["cluster"] + "/" + what
    shared = named & pd.DataFrame({"id": resource_id, "day": allocated["day"], "allocated": allocated["allocated"]}
                                  ).duplicated(keep=False)
    allocated_name = allocated["allocated"].where(~shared, allocated["allocated"].fillna("") + "/" + allocated["team"])
    return focus.assign(
        **_columns_13(allocated, focus),
        ChargeDescription=[_unrequested_description(row) if split else description for row, split, description
                           in zip(allocated.itertuples(), unrequested, focus["ChargeDescription"])],
        ResourceId=resource_id,
        ResourceName=what,
        ResourceType=kind.map({RESERVED: "Reserved pool", QUOTA: "Kueue quota", UNREQUESTED: "Unrequested capacity"}),
        Tags=[_origin_tags(row) for row in allocated.itertuples()],
        AllocatedMethodId=allocated["method"],
        AllocatedMethodDetails=[json.dumps({"Elements": [{"AllocatedRatio": ratio}]}) for ratio in allocated["ratio"]],
        AllocatedResourceId=(allocated["cluster"] + "/" + allocated_name.fillna("")).where(named, None),
        AllocatedResourceName=allocated_name.where(named, None),
        AllocatedTags=pd.Series([_allocated_tags(row) for row in allocated.itertuples()], index=allocated.index,
                                dtype=object),
    )


def _origin_tags(row) -> str:
    """An allocated charge's Tags, its origin's: cluster, team, ledger resource, GPU model, the pool or quota."""
    tags = {"cluster": row.cluster, "team": row.team, "resource": row.resource}
    if row.gpu_model:
        tags["gpu_model"] = row.gpu_model
    if row.namespace:
        tags["capacity"] = row.namespace
    return json_text(_prefixed(tags))


def _allocated_tags(row) -> str | None:
    """An allocated charge's AllocatedTags: the namespace it charges and its owner; none on the unallocated part."""
    if not isinstance(row.allocated, str):
        return None
    owner = {"owner": row.allocated_owner} if isinstance(row.allocated_owner, str) else {}
    return json_text(_prefixed({"namespace": row.allocated} | owner))


def _unrequested_description(row) -> str:
    model = f" of {row.gpu_model}" if row.gpu_model else ""
    return (f"team {row.team}'s share of the unrequested {RESOURCE_WORDS[base(row.resource)]}{model} capacity of "
            f"cluster {row.cluster}")


def _pool_key(ledger: pd.DataFrame) -> list[pd.Series]:
    """A team's capacity of a resource and GPU model on a cluster and day: the credits of a namespace's use are
    one row per team, whichever of its pools or queues it used (the lent credits are the lending team's)."""
    return [ledger["day"], ledger["cluster"], ledger["team"], ledger["resource"].map(base), ledger["gpu_model"]]


def recovery_rows(recovered: pd.DataFrame, zone: ZoneInfo, version: str = DEFAULT_VERSION) -> pd.DataFrame:
    """Cost recovery lines of closed months, with what corrections of their days moved (ledger.read.read_recovery:
    month, team, cluster, kind, amount, currency) as FOCUS rows of their own: ChargeCategory Adjustment over the whole
    month, no quantity or price, on the team's account. No split in FOCUS 1.3 either: `billing close` splits a
    cluster's month over teams, but FOCUS's allocated charges keep their origin's billing account. A closed month's
    subsidies and monthly credits likewise, as ChargeCategory Credit."""
    periods = periods_of(recovered["month"], zone)
    kind = recovered["kind"]
    focus = _lump_sums(recovered, version, category=kind.map(lambda k: "Adjustment" if k == RECOVERY else "Credit"),
                       frequency="Recurring", sku=kind,
                       description=kind.map(lambda k: CREDIT_WORDS.get(k, "cost recovery").lower()) + " of cluster "
                       + recovered["cluster"] + ": " + kind.map(lambda k: CREDIT_MEANINGS.get(
                           k, "the team's share of the month's cost less the month's charges on it")),
                       tags=[{"kind": k} for k in kind], meter=kind.map(lambda k: CREDIT_WORDS.get(k, "cost recovery")))
    # the charge period is the month: from its first day's start to the next month's
    focus = focus.join(periods.assign(ChargePeriodStart=periods["BillingPeriodStart"],
                                      ChargePeriodEnd=periods["BillingPeriodEnd"])).assign(
        InvoiceId=invoice_ids(recovered["cluster"], recovered["month"], recovered["team"]), InvoiceDetailId=kind)
    return focus[FOCUS_COLUMNS[version]].reset_index(drop=True)


def correction_rows(corrections: pd.DataFrame, zone: ZoneInfo, version: str = DEFAULT_VERSION) -> pd.DataFrame:
    """Corrections of closed months' days (ledger.read.read_corrections) as FOCUS rows: each one `booked` in the
    range as a row of ChargeClass Correction in the billing period it is invoiced in (the month it is booked in),
    and each one `left_out` of the invoice of the month of a day in the range (whose rows are the ledger's as
    corrected) as an Adjustment of the opposite amount in that month, so that each month's rows add up to its
    statement, each day's to the ledger; both over the corrected day, or a cost recovery correction over its month
    (docs/reports.md "The FOCUS export")."""
    booked = corrections[corrections["booked"].astype(bool)]
    left_out = corrections[corrections["left_out"].astype(bool)]
    rows = [part for part in (
        _corrections(booked, booked["month"], zone, version, correction=True),
        _corrections(left_out.assign(amount=-left_out["amount"]), left_out["corrects"].map(lambda d: d.replace(day=1)),
                     zone, version, correction=False)) if len(part)]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=FOCUS_COLUMNS[version])


def _corrections(corrections: pd.DataFrame, invoiced: pd.Series, zone: ZoneInfo, version: str, correction: bool
                 ) -> pd.DataFrame:
    """Corrections as FOCUS rows of the month `invoiced` (a month's first day per correction): the Correction
    that month's statement books, or the Adjustment that leaves it out of the corrected month's."""
    if corrections.empty:
        return pd.DataFrame(columns=FOCUS_COLUMNS[version])
    resource, day = corrections["resource"], corrections["corrects"]
    kind = resource.map(lambda name: "recovery" if name == RECOVERY else _kind(name))
    what = resource.map(lambda name: "cost recovery" if name == RECOVERY else RESOURCE_WORDS[base(name)])
    when = day.map(lambda d: f"{d:%Y-%m-%d}") + " (run again after " + day.map(lambda d: f"{d:%Y-%m}") + " was invoiced)"
    category = kind.map(lambda k: "Adjustment" if k == "recovery" else "Credit" if k in (CREDIT, LENT) else "Usage")
    focus = _lump_sums(
        corrections, version, sku=resource, meter=what,
        category=category if correction else "Adjustment",
        frequency=kind.map(lambda k: "Recurring" if k == "recovery" else "Usage-Based") if correction else "One-Time",
        description=("correction of " + when + ": " + what + " on cluster " + corrections["cluster"]) if correction
        else ("what the re-run of " + when + " changed in " + what + " on cluster " + corrections["cluster"]
              + ", invoiced as a correction in " + corrections["month"].map(lambda m: f"{m:%Y-%m}")),
        tags=[{"kind": "correction" if correction else "corrected-later", "corrects": f"{d:%Y-%m-%d}", "resource": r}
              for d, r in zip(day, resource)])
    # the charge period is when the corrected charge was incurred: the day; a cost recovery line's, its month
    days, months = periods_of(day, zone), periods_of(day.map(lambda d: d.replace(day=1)), zone)
    recovery = kind == "recovery"
    periods = pd.DataFrame({"ChargePeriodStart": days["ChargePeriodStart"].mask(recovery, months["BillingPeriodStart"]),
                            "ChargePeriodEnd": days["ChargePeriodEnd"].mask(recovery, months["BillingPeriodEnd"])}
                           ).join(periods_of(invoiced, zone)[["BillingPeriodStart", "BillingPeriodEnd"]])
    # a booked correction is its own line of the invoice booking it; what one left out of the corrected month's
    # invoice is part of the line of its resource there (its cost recovery line for a recovery correction)
    focus = focus.join(periods).assign(ChargeClass="Correction" if correction else None,
                                       InvoiceId=invoice_ids(corrections["cluster"], invoiced, corrections["team"]),
                                       InvoiceDetailId=correction_lines(resource, day) if correction else resource)
    return focus[FOCUS_COLUMNS[version]].reset_index(drop=True)


def _lump_sums(amounts: pd.DataFrame, version: str, category: str | pd.Series, frequency: str | pd.Series,
               sku: str | pd.Series, description: str | pd.Series, tags: list[dict[str, str]],
               meter: str | pd.Series = "cost recovery") -> pd.DataFrame:
    """Amounts on a team's account of a cluster (team, cluster, amount, currency) as FOCUS charges with no
    quantity or price: the cluster their resource, provider and invoice issuer; all but the periods and InvoiceId."""
    cluster, team = amounts["cluster"], amounts["team"]
    focus = pd.DataFrame(
        {
            "BilledCost": amounts["amount"],
            "BillingAccountId": team,
            "BillingAccountName": team,
            "BillingCurrency": amounts["currency"],
            "ChargeCategory": category,
            "ChargeClass": None,
            "ChargeDescription": description,
            "ChargeFrequency": frequency,
            "ConsumedQuantity": None,
            "ConsumedUnit": None,
            "ContractedCost": amounts["amount"],
            "EffectiveCost": amounts["amount"],
            "InvoiceIssuerName": cluster,
            "ListCost": amounts["amount"],
            "ListUnitPrice": None,
            "PricingCategory": None,
            "PricingQuantity": None,
            "PricingUnit": None,
            "ProviderName": cluster,
            "PublisherName": cluster,
            "ResourceId": cluster,
            "ResourceName": cluster,
            "ResourceType": "Cluster",
            **_services(sku if isinstance(sku, pd.Series) else pd.Series(sku, index=amounts.index)),
            "SkuId": sku,
            "Tags": [json_text(_prefixed({"cluster": c, "team": t} | more)) for c, t, more in zip(cluster, team, tags)],
        },
        index=amounts.index,
    )
    if version != "1.2":
        focus = focus.assign(HostProviderName=cluster, ServiceProviderName=cluster, SkuPriceId=None, SkuMeter=meter,
                             **{column: None for column in ALLOCATION_COLUMNS})
    return focus


NUMBERS = ["BilledCost", "ConsumedQuantity", "ContractedCost", "EffectiveCost", "ListCost", "ListUnitPrice",
           "PricingQuantity"]  # FOCUS's Decimal columns billing writes
DATE_TIMES = ["BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart",  # and FOCUS 1.4's:
              "BillingPeriodCreated", "BillingPeriodLastUpdated", "InvoiceDetailCreated", "InvoiceDetailLastUpdated",
              "InvoiceIssueDate", "PaymentDueDate"]


def typed(focus: pd.DataFrame) -> pd.DataFrame:
    """FOCUS rows (of any dataset) with each column of its FOCUS data type whatever its values: Decimal columns
    doubles (without a negative zero), Date/Time UTC timestamps, the others text, also where every row is null (a
    column of Parquet type null is no String)."""
    numbers = [column for column in focus.columns if column in NUMBERS]
    dates = [column for column in focus.columns if column in DATE_TIMES]
    text = [column for column in focus.columns if column not in NUMBERS and column not in DATE_TIMES]
    return focus.astype({column: float for column in numbers} | {column: "string" for column in text}) \
        .assign(**{column: lambda rows, column=column: rows[column] + 0.0 for column in numbers},
                **{column: lambda rows, column=column: pd.to_datetime(rows[column], utc=True) for column in dates})


def _decimal(number: object) -> str:
    """A double as the Numeric Format has it: digits and a decimal point, no exponent (9.166666666666667e-05
    is 0.00009166666666666667), as many digits as tell the double apart; a whole number with its `.0`, so that a
    reader guessing types (the FOCUS validator's) sees a decimal column, not an integer one."""
    return np.format_float_positional(float(number), trim="0")  # type: ignore[arg-type]  # a double: to_csv's floats


def write_focus(focus: pd.DataFrame, output: Path | None, stdout: IO[str]) -> None:
    """Parquet to a `.parquet` file, else CSV (to stdout without a file).

    CSV writes numbers as plain decimals, date/times in FOCUS's UTC format and null as an empty field, and a
    text cell that starts like a formula (= + - @) with a leading quote, as the reports do; Parquet keeps the
    types and the text as it is: decimals as doubles, date/times as UTC timestamps, the rest strings.
    """
    focus = typed(focus)
    if output is not None and output.suffix.lower() == ".parquet":
        if find_spec("pyarrow") is None:  # pandas writes Parquet with it
            raise ParquetUnavailable("Parquet output needs pyarrow: pip install 'billing[parquet]', or write CSV")
        focus.to_parquet(output, index=False)
    else:  # text a spreadsheet would run as a formula (a team named =HYPERLINK(...)) stays text
        text = [column for column in focus.columns if column not in NUMBERS and column not in DATE_TIMES]
        safe = focus.assign(**{column: focus[column].map(spreadsheet_safe, na_action="ignore") for column in text})
        safe.to_csv(output or stdout, index=False, date_format=TIME_FORMAT, float_format=_decimal)
