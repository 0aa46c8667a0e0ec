"""Storage that labs pay for: persistent volumes' GiB-hours per namespace and storage class (docs/spec.md "Storage").

A claim Bound at an instant holds its volume's capacity (its request where the volume is not known) in its class,
whether or not a pod mounts it. Summed over a chunk's instants that is, per claim,

    size × (number of instants at which it is Bound)

wherever the claim is there at every instant with one class and one volume whose capacity stays the same, as a pod's
request times its Running instants (usage.py). So each chunk asks, in one instant query (`StorageQueries.facts`),
figures over the chunk per series of the claim and volume families, with no join: at how many instants each
claim's info series is visible and its Bound series is 1, each volume's capacity (its highest sample, at how many
instants it is visible) and class, and with workloads at how many instants each pod's mount of a claim is visible
and the most pods mounting a claim at one instant; and, kept by the store's own comparisons, what makes the
factoring wrong: a capacity that spread (a resize, a NaN), a phase value other than 0 or 1, a volume Released or
Available. The client multiplies the figures. Every claim or volume the factoring would get wrong (recreated,
rebound or reclassed within the chunk, resized, Bound or there at some instants only, reported by several
exporters at once, held unclaimed) goes to the exact path: the literal per-instant
join (`claimed`, `mounted`, `provisioned`) restricted to those claims and volumes by name, in pieces within
promql.QUERY_BYTES. A chunk without claims asks nothing more than whether it has any (`listed`). On the generated
day of 300 pods the night's storage reads touch 0.65 times the samples of the bill's floor, where the per-instant
join of every claim touched 0.76 (and cost Prometheus more CPU than the floor at 5,000 pods, joining at each of
1,440 instants).

Per workload, a claim Bound at every instant that no two pods mount at once is each mounting pod's for the instants
its mount series is visible and the namespace's own (frames.UNATTRIBUTED) for the rest; one of one size that pods
share (two or more mount it at some instant: a team's dataset its Jobs mount) is shared at each instant among the
pods mounting it then, on the client, from its mount series at each instant (a range query of the mount family
alone, naming it): joining its bytes and the shares at every instant in the store cost Prometheus more CPU than
the bill's floor at 5,000 pods. Each pod is taken to its workload with the usage's answer, so that no query reads
every pod's kube_pod_info at every instant.

The rows are the usage's (frames.USAGE: resource STORAGE, the class in `gpu_model`), appended to the cluster's usage
by collect/day.py; charging prices them like every other row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import pandas as pd

from billing import frames
from billing.collect.asking import map_chunks
from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.figures import CLAIMS, PODS, STORAGE_BYTES, STORAGE_INSTANTS, ImpossibleFigure, figure
from billing.collect.prometheus import PrometheusError, PrometheusSource
from billing.collect.promql import (
    CLAIM_INFO,
    CLAIM_PHASE,
    CLAIM_REQUEST,
    MOUNTS,
    QUERY_BYTES,
    VOLUME_CAPACITY,
    VOLUME_INFO,
    VOLUME_PHASE,
    Queries,
    fits,
    node_matcher,
    quote,
)
from billing.collect.usage import GIB, labels_json
from billing.resources import STORAGE

CLAIM = "namespace, persistentvolumeclaim"  # a claim, as kube-state-metrics labels it
BOUND = 'phase="Bound"'
UNCLAIMED_PHASES = "Released|Available"  # a volume whose claim was deleted (kept by Retain), or that none claimed
# the `figure` label of each part of the answer
CLAIMED, PROVISIONED, UNCLAIMED, LISTED = "claimed", "provisioned", "unclaimed", "claims"


Claim = tuple[str, str]  # (namespace, persistentvolumeclaim)


@dataclass(frozen=True)
class ClaimSizes:
    """One chunk's claims as waste's unused storage needs them (collect/waste.py): the bytes each holds at every
    instant where the factoring holds (one size Bound throughout; 0 never Bound), and for the rest (the exact path:
    resized, recreated, Bound at some instants only) the volumes they were bound to, by which waste reads their size."""

    held: dict[Claim, float] = field(default_factory=dict)
    unsure: dict[Claim, list[str]] = field(default_factory=dict)


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
    sizes: tuple[ClaimSizes, ...] = ()  # per chunk of the day (ClusterDay.chunks), its claims' sizes: what waste takes


# the `figure` label of each part of `facts`' answer
INFO, BOUND_INSTANTS, EVER_BOUND, VISIBLE, HIGHEST, SPREAD, CLASS, RELEASED, MOUNTED, PEAK = (
    "info", "bound", "ever_bound", "visible", "highest", "spread", "class", "released", "mounted", "peak")


class StorageQueries(Queries):
    """The query text of storage for one chunk of a cluster's day: `facts`, figures over the chunk per series (the
    factoring's), and the exact path's per-instant joins, each restricted by matchers to the claims or volumes that
    need it."""

    def read(self, metric: str, by: str, *matchers: str) -> str:
        """Per `by`, the family's value at each instant, its exporters' copies once (the largest)."""
        return f"max by ({by}) ({self.ksm.plain(self.latest(self.series(metric, *matchers)), ('namespace', 'pod'))})"

    def listed(self) -> str:
        """How many claims have a sample the chunk's instants can see (raw samples, as cheap as a query gets): a
        chunk without one asks nothing more."""
        return f"count({self.highest(self.series(CLAIM_INFO))})"

    def visible(self, metric: str, *matchers: str, sum_values: bool = False) -> str:
        """Per series of the family, at how many of the chunk's instants it is visible (`sum_values`: its values
        summed over them): a subquery of the bare series, which the store evaluates without a join."""
        return self.ksm.plain(self.instants_seen(self.latest(self.series(metric, *matchers)), "", self.ksm, False,
                                                 sum_values), ("namespace", "pod"))

    def over_chunk(self, function: str, metric: str, *matchers: str) -> str:
        """Per series of the family, `function`_over_time of every raw sample the chunk's instants can see."""
        return self.ksm.plain(f"{function}_over_time({self.series(metric, *matchers)}[{self.raw}])", ("namespace",))

    def facts(self, by_workload: bool) -> str:
        """What the factoring needs, per series and over the chunk, in one query without a join (each part told apart
        by its `figure` label): the instants each claim's info is visible and its Bound series' values summed; each
        volume's capacity (highest sample, instants visible) and the instants its class is visible; with
        `by_workload` the instants each pod's mount of a claim is visible and the most pods mounting a claim at one
        instant. And what makes the factoring wrong, the store's comparison keeping only those series: a capacity
        that spread (or has a NaN among its samples), a Bound series with a sample of 1 or more (its highest: above 1
        is no phase value; none, and the claim was never Bound), a volume Released or Available."""
        unclaimed = f"phase=~{quote(UNCLAIMED_PHASES)}"
        parts = {INFO: self.visible(CLAIM_INFO), BOUND_INSTANTS: self.visible(CLAIM_PHASE, BOUND, sum_values=True),
                 EVER_BOUND: f"{self.over_chunk('max', CLAIM_PHASE, BOUND)} >= 1",
                 VISIBLE: self.visible(VOLUME_CAPACITY), HIGHEST: self.over_chunk("max", VOLUME_CAPACITY),
                 SPREAD: f"{self.over_chunk('stddev', VOLUME_CAPACITY)} != 0", CLASS: self.visible(VOLUME_INFO),
                 RELEASED: f"{self.over_chunk('max', VOLUME_PHASE, unclaimed)} >= 1"}
        if by_workload:
            mounting = f"count by ({CLAIM}) ({self.ksm.plain(self.latest(self.series(MOUNTS)), ('namespace', 'pod'))})"
            parts |= {MOUNTED: self.visible(MOUNTS), PEAK: f"max_over_time({mounting}[{self.instants}:{self.step}])"}
        return labelled(parts)

    def claims(self, named: str = "", volumes: str = "") -> str:
        """Per bound claim (namespace, persistentvolumeclaim, storageclass) of those `named` selects: the bytes it holds
        at each instant, its volume's capacity (of the volumes `volumes` selects), or its request where no capacity of
        its volume is visible; a claim showing two volumes or classes at once (recreated within the lookback) once,
        at the largest."""
        info = self.read(CLAIM_INFO, f"{CLAIM}, storageclass, volumename", named)
        capacity = (f'max by (volumename) (label_replace({self.read(VOLUME_CAPACITY, "persistentvolume", volumes)}, '
                    '"volumename", "$1", "persistentvolume", "(.+)"))')
        request = self.read(CLAIM_REQUEST, CLAIM, named)
        # per info series (`or` keeps the request's where the left has no series of those labels): one figure each
        size = (f"max by ({CLAIM}, storageclass) (\n    {info} * on (volumename) group_left () {capacity}\n"
                f"  or\n    {info} * on ({CLAIM}) group_left () {request}\n)")
        bound = f"{self.read(CLAIM_PHASE, CLAIM, BOUND, named)} == 1"
        return f"topk by ({CLAIM}) (1, {size} and on ({CLAIM}) {bound})"

    def mounts(self, named: str = "") -> str:
        """Per claim and pod whose spec names it (namespace, persistentvolumeclaim, pod), value 1 at each instant."""
        return f"group by ({CLAIM}, pod) ({self.read(MOUNTS, f'{CLAIM}, pod, uid', named)})"

    def claimed(self, by_workload: bool, named: str = "", volumes: str = "") -> str:
        """Per claim (`claims`), its bytes at each instant; with `by_workload` only at the instants no pod mounts it,
        the namespace's own (frames.UNATTRIBUTED): the mounted ones are `mounted`'s."""
        claims = self.claims(named, volumes)
        return f"{claims} unless on ({CLAIM}) {self.mounts(named)}" if by_workload else claims

    def mounted(self, named: str = "", volumes: str = "") -> str:
        """Per claim, class and pod: the bytes-instants of the chunk that the bound claim held while the pod mounted
        it, the claim's bytes at an instant shared equally among the pods mounting it then. One figure per pod over
        the chunk (a subquery of the claim and mount families alone): the client takes each pod to its workload with
        the usage's answer, so that no query reads every pod's kube_pod_info at every instant."""
        mounts = self.mounts(named)
        shares = f"{mounts} / on ({CLAIM}) group_left () count by ({CLAIM}) ({mounts})"
        held = (f"sum by ({CLAIM}, storageclass, pod) "
                f"({shares} * on ({CLAIM}) group_left (storageclass) {self.claims(named, volumes)})")
        return f"sum_over_time(({held})[{self.instants}:{self.step}])"

    def volumes(self, named: str, *matchers: str) -> str:
        """Bytes of the volumes `named` selects (of the phases `matchers` keeps) at each instant per storage class."""
        capacity = self.read(VOLUME_CAPACITY, "persistentvolume", named)
        classes = self.read(VOLUME_INFO, "persistentvolume, storageclass", named)
        held = f"{classes} * on (persistentvolume) group_left () {capacity}"
        if matchers:
            held = (f"({held}) and on (persistentvolume) "
                    f"({self.read(VOLUME_PHASE, 'persistentvolume', named, *matchers)} == 1)")
        return f"sum by (storageclass) ({held})"

    def provisioned(self, named: str) -> str:
        """Per class, what the volumes `named` selects held at each instant, and those of them Released or
        Available, each part told apart by its `figure` label."""
        return labelled({PROVISIONED: self.volumes(named),
                          UNCLAIMED: self.volumes(named, f"phase=~{quote(UNCLAIMED_PHASES)}")})


