"""The ledger in the FinOps FOCUS 1.3 column layout (or 1.2, on request), for finance tools.

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
  as UTC instants of local midnights in the configured time zone;
* BilledCost, EffectiveCost and ContractedCost are the ledger's cost;
  ListCost is quantity x list price (the ledger's list_cost, but for a
  credit's): they differ by the discounts of pod priority classes
  (prices.priority_classes);
* cluster, namespace, team, owner, resource, GPU model and workload are also
  in Tags, under the provider-defined prefix `billing/`; the pod's cost labels
  (`cost_labels`) are user-defined tags under their own names, left out where
  the pod had no such label.

FOCUS 1.3 adds (docs/reports.md lists them):

* ServiceProviderName and HostProviderName, the cluster (it runs its own
  nodes, as far as billing knows); the deprecated ProviderName and
  PublisherName stay, as 1.3 still makes them mandatory, with the same value;
* SkuPriceId (the SkuId: one price per SKU and day) and SkuMeter, as 1.3
  nulls ListUnitPrice, PricingQuantity and ConsumedQuantity without a SkuPriceId;
* the split cost allocation columns on the rows that split a shared cost
  (`ALLOCATIONS`, and cost recovery lines): such an allocated charge's
  ResourceId and Tags are those of what was split (its origin charge), the
  namespace or team it charges is the AllocatedResourceId, that one's tags the
  AllocatedTags, and AllocatedMethodDetails holds the row's AllocatedRatio of
  the origin; the ratios of one origin add up to 1.
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
PROVIDER_COLUMNS = ["HostProviderName", "ServiceProviderName"]  # mandatory since FOCUS 1.3
ALLOCATION_COLUMNS = ["AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName",
                      "AllocatedTags"]
SKU_PRICE_COLUMNS = ["SkuMeter", "SkuPriceId"]
FOCUS_COLUMNS = {
    "1.2": sorted(MANDATORY_COLUMNS + CONDITIONAL_COLUMNS),
    "1.3": sorted(MANDATORY_COLUMNS + PROVIDER_COLUMNS + CONDITIONAL_COLUMNS + ALLOCATION_COLUMNS + SKU_PRICE_COLUMNS),
}
DEFAULT_VERSION = "1.3"

# AllocatedMethodId of each kind of row that splits a shared cost (docs/reports.md documents each method)
UNREQUESTED_SHARE, RESERVED_POOL, KUEUE_QUOTA, COST_RECOVERY = "billing/unrequested-share", "billing/reserved-pool", \
    "billing/kueue-quota", "billing/cost-recovery"
ALLOCATIONS = {UNREQUESTED: UNREQUESTED_SHARE, RESERVED: RESERVED_POOL, CREDIT: RESERVED_POOL, QUOTA: KUEUE_QUOTA,
               LENT: KUEUE_QUOTA}  # a credit on a Kueue cluster is its quota's (`_methods`)
CAPACITY = (RESERVED, QUOTA)  # the kinds of a team's capacity (a pool's, a quota's) that credits are split from

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


def _kind(resource: str) -> str:
    """The row's kind: "" for what a namespace requested, else RESERVED, CREDIT or UNREQUESTED."""
    return resource.removesuffix(base(resource))


def _prefixed(tags: dict[str, str]) -> dict[str, str]:
    return {TAG_PREFIX + key: value for key, value in tags.items()}


def _tag_sets(row) -> tuple[dict[str, str], dict[str, str]]:
    """The row's tags of what it charges (cluster, resource, GPU model) and of whom it charges (namespace, team,
    owner, workload, the pod's cost labels): FOCUS 1.3 keeps the second apart, as AllocatedTags, where the row is
    an allocated charge."""
    origin = {"cluster": row.cluster, "resource": row.resource}
    if row.gpu_model:
        origin["gpu_model"] = row.gpu_model
    charged = {"namespace": row.namespace, "team": row.team}
    if isinstance(row.owner, str):
        charged["owner"] = row.owner
    if isinstance(row.workload, str):
        charged["workload"] = row.workload
    labels = json.loads(row.labels) if isinstance(row.labels, str) else {}
    user = {name: value for name, value in labels.items() if value != ""}  # a pod without the label has no tag
    return _prefixed(origin), _prefixed(charged) | user


def _json(tags: dict[str, str]) -> str:
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
    }[_kind(row.resource)]


def _resource_type(resource: str) -> str:
    """What a row's namespace stands for: a reserved pool's or a Kueue quota's capacity, or a namespace."""
    return "Reserved pool" if resource.startswith(RESERVED) else "Kueue quota" if resource.startswith(QUOTA) else "Namespace"


