"""A day's bill: the charging recipe (`bill_day`) and every frame it hands the ledger, in one value.

`bill_day` takes what collect produced for each cluster-day (billing/collect/day.py) and charges it: who owns each
namespace, what namespaces requested priced, reserved pools and Kueue quotas with their credits, unrequested capacity
shared where a cluster says so, the split below the namespace, what pods bound to a node held before they ran, and
the storage per class, unclaimed volumes priced but not billed.

The ledger writes a DayBill in one transaction (billing/ledger/write.py);
each frame is checked against its schema here, where it crosses from charging
to the ledger, so a frame missing a column fails before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pandas as pd

from billing import frames
from billing.charge.bound_pending import bill_sentences
from billing.charge.energy import share_unattributed
from billing.charge.ownership import assign_owners
from billing.charge.pricing import (
    price,
    price_holdings,
    reserve_pools,
    share_unrequested,
    unclaimed_storage,
    unpriced_models,
    unrequested_capacity,
)
from billing.charge.quotas import queue_remarks, quota_hours, quota_rows, unlent_borrowing, unpriced_flavors
from billing.charge.workloads import workload_costs
from billing.collect.day import CollectedDay
from billing.collect.kueue import NOMINAL
from billing.collect.promql import gpu_fractions
from billing.collect.waste import attribute_waste
from billing.config import Config, Prices
from billing.directory.people import Directory
from billing.errors import RunFailed
from billing.resources import ENERGY, UNATTRIBUTED_ENERGY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DayBill:
    """The day's chargeback rows and what is written beside them, for every cluster."""

    rows: pd.DataFrame  # frames.ROWS: what each team pays, per namespace, resource and GPU model
    capacity: pd.DataFrame = field(default_factory=frames.CAPACITY.empty)
    wasted: pd.DataFrame = field(default_factory=frames.CHARGED_WASTE.empty)  # held but not used, per team
    held: pd.DataFrame = field(default_factory=frames.HOLDINGS.empty)  # which GPU resources the `gpu` rows held
    # the rows and the waste below the namespace; None with workloads off
    workloads: pd.DataFrame | None = None
    workload_wasted: pd.DataFrame | None = None
    coverage: dict[str, float] = field(default_factory=dict)  # each cluster's share of the day with data
    # why a cluster's capacity is unknown (it has no `capacity` rows), for the clusters whose capacity is
    capacity_unknown: dict[str, str] = field(default_factory=dict)
    # what pods bound to a node held while Pending: in `rows` too where its cluster charges it
    bound_pending: pd.DataFrame = field(default_factory=frames.BOUND_PENDING_COSTS.empty)
    unlent: pd.DataFrame = field(default_factory=frames.UNLENT.empty)  # Kueue borrowing no team lent: shown only
    # persistent volumes per cluster and storage class, and what the unclaimed would cost: shown only
    storage: pd.DataFrame = field(default_factory=frames.STORAGE_CAPACITY.empty)
    # kWh and carbon per namespace and team, and its share of the unattributed where its cluster shares it; the
    # unattributed under namespace and team '': shown (billed in `rows` where a cluster prices energy)
    energy: pd.DataFrame = field(default_factory=frames.CHARGED_ENERGY.empty)

    def __post_init__(self) -> None:
        frames.ROWS.check(self.rows, "the day's ledger rows")
        frames.CAPACITY.check(self.capacity)
        frames.CHARGED_WASTE.check(self.wasted)
        frames.HOLDINGS.check(self.held)
        frames.BOUND_PENDING_COSTS.check(self.bound_pending)
        frames.UNLENT.check(self.unlent)
        frames.STORAGE_CAPACITY.check(self.storage)
        frames.CHARGED_ENERGY.check(self.energy)
        if self.workloads is not None:
            frames.WORKLOAD_COSTS.check(self.workloads)
        if self.workload_wasted is not None:
            frames.CHARGED_WORKLOAD_WASTE.check(self.workload_wasted)

    def cost(self, cluster: str | None = None) -> float:
        """What the day's rows cost, of one cluster or of all."""
        rows = self.rows if cluster is None else self.rows[self.rows["cluster"] == cluster]
        return float(rows["cost"].sum())


