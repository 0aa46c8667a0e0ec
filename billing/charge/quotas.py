"""Kueue quotas billed as reserved capacity (docs/spec.md "Kueue quotas").

From Kueue's quota series at each instant (billing/collect/kueue.py): per ClusterQueue, flavor and resource,
what it borrowed (admitted usage above its nominal quota) and what each queue of its cohort lent it (in proportion
to what each could lend then, never more), integrated over the day. The ledger then gets, per queue of a team:

* `quota-<resource>`: the nominal quota's hours at the day's price, under the namespace `quota:<queue>`;
* `credit-<resource>`: negative, the part of its namespaces' charged use that was within the quota, to its team;
* `lent-<resource>`: negative, the part that was borrowed, to the teams of the queues that lent it.

What was borrowed and lent by no team stays in the borrower's rows; `unlent_borrowing` says how much, for the pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from billing import frames
from billing.charge.pricing import unit_price
from billing.collect.kueue import LENDING_LIMIT, NOMINAL, USAGE
from billing.config import ClusterConfig, Kueue, Prices
from billing.resources import CPU, CREDIT, GPU, LENT, MEMORY, QUOTA, QUOTA_PREFIX

GIB = 2**30
KEY = ["resource", "gpu_model"]  # what a price is per (docs/spec.md "Rule 6: price")
UNLENT = "unlent"  # `_shares`' kind of a borrowed part no team lent (no ledger row: the borrower keeps paying it)
HOURS = ["cluster_queue", *KEY, "nominal", "used", "borrowed"]  # quota_hours' first frame
LENT_HOURS = ["lender", "cluster_queue", *KEY, "lent"]  # its second


def billed_as(resource: str, flavor: str, kueue: Kueue, gpu_fractions: dict[str, float]) -> tuple[str, str, float] | None:
    """(billing resource, GPU model, billing units per Kueue unit) of a Kueue resource of a flavor; None for what
    billing does not bill (pods, ephemeral-storage). Kueue names `nvidia.com/gpu` as Kubernetes does; billing's
    GPU resources are kube-state-metrics' spelling, `nvidia_com_gpu`."""
    if resource == "cpu":
        return CPU, "", 1.0
    if resource == "memory":
        return MEMORY, "", 1 / GIB
    name = resource.replace(".", "_").replace("/", "_").replace("-", "_")
    if name in gpu_fractions:
        return GPU, kueue.flavors.get(flavor, ""), gpu_fractions[name]
    return None


def queue_remarks(kueue: Kueue, found: Iterable[str]) -> list[str]:
    """What would surprise in the ClusterQueues the store reports (`found`) against those the config lists: a queue
    billed to nobody, a listed queue without a series, a namespace under two queues. `billing check` says them, and
    the night's log as warnings."""
    found = set(found)
    remarks = [f"ClusterQueue {queue} maps to no team: its quota is billed to nobody (list it in clusters[].kueue.queues)"
               for queue in sorted(found - set(kueue.queues))]
    remarks += [f"ClusterQueue {queue} of clusters[].kueue.queues has no quota series" for queue in sorted(set(kueue.queues) - found)]
    listed: dict[str, list[str]] = {}
    for queue in sorted(kueue.queues):
        for namespace in kueue.queues[queue].namespaces:
            listed.setdefault(namespace, []).append(queue)
    return remarks + [f"namespace {namespace} is listed under {' and '.join(queues)}: it counts as {queues[0]}'s"
                      for namespace, queues in sorted(listed.items()) if len(queues) > 1]


def unpriced_flavors(samples: pd.DataFrame, cluster: ClusterConfig, prices: Prices,
                     gpu_fractions: dict[str, float]) -> list[str]:
    """One sentence per flavor in which a listed queue holds GPUs (samples: collect/kueue.SAMPLES) that
    `kueue.flavors` gives no GPU model that `prices.gpu_models` prices. Its quota would be priced at `gpu_hour` under
    another model than its queues' use, which then is not credited against it: the team pays quota and use twice."""
    kueue = cluster.kueue
    assert kueue is not None  # asked only for a cluster with `kueue`
    held = samples[samples["cluster_queue"].isin(kueue.queues) & (samples["value"] > 0)]
    queues: dict[str, set[str]] = {}
    for queue, flavor, resource in zip(held["cluster_queue"], held["flavor"], held["resource"]):
        if (billed_as(resource, flavor, kueue, gpu_fractions) or ("",))[0] == GPU:
            queues.setdefault(flavor, set()).add(queue)
    key = cluster.key("kueue.flavors")
    sentences = []
    for flavor, holding in sorted(queues.items()):
        queue = sorted(holding)
        named = (f"ClusterQueue {queue[0]} holds" if len(queue) == 1 else
                 f"ClusterQueues {', '.join(queue[:-1])} and {queue[-1]} hold") + f" GPUs of flavor {flavor}"
        model = kueue.flavors.get(flavor, "")
        if not model:
            sentences.append(f"{named}, which {key} does not name: add {flavor} with the GPU model its nodes have")
        elif model not in prices.gpu_models:
            sentences.append(f"{named}, whose model {model} ({key}.{flavor}) the cluster's prices do not list in "
                             f"gpu_models: price it there, or name the model its nodes have")
    return sentences