def focus_rows(ledger: pd.DataFrame, zone: ZoneInfo, recovered: pd.DataFrame | None = None,
               version: str = DEFAULT_VERSION) -> pd.DataFrame:
    """Rows of `broken_down` as FOCUS rows of the version, one for one, in its FOCUS_COLUMNS order; then closed
    months' cost recovery lines (`recovery_rows`), each a row of its own.

    A credit's ListCost is its hours at list price, as FOCUS has ListCost = ListUnitPrice x PricingQuantity:
    the ledger's list_cost of a credit is what it gives back (its cost), so that statements show no discount on it.
    """
    units = ledger["resource"].map(base).map(PRICING_UNITS)
    credit = ledger["resource"].str.startswith((CREDIT, LENT))
    workload = ledger["workload"].map(_is_workload).astype(bool)
    namespace_type = ledger["resource"].map(_resource_type)
    tags = [_tag_sets(row) for row in ledger.itertuples()]
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
            "ServiceCategory": "Compute",
            "ServiceName": "Kubernetes",
            "ServiceSubcategory": "Containers",
            "SkuId": ledger["resource"].where(ledger["gpu_model"] == "", ledger["resource"] + "/" + ledger["gpu_model"]),
            "Tags": [_json(origin | charged) for origin, charged in tags],
        },
        index=ledger.index,
    )
    if version == "1.3":
        focus = focus.assign(**_ledger_columns_13(ledger, focus, tags))
    rows = focus.join(_periods(ledger["day"], zone))[FOCUS_COLUMNS[version]].reset_index(drop=True)
    if recovered is None or recovered.empty:
        return rows
    return pd.concat([rows, recovery_rows(recovered, zone, version)], ignore_index=True)


def _ledger_columns_13(ledger: pd.DataFrame, focus: pd.DataFrame,
                       tags: list[tuple[dict[str, str], dict[str, str]]]) -> dict[str, pd.Series | list[str]]:
    """What FOCUS 1.3 adds to or changes in the ledger rows' FOCUS columns.

    The rows that split a shared cost (ALLOCATIONS) are allocated charges: their resource is the origin
    charge's (a cluster's unrequested capacity, a team's reserved pools or Kueue quotas of a resource), their
    Tags its tags (cluster, resource, GPU model), and the namespace they charge is the AllocatedResourceId, its
    tags the AllocatedTags.
    """
    kind = ledger["resource"].map(_kind)
    method = _methods(ledger, kind)
    allocated = method.notna()
    origin = _origin_resources(ledger, kind, method)
    return {
        "HostProviderName": ledger["cluster"],
        "ServiceProviderName": ledger["cluster"],
        "SkuPriceId": focus["SkuId"],  # one price per SKU and day: the SKU is its price's id
        "SkuMeter": ledger["resource"].map(base).map(RESOURCE_WORDS),
        **{column: origin[column].where(allocated, focus[column]) for column in origin.columns},
        "Tags": focus["Tags"].where(~allocated, [
            _json(origin_tags | {TAG_PREFIX + "resource": base(resource)}) if split else None
            for (origin_tags, _), split, resource in zip(tags, allocated, ledger["resource"])]),
        **_allocation(method, _ledger_ratios(ledger, kind), ledger["cluster"], ledger["namespace"],
                      ledger["team"], [_json(charged) if split else None for (_, charged), split in zip(tags, allocated)]),
    }


def _methods(ledger: pd.DataFrame, kind: pd.Series) -> pd.Series:
    """Each row's AllocatedMethodId (None where it splits nothing): a credit is a Kueue quota's on a cluster-day
    with quota rows, else a reserved pool's (the config refuses a cluster with both)."""
    method = kind.map(ALLOCATIONS)
    day_cluster = pd.MultiIndex.from_arrays([ledger["day"], ledger["cluster"]])
    kueue = day_cluster.isin(day_cluster[(kind == QUOTA).to_numpy()])
    return method.mask((kind == CREDIT) & kueue, KUEUE_QUOTA)


def _pool_key(ledger: pd.DataFrame) -> list[pd.Series]:
    """The origin of a reserved pool's or a Kueue quota's rows: the team's capacity of a resource and GPU model on
    a cluster and day (the credits of a namespace's use are one row per team, whichever of its pools or queues it
    used; the lent credits are the lending team's)."""
    return [ledger["day"], ledger["cluster"], ledger["team"], ledger["resource"].map(base), ledger["gpu_model"]]


def _origin_resources(ledger: pd.DataFrame, kind: pd.Series, method: pd.Series) -> pd.DataFrame:
    """ResourceId, ResourceName, ResourceType of each allocated charge's origin: the cluster for a share of its
    unrequested capacity; the team's pools or quotas (`<cluster>/pool:a`, `<cluster>/quota:q`, or
    `pool:a+pool:b` for several) for their capacity rows and their credits."""
    origin = pd.DataFrame({"ResourceId": ledger["cluster"], "ResourceName": ledger["cluster"],
                           "ResourceType": "Cluster"}, index=ledger.index)
    pooled = kind.isin([*CAPACITY, CREDIT, LENT])
    if not pooled.any():
        return origin
    rows = ledger[pooled]
    capacity = rows["namespace"].where(kind[pooled].isin(CAPACITY))
    names = capacity.groupby(_pool_key(rows)).transform(lambda names: "+".join(sorted(names.dropna().unique())))
    names = names.where(names != "", rows["namespace"])  # no capacity row in the range: the row's own
    origin.loc[pooled, "ResourceId"] = rows["cluster"] + "/" + names
    origin.loc[pooled, "ResourceName"] = names
    origin.loc[pooled, "ResourceType"] = method[pooled].map({RESERVED_POOL: "Reserved pool", KUEUE_QUOTA: "Kueue quota"})
    return origin