def bill_day(collected: Sequence[CollectedDay], prices: dict[str, Prices], directory: Directory,
             config: Config) -> DayBill:
    """Own and price (each cluster at the day's `prices`) what every cluster's store said about the day."""
    energy = pd.concat([c.energy.energy.assign(cluster=c.cluster.name) for c in collected if c.energy is not None]
                       or [frames.ENERGY.empty().assign(cluster="")], ignore_index=True)
    energy = share_unattributed(energy, [c.cluster.name for c in collected
                                         if c.energy_in_force is not None and c.energy_in_force.share_unattributed])
    usage = pd.concat([c.usage.usage.assign(cluster=c.usage.cluster) for c in collected] + [_billed_energy(energy, prices)],
                      ignore_index=True)
    capacity = pd.concat([_capacity(c, prices) for c in collected], ignore_index=True)
    wasted = pd.concat([c.wasted for c in collected], ignore_index=True)
    workload_wasted = pd.concat([c.workload_wasted for c in collected], ignore_index=True)
    pending = pd.concat([c.usage.bound_pending.assign(cluster=c.usage.cluster) for c in collected], ignore_index=True)
    ownership = assign_owners(pd.concat([usage["namespace"], wasted["namespace"], pending["namespace"],
                                         energy.loc[energy["namespace"] != "", "namespace"]]), directory,
                              config.namespaces)
    # what namespaces requested; reserved pools' capacity and credits; unrequested shared where a cluster says so
    rows = price(usage, ownership, prices)
    holdings = pd.concat([c.usage.holdings.assign(cluster=c.usage.cluster) for c in collected], ignore_index=True)
    held = price_holdings(holdings, ownership, rows)
    pool_rows = reserve_pools(capacity, usage, ownership, config.clusters, prices)
    kueue_rows, unlent = _quota_rows(config, prices, collected, rows)
    pool_rows = pd.concat([pool_rows, kueue_rows], ignore_index=True)
    sharing = [c.name for c in config.clusters if c.unrequested == "share"]
    shared_rows = share_unrequested(capacity[capacity["cluster"].isin(sharing)], rows, config.namespaces.unallocated_team)
    rows = pd.concat([rows, pool_rows, shared_rows], ignore_index=True)
    workloads = _workload_rows(config, prices, collected, ownership, rows)
    charging = [c.name for c in config.clusters if c.bound_pending == "charge"]
    bound_pending = price(pending, ownership, prices, below=["workload", "reason"])
    bound_pending = bound_pending.assign(charged=bound_pending["cluster"].isin(charging))
    for cluster, sentence in bill_sentences(bound_pending, rows):
        log.info("cluster %s: %s", cluster, sentence)
    return DayBill(rows, capacity, attribute_waste(wasted, ownership), held, workloads,
                   attribute_waste(workload_wasted, ownership) if workloads is not None else None,
                   {c.usage.cluster: c.usage.coverage for c in collected}, bound_pending=bound_pending, unlent=unlent,
                   capacity_unknown={c.usage.cluster: c.capacity_unknown for c in collected if c.capacity_unknown},
                   storage=_storage(collected, prices), energy=_charged_energy(energy, ownership, collected))


def refuse_unpriced(collected: CollectedDay, day: date, prices: Prices, config: Config) -> None:
    """Refuse a cluster-day whose usage holds a model without a price (a storage class neither `storage_classes` nor
    `storage_gib_hour` prices), or where a listed Kueue queue holds GPUs of a flavor without a priced model (its team
    would pay quota and use twice); warn of each queue billed to nobody or without a series. Asked as soon as the
    cluster is collected, before the directory is read."""
    cluster, quotas = collected.cluster, collected.quotas
    unpriced = unpriced_models(collected.usage.usage, prices, cluster.prices_key(day))
    if cluster.kueue is not None:
        unpriced += unpriced_flavors(quotas, cluster, prices, gpu_fractions(config.gpu_resources))
    if unpriced:
        raise RunFailed(f"cluster {cluster.name} on {day}: " + "; ".join(unpriced) + "; nothing was billed and the day "
                        "stays missing")
    if cluster.kueue is None:
        return
    for remark in queue_remarks(cluster.kueue, set(quotas.loc[quotas["family"] == NOMINAL, "cluster_queue"])):
        log.warning("cluster %s: %s", cluster.name, remark)


def _capacity(collected: CollectedDay, prices: dict[str, Prices]) -> pd.DataFrame:
    """The cluster's capacity (frames.CAPACITY): what its nodes offered, what pods requested of it and the rest
    priced; none where its allocatable capacity is unknown."""
    name = collected.cluster.name
    if collected.allocatable is None:
        return frames.CAPACITY.empty()
    capacity = unrequested_capacity(collected.allocatable, collected.usage.usage, prices[name], name)
    row: Any  # a row of the frame's named columns (pandas-stubs types its fields as any scalar)
    for row in capacity.groupby("resource")[["allocatable", "requested", "unrequested", "unrequested_cost"]].sum().itertuples():
        log.info("cluster %s: %s %.1f%% requested, %.2f of %.2f resource-hours unrequested (%.2f at list price)", name,
                 row.Index, 100 * row.requested / row.allocatable if row.allocatable else 0.0,
                 row.unrequested, row.allocatable, row.unrequested_cost)
    return capacity


