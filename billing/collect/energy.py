"""Energy per namespace and day (docs/spec.md "Energy and carbon"): GPUs' from dcgm-exporter's energy counter, to the
pods each GPU's series are labelled with at each step's end; CPU and memory's from Kepler's pod counters; and what no
pod accounts for (a GPU held by none, a node's energy beyond its pods') as the cluster's unattributed.

A counter's step at an instant is its value then minus its value a step before, or its value then where that is
lower (a reset); a step above what a device can draw in the time it spans (MOST_WATTS) is no energy but a fault. Per
chunk one instant query asks the store for every step of the chunk summed, per namespace (GPUs, Kepler's pods per
node) and per node (Kepler's node counters), each part told apart by its `figure` label; the client only adds chunks
up. Asked only for a cluster with an `energy` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone

import pandas as pd

from billing import frames
from billing.collect.asking import map_chunks
from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.figures import GPU_ENERGY, NODE_ENERGY, POD_ENERGY, Family, ImpossibleFigure, figure, labelled
from billing.collect.preflight import MissingSeries
from billing.collect.promql import LOOKBACK, POD_LABELS, Queries, quote

GPU_COUNTER = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since the driver loaded, per physical GPU (UUID)
POD_COUNTER, NODE_COUNTER = "kepler_pod_cpu_joules_total", "kepler_node_cpu_joules_total"  # Kepler 0.10 and later
ZONES = 'zone=~"package|dram"'  # core and uncore are inside package
MJ_PER_KWH, J_PER_KWH = 3.6e9, 3.6e6
# The highest a counter can read, in its unit: a 1 kW GPU counts 3e14 mJ in ten years, a 10 kW node 3e12 J; a double's
# spacing at these bounds (128 mJ, 0.125 J) loses nothing of a step, far beyond them whole steps round away. Its
# family's figures (collect/figures.py) say them in their fix.
COUNTER_HIGHEST = {GPU_COUNTER: 1e18, POD_COUNTER: 1e15, NODE_COUNTER: 1e15}
# The most one series' device draws, in watts: 5 kW a GPU (five times the 1 kW of the largest made today), 10 kW a
# node's CPU packages or its memory (Kepler's zones: a server's CPUs draw 1 to 2 kW). A step spans at most the step and
# the lookback (its two samples each the latest of their 5 minutes), so a step above MOST_WATTS times that is a
# counter that jumped (10 MJ in a minute is 166 kW): its step is +Inf, refused by the gate as an impossible value is.
# Its family's figures (collect/figures.py) say them in their fix.
MOST_WATTS = {GPU_COUNTER: 5e3, POD_COUNTER: 1e4, NODE_COUNTER: 1e4}
PER_JOULE = {GPU_COUNTER: 1e3, POD_COUNTER: 1.0, NODE_COUNTER: 1.0}  # a counter's unit: mJ, J
# the `figure` label of each part of the answer, and the family its figures belong to
GPU, POD, NODE = "gpu", "pod", "node"
FAMILIES: dict[str, Family] = {GPU: GPU_ENERGY, POD: POD_ENERGY, NODE: NODE_ENERGY}
COUNTERS = {GPU: GPU_COUNTER, POD: POD_COUNTER, NODE: NODE_COUNTER}
SERIES_OF = {GPU: "UUID", POD: "pod_namespace, pod_id, node_name, zone", NODE: "node_name, zone, path"}  # one counter


@dataclass(frozen=True)
class EnergyDay:
    """One cluster-day's energy: kWh per namespace (frames.ENERGY, namespace '' the unattributed; NaN for a family
    with no sample), the families found and the nodes Kepler reported."""

    energy: pd.DataFrame  # frames.ENERGY
    found: frozenset[str]  # of GPU, POD, NODE: the parts with a series on the day
    nodes: frozenset[str]  # nodes with Kepler's node counters

    def covering(self, namespaces: set[str]) -> EnergyDay:
        """With a row for each of `namespaces` (the day's billed ones) and for the unattributed ('') that the counters
        did not name: 0 of a family found (no series of it: none drawn), unknown (NaN) of one not found, so that the
        pages say unknown for every namespace of a cluster whose counters are missing rather than leave it out."""
        missing = sorted(namespaces - set(self.energy["namespace"]) | ({""} - set(self.energy["namespace"])))
        if not missing:
            return self
        unknown = float("nan")
        added = pd.DataFrame({"namespace": missing, "gpu_kwh": 0.0 if GPU in self.found else unknown,
                              "cpu_kwh": 0.0 if self.found & {POD, NODE} else unknown})
        energy = pd.concat([self.energy, added], ignore_index=True) if len(self.energy) else added
        return EnergyDay(energy.sort_values("namespace", ignore_index=True), self.found, self.nodes)


def step(now: str, before: str, on: str, highest: float, most: float) -> str:
    """A counter's step at each instant: its value `now` minus the value a step `before` (matched `on` those labels),
    or `now` where that is lower (a reset, counted from 0); +Inf where it is `impossible` (x^0 is 1 for every x), so
    that the chunk's sum is infinite and the gate refuses it: a sum could hide a negative step, a counter so large
    that its steps are lost to rounding would read 0, and a jump would bill energy no device drew. +Inf, not NaN:
    VictoriaMetrics drops NaN from its answers. A NaN counter's step is NaN, which Prometheus keeps (`unless` keeps it)
    and VictoriaMetrics never has (it stores no NaN sample: a gap). `or` adds only the label sets its left side lacks,
    so each impossible series is +Inf and the store is asked for `impossible` once."""
    delta = f"({now} - on ({on}) {before})"
    return (f"(({impossible(now, before, on, highest, most)}) ^ 0 * Inf "
            f"or (({delta} unless {delta} < 0) or ({now} and {delta} < 0)))")


def impossible(now: str, before: str, on: str, highest: float, most: float) -> str:
    """The series whose step at an instant is no energy: the counter `now` below 0, above `highest`
    (COUNTER_HIGHEST) or +Inf, or its step above `most` (MOST_WATTS over the time a step spans): a rise of more than
    it, or a fall (a reset, whose step is `now`) to more than it. The rise is outside [0, most] where it is further
    than most/2 from its middle, which asks the store for it once."""
    half = most / 2
    jumped = f"({now} > {most!r} and abs(({now} - on ({on}) {before}) - {half!r}) > {half!r})"
    return f"({now} < 0 or {now} > {highest:g} or {jumped})"


class EnergyQueries(Queries):
    """The query of one chunk: every step of the chunk summed on the store."""

    def value(self, counter: str, by: str, before: int = 0, *matchers: str) -> str:
        """Per `by`, the counter's value at each instant (`before` seconds earlier), its copies once (the largest)."""
        return f"max by ({by}) ({self.latest(self.series(counter, *matchers), before)})"

    def steps(self, part: str) -> str:
        """Each series' step of a part (SERIES_OF): a GPU's (its copies and pods' series once), Kepler's package and
        DRAM per zone (a pod's running and terminated series once)."""
        return step(*self._counter(part))

    def impossible(self, part: str) -> str:
        """The series of a part at the instants their step is `impossible`, valued as their counter."""
        return impossible(*self._counter(part))

    def _counter(self, part: str) -> tuple[str, str, str, float, float]:
        """What `step` takes of a part's counter: its value now and a step before, per series, and its bounds."""
        counter, by = COUNTERS[part], SERIES_OF[part]
        matchers = () if part == GPU else (ZONES,)
        return (self.value(counter, by, 0, *matchers), self.value(counter, by, self.chunk.step, *matchers), by,
                COUNTER_HIGHEST[counter], self.most(counter))

    def most(self, counter: str) -> float:
        """The largest step of the counter a device can draw: MOST_WATTS over the step and the lookback, in its unit."""
        return MOST_WATTS[counter] * (self.chunk.step + LOOKBACK) * PER_JOULE[counter]

    def gpu_steps(self) -> str:
        """Per namespace ('' for a GPU no pod holds): each GPU's step split equally over the pods its series are
        labelled with at the step's end, whatever pod held it before."""
        holders = f"group by (UUID, namespace, pod) ({self.dcgm.plain(self.latest(self.series(GPU_COUNTER)), POD_LABELS)})"
        shares = f"{holders} / on (UUID) group_left () count by (UUID) ({holders})"
        return f"sum by (namespace) ({self.steps(GPU)} * on (UUID) group_right () {shares})"

    def summed(self) -> str:
        """Per part (`figure`): GPUs' steps per namespace, Kepler's pods' per namespace and node, its nodes' per node,
        each summed over the chunk's instants."""
        pods = f"sum by (pod_namespace, node_name) ({self.steps(POD)})"
        parts = {GPU: self.gpu_steps(),
                 POD: f'label_replace({pods}, "namespace", "$1", "pod_namespace", "(.*)")',
                 NODE: f"sum by (node_name) ({self.steps(NODE)})"}
        return "\nor ".join(f'label_replace(sum_over_time(({text})[{self.instants}:{self.step}]), "figure", '
                            f'{quote(name)}, "", "")' for name, text in parts.items())


def collect_energy(context: ClusterDay) -> EnergyDay:
    """The cluster-day's energy (EnergyDay), one query per chunk; a sum the gate refuses names its first series and
    step that made it infinite (one more query, asked only then)."""
    cluster = context.cluster.name

    def ask(chunk: Chunk) -> list[tuple[str, str, str, float]]:
        queries = EnergyQueries(context.cluster, context.gpu_resources, chunk, context.store)
        rows = []
        for series in context.source.instant(queries.summed(), chunk.last):
            labels = series["metric"]
            part = labels.get("figure", "")
            shown = {name: text for name, text in labels.items() if name != "figure"}
            try:
                value = figure(series["value"][1], FAMILIES[part], shown, cluster)
            except ImpossibleFigure as refused:
                raise refused.naming(_first_infinite_step(context, queries, part)) from None
            rows.append((part, labels.get("namespace", ""), labels.get("node_name", ""), value))
        return rows

    return energy_day([row for rows in map_chunks(ask, context.chunks()) for row in rows])


def _first_infinite_step(context: ClusterDay, queries: EnergyQueries, part: str) -> str:
    """The series and instant of the chunk's first +Inf step of `part` (an impossible counter or step), as a clause;
    '' where there is none (a NaN counter, whose steps are NaN)."""
    chunk = queries.chunk
    # each series' first (time, value) at which its step is impossible
    found = [(series["values"][0][0], labelled(COUNTERS[part], series["metric"])) for series in
             context.source.range(queries.impossible(part), chunk.start, chunk.last, chunk.step) if series["values"]]
    if not found:
        return ""
    at, series = min(found)  # the earliest; of several at once, the first by name
    ending = datetime.fromtimestamp(at, timezone.utc)
    return f"the first such step: {series} at the step ending {ending:%Y-%m-%d %H:%M:%S} UTC"


def energy_day(rows: list[tuple[str, str, str, float]]) -> EnergyDay:
    """EnergyDay from the chunks' figures (part, namespace, node, value: mJ for GPUs, joules for Kepler's): per
    namespace its GPU and CPU kWh; unattributed ('') the GPUs' no pod held and, per node, the node's beyond its pods'
    (never below 0). A part no chunk answered is unknown (NaN), not 0."""
    frame = pd.DataFrame(rows, columns=["part", "namespace", "node", "value"]).astype({"value": float})
    found = frozenset(frame["part"])
    gpu = frame[frame["part"] == GPU].groupby("namespace")["value"].sum() / MJ_PER_KWH
    pods = frame[frame["part"] == POD]
    cpu = pods.groupby("namespace")["value"].sum() / J_PER_KWH
    per_node = frame[frame["part"] == NODE].groupby("node")["value"].sum()
    pods_per_node = pods.groupby("node")["value"].sum().reindex(per_node.index, fill_value=0.0)
    beyond = float((per_node - pods_per_node).clip(lower=0.0).sum()) / J_PER_KWH
    if NODE in found:
        cpu = cpu.add(pd.Series({"": beyond}), fill_value=0.0)
    energy = pd.DataFrame({"gpu_kwh": gpu, "cpu_kwh": cpu}).rename_axis("namespace").reset_index()
    energy = energy.fillna({"gpu_kwh": 0.0 if GPU in found else float("nan"),
                            "cpu_kwh": 0.0 if POD in found or NODE in found else float("nan")})
    return EnergyDay(frames.ENERGY.check(energy)[frames.ENERGY.columns], found, frozenset(per_node.index))


def refuse_unmeasured(energy: EnergyDay, cluster: str, day: date) -> None:
    """Rule 10 where energy is billed (docs/spec.md "Energy and carbon"): a cluster-day without a sample of the GPUs'
    or of Kepler's pods' counters would bill too little and look complete."""
    missing = [COUNTERS[part] for part in (GPU, POD) if part not in energy.found]
    if missing:
        raise MissingSeries(f"cluster {cluster}: energy is priced (energy.price_kwh) but the store holds no sample of "
                            f"{' or '.join(missing)} on {day}; run dcgm-exporter with its energy counter and Kepler 0.10 "
                            "or later, or leave energy.price_kwh unset to show energy only; nothing was billed and the "
                            "ledger keeps the day as it was")