def _ratios(share: pd.Series, origin: list[pd.Series]) -> pd.Series:
    """Each row's AllocatedRatio: its share over its origin's total (equal parts where the total is 0)."""
    groups = share.groupby(origin)
    total, count = groups.transform("sum"), groups.transform("size")
    return (share / total).where(total != 0, 1 / count)


def _ledger_ratios(ledger: pd.DataFrame, kind: pd.Series) -> pd.Series:
    """The AllocatedRatio of the allocated ledger rows (NaN for the others)."""
    pooled = kind.isin([*CAPACITY, CREDIT, LENT])
    return pd.concat([_unrequested_ratios(ledger[kind == UNREQUESTED]),
                      _pool_ratios(ledger[pooled], kind[pooled].isin(CAPACITY))]).reindex(ledger.index)


def _unrequested_ratios(rows: pd.DataFrame) -> pd.Series:
    """A share of a cluster's unrequested capacity of a resource and GPU model on a day: its part of the hours
    (billing splits them by what each namespace paid on the cluster that day)."""
    return _ratios(rows["quantity"], [rows["day"], rows["cluster"], rows["resource"], rows["gpu_model"]])


def _pool_ratios(rows: pd.DataFrame, capacity: pd.Series) -> pd.Series:
    """A team's reserved pools or Kueue quotas (`_pool_key`): each credit is the part of their hours a namespace
    used (it pays them in its own rows; a lent credit, the part it borrowed), each capacity row its pool's or
    quota's part of the hours no one used, which stay the team's; so the parts add up to 1."""
    quantity = rows["quantity"].astype(float)
    held = quantity.where(capacity, 0.0).groupby(_pool_key(rows)).transform("sum")
    used = (-quantity).where(~capacity, 0.0).groupby(_pool_key(rows)).transform("sum")
    kept = (1 - used / held.where(held != 0)).fillna(0.0)
    return _ratios(quantity.abs().where(~capacity, quantity * kept), _pool_key(rows))


def _allocation(method: pd.Series, ratio: pd.Series, cluster: pd.Series, namespace: pd.Series, team: pd.Series,
                charged_tags: list[str | None]) -> dict[str, pd.Series]:
    """FOCUS 1.3's split cost allocation columns, null where method is: what an allocated charge is split to is
    its namespace on the cluster, or the team where it has none."""
    allocated = method.notna()
    named = namespace.fillna("") != ""
    name = namespace.where(named, "team:" + team)
    return {
        "AllocatedMethodId": method.where(allocated, None),
        "AllocatedMethodDetails": ratio[allocated].map(lambda part: json.dumps({"Elements": [{"AllocatedRatio": part}]}))
                                                  .reindex(method.index),
        "AllocatedResourceId": (cluster + "/" + name).where(allocated, None),
        "AllocatedResourceName": name.where(allocated, None),
        "AllocatedTags": pd.Series(charged_tags, index=method.index).where(allocated, None),
    }


def recovery_rows(recovered: pd.DataFrame, zone: ZoneInfo, version: str = DEFAULT_VERSION) -> pd.DataFrame:
    """Cost recovery lines of closed months, with what corrections of their days moved (ledger.read.read_recovery:
    month, team, cluster, amount, currency) as FOCUS rows of their own: ChargeCategory Adjustment over the whole
    month, no quantity or price. In FOCUS 1.3 each is an allocated charge: its cluster's month split to its team."""
    periods = _periods(recovered["month"], zone)
    origin_tags = [{TAG_PREFIX + "cluster": cluster, TAG_PREFIX + "kind": "recovery"} for cluster in recovered["cluster"]]
    team_tags = [{TAG_PREFIX + "team": team} for team in recovered["team"]]
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
            "Tags": [_json(origin | team) for origin, team in zip(origin_tags, team_tags)],
        },
        index=recovered.index,
    )
    if version == "1.3":
        method = pd.Series(COST_RECOVERY, index=recovered.index)
        focus = focus.assign(
            HostProviderName=recovered["cluster"], ServiceProviderName=recovered["cluster"],
            SkuPriceId=None, SkuMeter="cost recovery", Tags=[_json(origin) for origin in origin_tags],
            **_allocation(method, _ratios(recovered["amount"], [recovered["month"], recovered["cluster"]]),
                          recovered["cluster"], pd.Series(None, index=recovered.index, dtype=object),
                          recovered["team"], [_json(team) for team in team_tags]))
    # the charge period is the month: from its first day's start to the next month's
    focus = focus.join(periods.assign(ChargePeriodStart=periods["BillingPeriodStart"],
                                      ChargePeriodEnd=periods["BillingPeriodEnd"]))
    return focus[FOCUS_COLUMNS[version]].reset_index(drop=True)


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
