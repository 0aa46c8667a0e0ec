"""Storage that labs pay for: persistent volumes' GiB-hours per namespace and storage class (docs/spec.md "Storage").

A claim Bound at an instant holds its volume's capacity (its request where the volume is not known) in its class,
whether or not a pod mounts it. What a namespace's claims of one class hold is summed by the store at each of the
day's instants, so one range query per chunk answers per namespace and class (and workload), never per claim: a
resize shows at the instant its capacity does, which a figure per claim over the chunk would not. The same query
answers per class what the volumes provisioned and what those Released or Available held (shown, never billed), and
how many claims kube-state-metrics listed (none: the cluster has no claims, and is billed as before).

The rows are the usage's (frames.USAGE: resource STORAGE, the class in `gpu_model`), appended to the cluster's usage
by collect/day.py; charging prices them like every other row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from billing import frames
from billing.collect.asking import map_chunks
from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.figures import CLAIMS, STORAGE_BYTES, figure
from billing.collect.promql import (
    CLAIM_INFO,
    CLAIM_PHASE,
    CLAIM_REQUEST,
    MOUNTS,
    VOLUME_CAPACITY,
    VOLUME_INFO,
    VOLUME_PHASE,
    Queries,
    quote,
)
from billing.collect.usage import GIB, labels_json
from billing.resources import STORAGE

CLAIM = "namespace, persistentvolumeclaim"  # a claim, as kube-state-metrics labels it
BOUND = 'phase="Bound"'
UNCLAIMED_PHASES = "Released|Available"  # a volume whose claim was deleted (kept by Retain), or that none claimed
# the `figure` label of each part of the answer
CLAIMED, PROVISIONED, UNCLAIMED, LISTED = "claimed", "provisioned", "unclaimed", "claims"


@dataclass(frozen=True)
class StorageDay:
    """One cluster-day's storage: the usage rows of its bound claims, the same per workload (None with workloads off),
    and per class what its volumes held (frames.STORAGE_CLASSES); no rows on a day without claims."""

    usage: pd.DataFrame  # frames.USAGE
    workloads: pd.DataFrame | None  # frames.WORKLOAD_USAGE
    classes: pd.DataFrame  # frames.STORAGE_CLASSES
    # the preflight's branches (collect/preflight.py) the answers showed present, which it need not ask again: claims
    # listed; a claim Bound (so the phase family); a volume's capacity
    seen: frozenset[str] = frozenset()


class StorageQueries(Queries):
    """The query text of storage for one chunk of a cluster's day."""

    def read(self, metric: str, by: str, *matchers: str) -> str:
        """Per `by`, the family's value at each instant, its exporters' copies once (the largest)."""
        return f"max by ({by}) ({self.ksm.plain(self.latest(self.series(metric, *matchers)), ('namespace', 'pod'))})"

    def listed(self) -> str:
        """How many claims have a sample the chunk's instants can see (raw samples, as cheap as a query gets): a
        chunk without one asks nothing more."""
        return f"count({self.highest(self.series(CLAIM_INFO))})"

    def claims(self) -> str:
        """Per bound claim (namespace, persistentvolumeclaim, storageclass): the bytes it holds at each instant, its
        volume's capacity, or its request where no capacity of its volume is visible; a claim showing two volumes
        or classes at once (recreated within the lookback) once, at the largest."""
        info = self.read(CLAIM_INFO, f"{CLAIM}, storageclass, volumename")
        capacity = (f'max by (volumename) (label_replace({self.read(VOLUME_CAPACITY, "persistentvolume")}, '
                    '"volumename", "$1", "persistentvolume", "(.+)"))')
        request = self.read(CLAIM_REQUEST, CLAIM)
        # per info series (`or` keeps the request's where the left has no series of those labels): one figure each
        size = (f"max by ({CLAIM}, storageclass) (\n    {info} * on (volumename) group_left () {capacity}\n"
                f"  or\n    {info} * on ({CLAIM}) group_left () {request}\n)")
        bound = f"{self.read(CLAIM_PHASE, CLAIM, BOUND)} == 1"
        return f"topk by ({CLAIM}) (1, {size} and on ({CLAIM}) {bound})"

    def mounts(self) -> str:
        """Per claim and pod whose spec names it (namespace, persistentvolumeclaim, pod), value 1 at each instant."""
        return f"group by ({CLAIM}, pod) ({self.read(MOUNTS, f'{CLAIM}, pod, uid')})"

    def claimed(self, by_workload: bool) -> str:
        """Bytes of the bound claims at each instant per namespace and class; with `by_workload` only those no pod
        mounts then, the namespace's own (frames.UNATTRIBUTED): the mounted ones are `mounted`'s."""
        claims = self.claims()
        if not by_workload:
            return f"sum by (namespace, storageclass) ({claims})"
        alone = f"sum by (namespace, storageclass) ({claims} unless on ({CLAIM}) {self.mounts()})"
        return f'label_replace({alone}, "workload", {quote(frames.UNATTRIBUTED)}, "", "")'

    def mounted(self) -> str:
        """Per namespace, class and pod: the bytes-instants of the chunk that the bound claims it mounted held, each
        claim's bytes at an instant shared equally among the pods mounting it then. One figure per pod over the
        chunk (a subquery of the claim and mount families alone): the client takes each pod to its workload with
        the usage's answer, so that no query reads every pod's kube_pod_info at every instant."""
        mounts = self.mounts()
        shares = f"{mounts} / on ({CLAIM}) group_left () count by ({CLAIM}) ({mounts})"
        held = f"sum by (namespace, storageclass, pod) ({shares} * on ({CLAIM}) group_left (storageclass) {self.claims()})"
        return f"sum_over_time(({held})[{self.instants}:{self.step}])"

    def volumes(self, *matchers: str) -> str:
        """Bytes of the volumes (of the phases `matchers` keeps) at each instant per storage class."""
        capacity = self.read(VOLUME_CAPACITY, "persistentvolume")
        classes = self.read(VOLUME_INFO, "persistentvolume, storageclass")
        held = f"{classes} * on (persistentvolume) group_left () {capacity}"
        if matchers:
            held = f"({held}) and on (persistentvolume) ({self.read(VOLUME_PHASE, 'persistentvolume', *matchers)} == 1)"
        return f"sum by (storageclass) ({held})"

    def storage(self, by_workload: bool) -> str:
        """What storage asks at each instant, in one query, each part told apart by its `figure` label."""
        parts = {CLAIMED: self.claimed(by_workload), PROVISIONED: self.volumes(),
                 UNCLAIMED: self.volumes(f"phase=~{quote(UNCLAIMED_PHASES)}")}
        return "\nor ".join(f'label_replace({text}, "figure", "{name}", "", "")' for name, text in parts.items())


