"""Unit prices and costs (docs/spec.md "Rule 6: price" and docs/spec.md "Rule 8: cost"), discounts by priority class, reserved pools, shared unrequested capacity.

Besides the rows of what namespaces requested (resource cpu, memory, gpu),
the ledger holds rows of these resources:

* `reserved-<resource>`: a reserved pool's whole capacity, charged to the team
  that reserved it, under the namespace `pool:<name>`;
* `credit-<resource>`: negative, what a namespace was charged for using a
  reserved pool, credited to the pool's team (its own namespaces' use too,
  so that it pays the pool once);
* `unrequested-<resource>`: a share of the capacity no pod requested on a cluster with
  `unrequested: share`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from billing import frames
from billing.collect.capacity import KEYS as CAPACITY_KEYS
from billing.config import ClusterConfig, Prices
from billing.frames import require_columns
from billing.resources import (
    CREDIT,
    GPU,
    OFFERED,
    POOL_PREFIX,
    REGISTRY,
    RESERVED,
    STORAGE,
    UNREQUESTED,
    base,
    single_strategy_slice,
)

log = logging.getLogger(__name__)

# what pricing reads of the collected usage (frames.USAGE, with the cluster)
USAGE_PRICED = ["cluster", "namespace", "resource", "gpu_model", "priority_class", "quantity"]


def unit_price(prices: Prices, resource: str, gpu_model: str) -> float:
    """Price of one resource-hour; a model (GPU model, storage class) without its own price pays the resource's
    (gpu_hour, storage_gib_hour).

    A model that names a MIG slice (single strategy) is billed in physical GPU-hours like any GPU: its own
    price is per slice-hour, so one physical GPU-hour of it costs that over the slice's fraction; without
    one it pays its whole GPU's price (docs/spec.md "GPU sharing")."""
    sliced = single_strategy_slice(gpu_model) if resource == GPU else None
    if sliced is not None:
        whole_gpu, _, fraction = sliced
        if gpu_model in prices.gpu_models:
            return prices.gpu_models[gpu_model] / fraction
        gpu_model = whole_gpu
    priced = model_price(prices, resource, gpu_model)
    if priced is None:  # refused before pricing (unpriced_models)
        raise ValueError(f"{resource} of model {gpu_model!r} has no price")
    return priced


def model_price(prices: Prices, resource: str, model: str) -> float | None:
    """The price of one resource-hour of a model (the resource's own where the model has none); None where neither
    is set (a storage class without a price and no `storage_gib_hour`). A kind of a resource (`unattributed-energy`)
    is priced as its resource."""
    registered = REGISTRY[base(resource)]
    return _by_model(prices, registered.models_key).get(model, getattr(prices, registered.price_key))


def _by_model(prices: Prices, models_key: str | None) -> dict[str, float]:
    """The set's prices per model of a resource (`gpu_models`, `storage_classes`); none for one without models."""
    return getattr(prices, models_key) if models_key else {}


def unpriced_models(usage: pd.DataFrame, prices: Prices, where: str) -> list[str]:
    """One sentence per resource and model in a cluster's usage (frames.USAGE) that has no price: the model is not
    in the resource's prices per model and the resource's own price is unset (docs/spec.md "Rule 6: price"); and one
    per model or priority class that a price names in another case only. The store's names are Kubernetes'
    (node labels, StorageClass and PriorityClass objects), case-sensitive: such a key is a typo that would bill the
    day at the resource's own price, or at full price. where: the key of the cluster's price set in force
    (`clusters[0].prices`)."""
    sentences = []
    for resource, model in sorted(set(zip(usage["resource"], usage["gpu_model"]))):
        registered = REGISTRY[resource]
        by_model = _by_model(prices, registered.models_key)
        misnamed = _spelled_otherwise(f"{registered.word} {registered.model_word}", model, by_model,
                                      f"{where}.{registered.models_key}") if model not in by_model else []
        sentences += misnamed
        if not misnamed and model_price(prices, resource, model) is None:
            sentences.append(f"{registered.word} {registered.model_word} {model or '(none)'} has no price: add it to "
                             f"{where}.{registered.models_key}, or set {where}.{registered.price_key} for every "
                             f"{registered.model_word} not listed")
    for priority_class in sorted(set(usage["priority_class"]) - set(prices.priority_classes)):
        sentences += _spelled_otherwise("priority class", priority_class, prices.priority_classes,
                                        f"{where}.priority_classes")
    return sentences


def _spelled_otherwise(what: str, name: str, keys: Iterable[str], where: str) -> list[str]:
    """The sentence refusing a name that `keys` hold in another case only (none where they do not)."""
    return [f"{what} {name} is not in {where}, which names {key}: names are case-sensitive, write it as the store "
            f"does ({name})" for key in keys if key.casefold() == name.casefold()][:1]