def _storage(collected: Sequence[CollectedDay], prices: dict[str, Prices]) -> pd.DataFrame:
    """Every cluster's storage per class (frames.STORAGE_CAPACITY); none for a cluster without persistent volumes."""
    found = [unclaimed_storage(c.storage_classes, prices[c.cluster.name], c.cluster.name)
             for c in collected if len(c.storage_classes)]
    return pd.concat(found, ignore_index=True) if found else frames.STORAGE_CAPACITY.empty()


def _billed_energy(energy: pd.DataFrame, prices: dict[str, Prices]) -> pd.DataFrame:
    """The usage (frames.USAGE and cluster) of energy where a cluster prices it: each namespace's kWh (`energy`) and
    its share of the unattributed where the cluster shares it (`unattributed-energy`), the unattributed itself left
    out (shown, not billed); no priority-class discount, a pod's electricity being drawn all the same."""
    priced = [name for name, of_cluster in prices.items() if of_cluster.energy_kwh is not None]
    billed = energy[energy["cluster"].isin(priced) & (energy["namespace"] != "")]
    parts = pd.concat([billed.assign(resource=ENERGY, quantity=billed["gpu_kwh"] + billed["cpu_kwh"]),
                       billed.assign(resource=UNATTRIBUTED_ENERGY, quantity=billed["shared_kwh"])], ignore_index=True)
    parts = parts.assign(gpu_model="", priority_class="", pool="")[["cluster", *frames.USAGE.columns]]
    return parts[parts["quantity"] != 0]


def _charged_energy(energy: pd.DataFrame, ownership: pd.DataFrame, collected: Sequence[CollectedDay]) -> pd.DataFrame:
    """frames.CHARGED_ENERGY: each namespace's kWh and share of the unattributed split over its teams as its rows are,
    the unattributed under team '' (less what was shared), and grams of CO2e of each at the cluster's intensity in
    force (NaN without one, or where a part is unknown)."""
    owners = pd.concat([ownership[["namespace", "team", "share"]], pd.DataFrame({"namespace": [""], "team": [""],
                                                                                 "share": [1.0]})], ignore_index=True)
    charged = energy.merge(owners, on="namespace", how="left", validate="many_to_many")
    intensity = {c.cluster.name: c.energy_in_force.carbon_g_per_kwh for c in collected if c.energy_in_force is not None}
    for part in ("gpu_kwh", "cpu_kwh", "shared_kwh"):
        charged[part] = charged[part] * charged["share"]
    grams = charged["cluster"].map(lambda name: intensity.get(name)).astype(float)
    charged["carbon_g"] = (charged["gpu_kwh"] + charged["cpu_kwh"]) * grams
    charged["shared_carbon_g"] = charged["shared_kwh"] * grams
    keys, figures = ["cluster", "namespace", "team"], ["gpu_kwh", "cpu_kwh", "carbon_g", "shared_kwh", "shared_carbon_g"]
    return (charged.groupby(keys, as_index=False, dropna=False)[figures].sum(min_count=1)
            [frames.CHARGED_ENERGY.columns].sort_values(keys, ignore_index=True))


def _quota_rows(config: Config, prices: dict[str, Prices], collected: Sequence[CollectedDay],
                rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each Kueue cluster's quota rows and credits (docs/spec.md "Kueue quotas"), from its quotas at each instant;
    and what its queues' namespaces borrowed that no team lent (frames.UNLENT, shown on the pages)."""
    fractions = gpu_fractions(config.gpu_resources)
    billed, unlent = [], []
    for found in collected:
        cluster = found.cluster
        if cluster.kueue is not None:
            hours, lent = quota_hours(found.quotas, int(config.step), cluster.kueue, fractions)
            billed.append(quota_rows(hours, lent, rows, cluster, prices[cluster.name]))
            unlent.append(unlent_borrowing(hours, lent, rows, cluster))
    billed, unlent = [f for f in billed if len(f)], [f for f in unlent if len(f)]
    return (pd.concat(billed, ignore_index=True) if billed else frames.ROWS.empty(),
            pd.concat(unlent, ignore_index=True) if unlent else frames.UNLENT.empty())


def _workload_rows(config: Config, prices: dict[str, Prices], collected: Sequence[CollectedDay],
                   ownership: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame | None:
    """The day's rows split over workloads and cost labels; None with workloads off."""
    if not config.workloads.enabled:
        return None
    usage = pd.concat([c.usage.workloads.assign(cluster=c.usage.cluster) for c in collected
                       if c.usage.workloads is not None] or [pd.DataFrame(columns=["cluster", *frames.WORKLOAD_USAGE.columns])],
                      ignore_index=True)
    return workload_costs(usage, ownership, prices, rows, config.cost_labels)