def quota_hours(samples: pd.DataFrame, step: int, kueue: Kueue,
                gpu_fractions: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per queue and billing key, the day's nominal, used and borrowed hours (HOURS); and per lender, borrower and
    key the hours lent (LENT_HOURS). samples: collect/kueue.SAMPLES of one cluster-day."""
    if samples.empty:
        return pd.DataFrame(columns=HOURS), pd.DataFrame(columns=LENT_HOURS)
    keys = ["cohort", "cluster_queue", "flavor", "resource", "t"]
    wide = samples.pivot_table(index=keys, columns="family", values="value", aggfunc="max").reset_index()
    wide = wide.reindex(columns=[*keys, NOMINAL, USAGE, LENDING_LIMIT])
    nominal, used = wide[NOMINAL].fillna(0.0), wide[USAGE].fillna(0.0)
    wide["borrowed"] = (used - nominal).clip(lower=0.0)
    idle = (nominal - used).clip(lower=0.0)
    lendable = idle.where(idle < wide[LENDING_LIMIT].fillna(np.inf), wide[LENDING_LIMIT])
    wide["lendable"] = lendable.where(wide["cohort"] != "", 0.0)  # a queue without a cohort lends to nobody
    wide["nominal"], wide["used"] = nominal, used
    # the cohort's borrowing at each instant, lent in proportion to what each of its queues could lend
    same = ["cohort", "flavor", "resource", "t"]
    totals = wide.groupby(same)[["lendable", "borrowed"]].transform("sum")
    wide["divisor"] = np.maximum(totals["lendable"], totals["borrowed"])
    lenders = wide.loc[wide["lendable"] > 0, [*same, "cluster_queue", "lendable"]].rename(columns={"cluster_queue": "lender"})
    borrowers = wide.loc[wide["borrowed"] > 0, [*same, "cluster_queue", "borrowed", "divisor"]]
    pairs = borrowers.merge(lenders, on=same)
    pairs["lent"] = pairs["borrowed"] * pairs["lendable"] / pairs["divisor"]

    hours = step / 3600

    def in_billing_units(frame: pd.DataFrame, measures: list[str], by: list[str]) -> pd.DataFrame:
        frame = frame.groupby([*by, "flavor", "resource"], as_index=False)[measures].sum()
        found = [billed_as(r, f, kueue, gpu_fractions) for r, f in zip(frame["resource"], frame["flavor"])]
        frame = frame.loc[np.array([b is not None for b in found], dtype=bool)].copy()
        billed = [b for b in found if b is not None]
        frame["resource"] = [resource for resource, _, _ in billed]
        frame["gpu_model"] = [model for _, model, _ in billed]
        for measure in measures:
            frame[measure] = frame[measure] * [units for _, _, units in billed] * hours
        return frame.groupby([*by, *KEY], as_index=False)[measures].sum()

    return (in_billing_units(wide, ["nominal", "used", "borrowed"], ["cluster_queue"])[HOURS],
            in_billing_units(pairs, ["lent"], ["lender", "cluster_queue"])[LENT_HOURS])


def quota_rows(hours: pd.DataFrame, lent: pd.DataFrame, rows: pd.DataFrame, cluster: ClusterConfig,
               prices: Prices) -> pd.DataFrame:
    """The cluster's ledger rows of Kueue quotas (frames.ROWS): each listed queue's quota to its team, and credits
    of its namespaces' charged rows (`rows`, the day's priced rows of what namespaces requested) to the queue's
    team for use within the quota and to the lenders' teams for what was borrowed."""
    kueue = cluster.kueue
    if kueue is None or hours.empty:
        return pd.DataFrame(columns=frames.ROWS.columns)
    teams = {queue: q.team for queue, q in kueue.queues.items()}
    listed = hours[hours["cluster_queue"].isin(teams)]
    quota = listed[listed["nominal"] > 0].assign(
        cluster=cluster.name, namespace=QUOTA_PREFIX + listed["cluster_queue"], owner=None,
        team=listed["cluster_queue"].map(teams), quantity=listed["nominal"])
    quota["resource"] = QUOTA + quota["resource"]
    quota["unit_price"] = [unit_price(prices, r.removeprefix(QUOTA), m) for r, m in zip(quota["resource"], quota["gpu_model"])]
    quota["cost"] = quota["list_cost"] = quota["quantity"] * quota["unit_price"]

    charged = _shares(hours, lent, rows, cluster)
    charged = charged[charged["kind"] != UNLENT]
    credits = charged.assign(team=charged["to"], resource=charged["kind"] + charged["resource"],
                             quantity=-charged["quantity"] * charged["share"], cost=-charged["cost"] * charged["share"])
    credits["list_cost"] = credits["cost"]
    keys: Any = [*frames.ROWS.columns[:6], "unit_price"]  # a namespace's teams' credits go to one team: one row
    credits = credits.groupby(keys, dropna=False, as_index=False)[["quantity", "cost", "list_cost"]].sum()
    parts = [frame[frames.ROWS.columns] for frame in (quota, credits) if len(frame)]
    if not parts:
        return pd.DataFrame(columns=frames.ROWS.columns)
    return pd.concat(parts, ignore_index=True).sort_values(frames.ROWS.columns[:6], ignore_index=True)