PodWorkloads = dict[tuple[str, str], str]  # (namespace, pod) -> its workload in one chunk (ClusterUsage.pod_workloads)


def collect_storage(context: ClusterDay, cost_labels: Sequence[str] | None = None,
                    pod_workloads: Sequence[PodWorkloads] = ()) -> StorageDay:
    """The cluster-day's storage (StorageDay). `cost_labels` (workloads enabled; may be empty): the rows also per
    workload, the pods mounting a claim taken to their workloads with `pod_workloads`, each chunk's (the usage's)."""
    day_chunks = context.chunks()
    by_workload = cost_labels is not None
    if by_workload and len(pod_workloads) != len(day_chunks):
        raise ValueError(f"storage per workload needs the workloads of each of the {len(day_chunks)} chunks' pods")
    cluster = context.cluster.name

    def ask(part: tuple[Chunk, PodWorkloads | None]) -> list[tuple]:
        chunk, workloads = part
        queries = StorageQueries(context.cluster, context.gpu_resources, chunk, context.store)
        listed = [_row({"figure": LISTED}, series["value"][1], cluster)
                  for series in context.source.instant(queries.listed(), chunk.last)]
        if not listed:
            return []
        answer = context.source.range(queries.storage(workloads is not None), chunk.start, chunk.last, chunk.step)
        rows = listed + [_row(series["metric"], value, cluster) for series in answer for _, value in series["values"]]
        if workloads is not None:
            instants = (chunk.end - chunk.start) // chunk.step
            for series in context.source.instant(queries.mounted(), chunk.last):
                labels = series["metric"]
                namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
                held = figure(series["value"][1], STORAGE_BYTES, labels, cluster, instants)
                rows.append((CLAIMED, namespace, workloads.get((namespace, pod), f"Pod/{pod}"),
                             labels.get("storageclass", ""), held))
        return rows

    parts: list[tuple[Chunk, PodWorkloads | None]] = list(zip(day_chunks, pod_workloads if by_workload
                                                                else [None] * len(day_chunks)))
    rows = [row for part in map_chunks(ask, parts) for row in part]
    return storage_day(rows, context.step, cost_labels)