def price(usage: pd.DataFrame, ownership: pd.DataFrame, prices: dict[str, Prices],
          below: Sequence[str] = ()) -> pd.DataFrame:
    """Ledger rows: each namespace's usage split over its teams and priced per cluster.

    usage: USAGE_PRICED; ownership: frames.OWNERSHIP.
    A row keeps the whole quantity and the list unit_price (list_cost = quantity x unit_price);
    its cost is what was paid: each priority class's list cost times the class's multiplier.
    `below`: columns of the usage that break a namespace down further (workload, labels), kept apart.
    """
    require_columns(usage, [*USAGE_PRICED, *below], "usage to price")
    frames.OWNERSHIP.check(ownership, "ownership of namespaces")
    rows = usage.merge(ownership, on="namespace", how="left", validate="many_to_many")
    if rows["team"].isna().any():
        missing = sorted(rows.loc[rows["team"].isna(), "namespace"].unique())
        raise ValueError(f"namespaces without an owner: {missing[:5]}")  # a bug, never an input problem
    rows["quantity"] = rows["quantity"] * rows["share"]
    rows["multiplier"] = [prices[c].priority_classes.get(p, 1.0) for c, p in zip(rows["cluster"], rows["priority_class"])]
    keys = [*frames.ROWS.columns[:6], *below]
    # quantities per multiplier first, so that without discounts cost is exactly quantity x unit_price
    rows = rows.groupby([*keys, "multiplier"], dropna=False, as_index=False)[["quantity"]].sum()
    rows["unit_price"] = [
        unit_price(prices[c], r, m) for c, r, m in zip(rows["cluster"], rows["resource"], rows["gpu_model"])
    ]
    rows["cost"] = rows["quantity"] * rows["unit_price"] * rows["multiplier"]
    rows = rows.groupby([*keys, "unit_price"], dropna=False, as_index=False)[["quantity", "cost"]].sum()
    rows["list_cost"] = rows["quantity"] * rows["unit_price"]
    return rows[[*frames.ROWS.columns, *below]].sort_values(keys, ignore_index=True)


def reserve_pools(capacity: pd.DataFrame, usage: pd.DataFrame, ownership: pd.DataFrame,
                  clusters: list[ClusterConfig], prices: dict[str, Prices]) -> pd.DataFrame:
    """Ledger rows of reserved pools: each pool's whole capacity, and credits for its use, to the pool's team.

    capacity: cluster, resource, gpu_model, pool, allocatable, unit_price; usage, ownership and the day's prices
    per cluster as for `price`.
    A credit is what the namespace's teams were charged for the use (after discounts), and keeps its owner.
    """
    teams = {(c.name, pool): team for c in clusters if c.reserved_pools for pool, team in c.reserved_pools.teams.items()}
    pooled = []
    cluster: Any  # the group keys: a cluster's name and a pool's (pandas-stubs types them as Hashable)
    pool: Any
    for (cluster, pool), held in capacity[capacity["pool"] != ""].groupby(["cluster", "pool"]):
        reserved = held.assign(namespace=POOL_PREFIX + pool, team=teams[(cluster, pool)], owner=None,
                               resource=RESERVED + held["resource"], quantity=held["allocatable"])
        reserved["cost"] = reserved["list_cost"] = reserved["quantity"] * reserved["unit_price"]
        pooled.append(reserved[frames.ROWS.columns])
        used = usage[(usage["cluster"] == cluster) & (usage["pool"] == pool)]
        if len(used):
            charged = price(used, ownership, prices)
            pooled.append(charged.assign(team=teams[(cluster, pool)], resource=CREDIT + charged["resource"],
                                         quantity=-charged["quantity"], cost=-charged["cost"], list_cost=-charged["cost"]))
    if not pooled:
        return pd.DataFrame(columns=frames.ROWS.columns)
    keys = [*frames.ROWS.columns[:6], "unit_price"]  # a namespace's teams' credits go to one team: one row
    rows = pd.concat(pooled, ignore_index=True).groupby(keys, dropna=False, as_index=False)[["quantity", "cost", "list_cost"]]
    return rows.sum()[frames.ROWS.columns].sort_values(frames.ROWS.columns[:6], ignore_index=True)


def share_unrequested(capacity: pd.DataFrame, rows: pd.DataFrame, unallocated_team: str) -> pd.DataFrame:
    """Ledger rows that charge unrequested capacity to those who paid for the cluster, in proportion to their cost.

    capacity: cluster, resource, gpu_model, pool, unrequested, unit_price of the clusters that share it;
    a reserved pool's unrequested capacity is left out (its team pays the pool whole).
    rows: the day's priced rows. Each (namespace, team) gets an `unrequested-<resource>` row per
    unrequested resource and GPU model; that of a cluster nobody paid for goes to the unallocated team.
    """
    shared = []
    for cluster, unrequested in capacity[(capacity["unrequested"] > 0) & (capacity["pool"] == "")].groupby("cluster"):
        by_payer = rows[rows["cluster"] == cluster].groupby(["namespace", "team", "owner"], dropna=False, as_index=False)
        payers = by_payer[["cost"]].sum().query("cost > 0")
        if payers.empty:
            payers = pd.DataFrame({"namespace": [""], "team": [unallocated_team], "owner": [None], "cost": [1.0]})
        weights = payers.assign(weight=payers["cost"] / payers["cost"].sum()).drop(columns="cost")
        charged = weights.merge(unrequested, how="cross")
        charged["resource"] = UNREQUESTED + charged["resource"]
        charged["quantity"] = charged["unrequested"] * charged["weight"]
        charged["cost"] = charged["list_cost"] = charged["quantity"] * charged["unit_price"]
        shared.append(charged[frames.ROWS.columns])
    if not shared:
        return pd.DataFrame(columns=frames.ROWS.columns)
    return pd.concat(shared, ignore_index=True).sort_values(frames.ROWS.columns[:6], ignore_index=True)