def unlent_borrowing(hours: pd.DataFrame, lent: pd.DataFrame, rows: pd.DataFrame, cluster: ClusterConfig) -> pd.DataFrame:
    """The part of the queues' namespaces' charged rows (`rows`) that was borrowed and lent by no team: beyond what the
    cohort could lend, or lent by a queue the config does not list. The borrower pays it and nobody is credited, so
    the ledger's chargeback rows do not tell it apart; the pages show it (frames.UNLENT, per namespace and key)."""
    if cluster.kueue is None or hours.empty:
        return frames.UNLENT.empty()
    charged = _shares(hours, lent, rows, cluster)
    charged = charged[charged["kind"] == UNLENT]
    charged = charged.assign(quantity=charged["quantity"] * charged["share"], cost=charged["cost"] * charged["share"])
    keys: Any = frames.UNLENT.columns[:6]  # a namespace's rows at several prices (priority classes): one row
    return charged.groupby(keys, dropna=False, as_index=False)[["quantity", "cost"]].sum()[frames.UNLENT.columns]


def _shares(hours: pd.DataFrame, lent: pd.DataFrame, rows: pd.DataFrame, cluster: ClusterConfig) -> pd.DataFrame:
    """The queues' namespaces' charged rows, each once per part of it that goes back to someone (`share` of it, `to`
    which team, `kind`: CREDIT within the quota, LENT to a lender's team) or that was borrowed and lent by no team
    (UNLENT, `to` None: the row's own team keeps paying it). Of what Kueue admitted only: use beyond its figures, work it did not admit,
    stays charged by requests."""
    assert cluster.kueue is not None
    teams = {queue: q.team for queue, q in cluster.kueue.queues.items()}
    queue_of = cluster.kueue.queue_of()
    charged = rows[(rows["cluster"] == cluster.name) & rows["namespace"].isin(queue_of)]
    charged = charged.assign(cluster_queue=charged["namespace"].map(queue_of))
    measured = charged.groupby(["cluster_queue", *KEY])["quantity"].sum().rename("measured")
    listed = hours[hours["cluster_queue"].isin(teams)].merge(measured.reset_index(), on=["cluster_queue", *KEY])
    used = listed["used"].where(listed["used"] > 0)  # NaN where Kueue saw no use: no share at all
    admitted = (listed["used"] / listed["measured"]).clip(upper=1.0)
    within = listed.assign(share=(admitted * (1 - listed["borrowed"] / used)).fillna(0.0),
                           to=listed["cluster_queue"].map(teams), kind=CREDIT)
    lending = lent[lent["lender"].isin(teams)].merge(listed.assign(admitted=admitted, used=used),
                                                     on=["cluster_queue", *KEY])
    lending = lending.assign(share=(lending["admitted"] * lending["lent"] / lending["used"]).fillna(0.0),
                             to=lending["lender"].map(teams), kind=LENT)
    credited = lending.groupby(["cluster_queue", *KEY])["lent"].sum().rename("credited")
    unlent = listed.merge(credited.reset_index(), on=["cluster_queue", *KEY], how="left").fillna({"credited": 0.0})
    unlent = unlent.assign(share=(admitted * (unlent["borrowed"] - unlent["credited"]) / used).fillna(0.0), to=None,
                           kind=UNLENT)
    shares = pd.concat([within, lending, unlent], ignore_index=True)
    # what rounding leaves of fully lent borrowing is no part
    shares = shares[(shares["share"] > 0) & ((shares["kind"] != UNLENT) | (shares["share"] > 1e-12))]
    shares = shares[["cluster_queue", *KEY, "share", "to", "kind"]]
    return charged.merge(shares, on=["cluster_queue", *KEY])