def _row(labels: dict[str, str], value: str, cluster: str) -> tuple:
    """(figure, namespace, workload, storageclass, value) of one answer's value at one instant, through the gate."""
    name = labels.get("figure", "")
    family = CLAIMS if name == LISTED else STORAGE_BYTES
    shown = {label: text for label, text in labels.items() if label != "figure"}  # the series' own labels, not ours
    return (name, labels.get("namespace", ""), labels.get("workload", ""), labels.get("storageclass", ""),
            figure(value, family, shown, cluster))


def storage_day(rows: Sequence[tuple], step: int, cost_labels: Sequence[str] | None) -> StorageDay:
    """StorageDay from the store's values at each instant: rows of (figure, namespace, workload, storageclass, value),
    bytes at one instant (or, figure LISTED, a count of claims); each instant a step long. None of them without a
    claim listed at some instant: a cluster without claims bills as it did."""
    frame = pd.DataFrame(list(rows), columns=["figure", "namespace", "workload", "storageclass", "value"])
    frame = frame.astype({"value": float})
    if not (frame.loc[frame["figure"] == LISTED, "value"] > 0).any():
        return StorageDay(frames.USAGE.empty(), None if cost_labels is None else frames.WORKLOAD_USAGE.empty(),
                          frames.STORAGE_CLASSES.empty())
    shown = set(frame["figure"])
    seen = frozenset({"claim_info", *(["claim_phase"] if CLAIMED in shown else []),
                      *(["volume_capacity"] if PROVISIONED in shown else [])})
    held = frame[frame["figure"] != LISTED].assign(value=lambda f: f["value"] / GIB * step / 3600)  # GiB-hours
    claimed = held[held["figure"] == CLAIMED].assign(resource=STORAGE, gpu_model=lambda f: f["storageclass"],
                                                     priority_class="", pool="", quantity=lambda f: f["value"])
    usage = _summed(claimed, frames.USAGE.columns)
    workloads = None
    if cost_labels is not None:
        unlabelled = labels_json(("",) * len(cost_labels), tuple(cost_labels))
        workloads = _summed(claimed.assign(labels=unlabelled), frames.WORKLOAD_USAGE.columns)
    per_class = held.groupby(["storageclass", "figure"])["value"].sum().unstack("figure")
    classes = per_class.reindex(columns=[PROVISIONED, CLAIMED, UNCLAIMED]).fillna(0.0).rename_axis(columns=None)
    return StorageDay(usage, workloads, classes.reset_index()[frames.STORAGE_CLASSES.columns], seen)


def _summed(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """One row per key of `columns` (all but the quantity, summed), none of 0 GiB-hours."""
    summed = frame.groupby(columns[:-1], as_index=False, sort=True)[["quantity"]].sum()[columns]
    return summed[summed["quantity"] != 0].reset_index(drop=True)