def labelled(parts: dict[str, str]) -> str:
    """One query of several parts, each part's series told apart by its `figure` label."""
    return "\nor ".join(f'label_replace({text}, "figure", "{name}", "", "")' for name, text in parts.items())


Named = TypeVar("Named", str, tuple[str, str])  # a volume's name, or a claim's namespace and name


def pieces(names: Iterable[Named], query: Callable[[list[Named]], str]) -> list[str]:
    """query(some of the names) for pieces of `names` that together hold each once, each query within QUERY_BYTES:
    many claims or volumes on the exact path cost more queries, never one that a store refuses."""
    held: list[list[Named]] = []
    for name in sorted(set(names)):
        if held and fits(query(held[-1] + [name])):
            held[-1].append(name)
            continue
        if not fits(query([name])):
            raise PrometheusError(f"a storage query for {name} alone is longer than {QUERY_BYTES} bytes")
        held.append([name])
    return [query(piece) for piece in held]


Series = tuple[dict[str, str], str]  # one series of an answer: its labels and its value


@dataclass
class ChunkFacts:
    """What `StorageQueries.facts` answered for one chunk, per claim and volume: the figures the factoring multiplies,
    and what would make it wrong."""

    instants: int  # the chunk's
    cluster: str
    info: dict[Claim, dict[tuple[str, str], float]] = field(default_factory=dict)  # (class, volume) -> instants seen
    bound: dict[Claim, list[Series]] = field(default_factory=dict)  # its Bound series' values summed
    ever_bound: dict[Claim, list[Series]] = field(default_factory=dict)  # its Bound series' highest samples, 1 or more
    visible: dict[str, float] = field(default_factory=dict)  # volume -> instants its capacity is visible
    highest: dict[str, set[str]] = field(default_factory=dict)  # volume -> its capacity series' highest samples
    spread: set[str] = field(default_factory=set)  # volumes whose capacity spread (NaN among the samples too)
    classes: dict[str, dict[str, float]] = field(default_factory=dict)  # volume -> class -> instants seen
    released: set[str] = field(default_factory=set)  # volumes Released or Available (a sample of 1 or more)
    mounted: dict[Claim, dict[str, list[Series]]] = field(default_factory=dict)  # pod -> instants it mounts it
    peak: dict[Claim, Series] = field(default_factory=dict)  # the most pods mounting it at one instant

    @classmethod
    def asked(cls, source: PrometheusSource, queries: StorageQueries, chunk: Chunk, by_workload: bool) -> ChunkFacts:
        facts = cls((chunk.end - chunk.start) // chunk.step, queries.cluster)
        for series in source.instant(queries.facts(by_workload), chunk.last):
            labels, value = series["metric"], series["value"][1]
            part, claim, volume = labels.get("figure"), claim_of(labels), labels.get("persistentvolume", "")
            if part == INFO:
                seen = facts.info.setdefault(claim, {})
                key = (labels.get("storageclass", ""), labels.get("volumename", ""))
                seen[key] = max(seen.get(key, 0.0), facts.count(value, labels))
            elif part == BOUND_INSTANTS:
                facts.bound.setdefault(claim, []).append((labels, value))
            elif part == EVER_BOUND:
                facts.ever_bound.setdefault(claim, []).append((labels, value))
            elif part == VISIBLE:
                facts.visible[volume] = max(facts.visible.get(volume, 0.0), facts.count(value, labels))
            elif part == HIGHEST:
                facts.highest.setdefault(volume, set()).add(value)
            elif part == SPREAD:
                facts.spread.add(volume)
            elif part == CLASS:
                of_class = facts.classes.setdefault(volume, {})
                name = labels.get("storageclass", "")
                of_class[name] = max(of_class.get(name, 0.0), facts.count(value, labels))
            elif part == RELEASED:
                facts.released.add(volume)
            elif part == MOUNTED:
                facts.mounted.setdefault(claim, {}).setdefault(labels.get("pod", ""), []).append((labels, value))
            elif part == PEAK:
                facts.peak[claim] = (labels, value)
        return facts

    def count(self, value: str, labels: dict[str, str]) -> float:
        """A count of the chunk's instants, through its gate."""
        return figure(value, STORAGE_INSTANTS, labels, self.cluster)

    def bound_instants(self, claim: Claim) -> float | None:
        """At how many of the chunk's instants the claim is Bound where that is none (every sample of its Bound series
        below 1) or all of them (its one Bound series, none above 1, summing to their number); None otherwise
        (several exporters' copies, or values other than 0 and 1)."""
        highest, bound = self.ever_bound.get(claim, []), self.bound.get(claim, [])
        if not highest:
            return 0.0
        try:
            if len(highest) != 1 or len(bound) != 1 or self.count(highest[0][1], highest[0][0]) != 1:
                return None
            counted = self.count(bound[0][1], bound[0][0])
        except ImpossibleFigure:  # an infinite phase, a NaN summed
            return None
        return counted if counted == self.instants else None

    def size(self, volume: str) -> float | None:
        """The volume's capacity where it is one figure visible at every instant of the chunk (each copy's samples the
        same, none spread: a NaN spreads as NaN), through the gate; None otherwise."""
        highest = self.highest.get(volume, set())
        if (len(highest) != 1 or self.visible.get(volume) != self.instants
                or volume in self.spread):
            return None
        return figure(next(iter(highest)), STORAGE_BYTES, {"persistentvolume": volume}, self.cluster)

    def claims(self) -> set[Claim]:
        return set(self.info) | set(self.bound)

    def claim(self, claim: Claim) -> tuple[str, float, float] | None:
        """(class, bytes, instants Bound) of a claim the factoring gets right ('', 0, 0 for one never Bound): Bound at
        every instant, one info series visible at each, its volume's `size`; None for the exact path."""
        bound = self.bound_instants(claim)
        if bound == 0:
            return "", 0.0, 0.0
        held = self.info.get(claim, {})
        if bound is None or len(held) != 1:
            return None
        [((storageclass, volume), seen)] = held.items()
        size = self.size(volume) if seen == self.instants else None
        return None if size is None else (storageclass, size, bound)

    def shares(self, claim: Claim) -> dict[str, float] | None:
        """Per pod mounting the claim (Bound at every instant), the instants it did: where no two mount series of the
        claim are visible at one instant, the instants of each pod's series (a pod recreated under its name has one
        per uid) add up; None for the exact path where two are (pods sharing it, or an exporter's copies)."""
        pods = self.mounted.get(claim, {})
        if not pods:
            return {}
        if claim not in self.peak or figure(self.peak[claim][1], PODS, self.peak[claim][0], self.cluster) > 1:
            return None
        return {pod: sum(self.count(value, labels) for labels, value in series) for pod, series in pods.items()}

    def volumes(self) -> set[str]:
        return set(self.classes) & set(self.visible)  # a volume without both is in no class's figures

    def volume(self, volume: str) -> tuple[str, float] | None:
        """(class, bytes-instants provisioned) of a volume the factoring gets right: one class visible at every instant,
        its `size`, never Released or Available (every sample of those phases below 1); None for the exact path,
        which a volume held unclaimed in the chunk takes (few are)."""
        classes = self.classes.get(volume, {})
        size = self.size(volume)
        if len(classes) != 1 or size is None or volume in self.released:
            return None
        [(storageclass, seen)] = classes.items()
        return (storageclass, size * self.instants) if seen == self.instants else None

    def volumes_of(self, claims: list[Claim]) -> list[str]:
        """The volumes these claims were bound to in the chunk."""
        return [volume for claim in claims for _, volume in self.info.get(claim, {}) if volume]

    def sizes(self) -> ClaimSizes:
        """Each claim's bytes where the factoring gets it right (`claim`), else the volumes it was bound to."""
        sizes = ClaimSizes()
        for claim in self.claims():
            held = self.claim(claim)
            if held is None:
                sizes.unsure[claim] = self.volumes_of([claim])
            else:
                sizes.held[claim] = held[1]
        return sizes


def claim_of(labels: dict[str, str]) -> Claim:
    return labels.get("namespace", ""), labels.get("persistentvolumeclaim", "")


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

    def ask(part: tuple[Chunk, PodWorkloads | None]) -> tuple[list[tuple], ClaimSizes]:
        chunk, workloads = part
        queries = StorageQueries(context.cluster, context.gpu_resources, chunk, context.store)
        listed = [_row(LISTED, series["metric"], series["value"][1], cluster)
                  for series in context.source.instant(queries.listed(), chunk.last)]
        if not listed:
            return [], ClaimSizes()
        rows, sizes = _chunk_rows(context.source, queries, chunk, workloads)
        return listed + rows, sizes

    parts: list[tuple[Chunk, PodWorkloads | None]] = list(zip(day_chunks, pod_workloads if by_workload
                                                                else [None] * len(day_chunks)))
    asked = map_chunks(ask, parts)
    day = storage_day([row for rows, _ in asked for row in rows], context.step, cost_labels)
    return replace(day, sizes=tuple(sizes for _, sizes in asked))


def _chunk_rows(source: PrometheusSource, queries: StorageQueries, chunk: Chunk,
                workloads: PodWorkloads | None) -> tuple[list[tuple], ClaimSizes]:
    """A chunk's rows (figure, namespace, workload, storageclass, bytes-instants): each claim's and volume's figures
    multiplied where the factoring is right (`ChunkFacts`), the rest from the exact path, restricted to them; and its
    claims' sizes (ChunkFacts.sizes)."""
    facts = ChunkFacts.asked(source, queries, chunk, workloads is not None)
    own = "" if workloads is None else frames.UNATTRIBUTED
    rows: list[tuple] = []
    exact: set[Claim] = set()
    shared: dict[Claim, tuple[str, float, float]] = {}  # claims of one size, Bound throughout, that pods share
    for claim in facts.claims():
        held = facts.claim(claim)
        shares = None if held is None else {} if workloads is None or not held[2] else facts.shares(claim)
        if held is None:
            exact.add(claim)
            continue
        if shares is None:
            shared[claim] = held
            continue
        (namespace, _), (storageclass, size, bound) = claim, held
        for pod, instants in shares.items():
            workload = workloads.get((namespace, pod), f"Pod/{pod}") if workloads is not None else ""
            rows.append((CLAIMED, namespace, workload, storageclass, size * instants))
        if alone := bound - sum(shares.values()):
            rows.append((CLAIMED, namespace, own, storageclass, size * alone))
    if exact:
        rows += _exact_claims(source, queries, chunk, facts, exact, workloads)
    if shared and workloads is not None:
        rows += _shared_claims(source, queries, chunk, shared, workloads)
    unsure = []
    for volume in facts.volumes():
        if (figures := facts.volume(volume)) is None:
            unsure.append(volume)
            continue
        rows.append((PROVISIONED, "", "", figures[0], figures[1]))
    for query in pieces(unsure, lambda piece: queries.provisioned(node_matcher(piece, "persistentvolume"))):
        for series in source.range(query, chunk.start, chunk.last, chunk.step):
            rows += [_row(series["metric"].get("figure", ""), series["metric"], value, queries.cluster)
                     for _, value in series["values"]]
    return rows, facts.sizes()


def _exact_claims(source: PrometheusSource, queries: StorageQueries, chunk: Chunk, facts: ChunkFacts, exact: set[Claim],
                  workloads: PodWorkloads | None) -> list[tuple]:
    """The rows of the claims the factoring would get wrong, instant by instant (and per pod mounting them, over the
    chunk), asked by name in pieces: another namespace's claim of the same name is left out here."""
    def named(piece: list[Claim]) -> tuple[str, str]:
        """Matchers keeping the claims of these namespaces and names, and the volumes these claims were bound to."""
        return claims_named(piece, queries), node_matcher(facts.volumes_of(piece), "persistentvolume")

    rows = []
    own = "" if workloads is None else frames.UNATTRIBUTED
    for query in pieces(exact, lambda piece: queries.claimed(workloads is not None, *named(piece))):
        for series in source.range(query, chunk.start, chunk.last, chunk.step):
            if claim_of(series["metric"]) in exact:
                rows += [_row(CLAIMED, series["metric"], value, queries.cluster, own) for _, value in series["values"]]
    mounted = [claim for claim in exact if claim in facts.mounted]
    if workloads is None or not mounted:
        return rows
    for query in pieces(mounted, lambda piece: queries.mounted(*named(piece))):
        for series in source.instant(query, chunk.last):
            labels = series["metric"]
            if claim_of(labels) in exact:
                namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
                held = figure(series["value"][1], STORAGE_BYTES, labels, queries.cluster, facts.instants)
                rows.append((CLAIMED, namespace, workloads.get((namespace, pod), f"Pod/{pod}"),
                             labels.get("storageclass", ""), held))
    return rows


def _shared_claims(source: PrometheusSource, queries: StorageQueries, chunk: Chunk,
                   shared: dict[Claim, tuple[str, float, float]], workloads: PodWorkloads) -> list[tuple]:
    """The rows of claims of one size, Bound at every instant, that two or more pods mount at some instant (a dataset
    a team's Jobs share): at each instant the claim's bytes shared equally among the pods mounting it then, and
    the instants none does the namespace's own. The pods mounting each claim at each instant come from the mount
    family alone, asked by name as a range query (no join: joined at every instant, claims' bytes and shares cost
    Prometheus more than the bill's floor); the sharing is done here."""
    mounting: dict[Claim, dict[float, list[str]]] = {claim: {} for claim in shared}  # instant -> pods mounting
    for query in pieces(shared, lambda piece: queries.mounts(claims_named(piece, queries))):
        for series in source.range(query, chunk.start, chunk.last, chunk.step):
            if (claim := claim_of(series["metric"])) in mounting:
                for t, _ in series["values"]:
                    mounting[claim].setdefault(float(t), []).append(series["metric"].get("pod", ""))
    rows = []
    for (namespace, name), (storageclass, size, bound) in shared.items():
        held: dict[str, float] = {}  # pod -> its instants' shares
        for pods in mounting[(namespace, name)].values():
            for pod in pods:
                held[pod] = held.get(pod, 0.0) + 1 / len(pods)
        rows += [(CLAIMED, namespace, workloads.get((namespace, pod), f"Pod/{pod}"), storageclass, size * instants)
                 for pod, instants in held.items()]
        if alone := bound - len(mounting[(namespace, name)]):
            rows.append((CLAIMED, namespace, frames.UNATTRIBUTED, storageclass, size * alone))
    return rows


def claims_named(claims: list[Claim], queries: Queries) -> str:
    """Matchers keeping the claims of these namespaces and names (with others of their names in those namespaces,
    which the caller leaves out)."""
    return (f"{node_matcher({name for _, name in claims}, 'persistentvolumeclaim')}, "
            f"{node_matcher({namespace for namespace, _ in claims}, queries.ksm.namespace)}")


def _row(name: str, labels: dict[str, str], value: str, cluster: str, workload: str = "") -> tuple:
    """(figure, namespace, workload, storageclass, value) of one answer's value at one instant, through the gate."""
    family = CLAIMS if name == LISTED else STORAGE_BYTES
    shown = {label: text for label, text in labels.items() if label != "figure"}  # the series' own labels, not ours
    return name, labels.get("namespace", ""), workload, labels.get("storageclass", ""), figure(value, family, shown, cluster)


def storage_day(rows: Sequence[tuple], step: int, cost_labels: Sequence[str] | None) -> StorageDay:
    """StorageDay from the store's figures: rows of (figure, namespace, workload, storageclass, value), bytes-instants
    (bytes at one instant times the instants they were held; or, figure LISTED, a count of claims), each instant a
    step long. None of them without a claim listed at some instant: a cluster without claims bills as it did."""
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