def price_holdings(holdings: pd.DataFrame, ownership: pd.DataFrame, priced: pd.DataFrame) -> pd.DataFrame:
    """What each ledger `gpu` row held, per GPU resource: split over teams like the usage, and costed as
    the resource's share of the row's GPU-hours times the row's cost (so a row's holdings add up to it).

    holdings: cluster and frames.GPU_HELD; ownership as for `price`; priced: `price`'s rows.
    """
    rows = holdings.merge(ownership, on="namespace", how="left", validate="many_to_many")
    rows["held_hours"] = rows["held_hours"] * rows["share"]
    rows["gpu_hours"] = rows["gpu_hours"] * rows["share"]
    keys = ["cluster", "namespace", "team", "gpu_model"]
    rows = rows.groupby([*keys, "owner", "resource"], dropna=False, as_index=False)[["held_hours", "gpu_hours"]].sum()
    billed = priced[priced["resource"] == GPU].groupby(keys, as_index=False)[["quantity", "cost"]].sum()
    rows = rows.merge(billed, on=keys, how="left").fillna({"quantity": 0.0, "cost": 0.0})
    share = (rows["gpu_hours"] / rows["quantity"]).where(rows["quantity"] > 0, 0.0)
    rows["cost"] = rows["cost"] * share
    return rows[frames.HOLDINGS.columns].sort_values(frames.HOLDINGS.columns[:6], ignore_index=True)


def unrequested_capacity(allocatable: pd.DataFrame, usage: pd.DataFrame, prices: Prices, cluster: str) -> pd.DataFrame:
    """Per resource, GPU model and pool (frames.CAPACITY): allocatable, requested (the usage frame's total),
    unrequested and its cost.

    Unrequested is never negative: requests above allocatable (pods on nodes that
    export no allocatable) are logged, and count as none unrequested. A resource
    no node offers (Resource.offered_by_nodes) has no capacity: its requests are
    billed, and nothing of it is unrequested.
    """
    requested = usage[usage["resource"].isin(list(OFFERED))].groupby(CAPACITY_KEYS)["quantity"].sum().rename("requested")
    frame = allocatable.set_index(CAPACITY_KEYS).join(requested, how="outer").fillna(0.0).reset_index()
    over = frame[frame["requested"] > frame["allocatable"] * (1 + 1e-9)]
    row: Any  # a row of the frame's named columns (pandas-stubs types its fields as any scalar)
    for row in over.itertuples():
        log.warning("cluster %s: %.2f %s%s-hours requested but only %.2f allocatable%s; are some nodes missing "
                    "kube_node_status_allocatable?", cluster, row.requested, row.resource,
                    f" ({row.gpu_model})" if row.gpu_model else "", row.allocatable,
                    f" in pool {row.pool}" if row.pool else "")
    frame["unrequested"] = (frame["allocatable"] - frame["requested"]).clip(lower=0.0)
    frame["unit_price"] = [unit_price(prices, r, m) for r, m in zip(frame["resource"], frame["gpu_model"])]
    frame["unrequested_cost"] = frame["unrequested"] * frame["unit_price"]
    return frame.assign(cluster=cluster)[frames.CAPACITY.columns]


def unclaimed_storage(classes: pd.DataFrame, prices: Prices, cluster: str) -> pd.DataFrame:
    """Per storage class (frames.STORAGE_CAPACITY): the GiB-hours provisioned, claimed and unclaimed (collected as
    frames.STORAGE_CLASSES), and what the unclaimed would cost at the class's price; shown, never billed.

    A class no claim of the day used may have no price (the day's refusal of unpriced classes looks only at what is
    billed): its unit price and cost are NaN, which the ledger keeps as NULL, rather than refusing a day for what
    nobody pays."""
    priced = [model_price(prices, STORAGE, storageclass) for storageclass in classes["storageclass"]]
    frame = classes.assign(cluster=cluster, unit_price=[float("nan") if p is None else p for p in priced])
    return frame.assign(unclaimed_cost=frame["unclaimed"] * frame["unit_price"])[frames.STORAGE_CAPACITY.columns]
