"""One cluster-day as the collectors ask it: built once per cluster and day, it holds what every collector
needs (the cluster, the day, the step, the GPU resources, the source and how to ask its store) and counts
the questions asked through it, so that no collector asks the store again or counts by hand."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from billing.collect.chunks import Chunk, chunks
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import GpuResources
from billing.collect.stores import Store, store_of
from billing.config import ClusterConfig
from billing.days import BillingDay


class CountedSource:
    """A source that counts the questions asked through it; chunks are asked from several threads at once."""

    def __init__(self, source: PrometheusSource):
        self.source, self.asked = source, 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.asked += 1

    def instant(self, query: str, at: float) -> list[dict]:
        self._count()
        return self.source.instant(query, at)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        self._count()
        return self.source.range(query, start, end, step)

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        self._count()
        return self.source.buildinfo()


@dataclass(frozen=True)
class ClusterDay:
    """What the collectors of one cluster-day share; `cluster_day` builds it."""

    cluster: ClusterConfig
    day: BillingDay
    step: int  # seconds between sampling instants (docs/spec.md "Rule 1: sampling instants")
    gpu_resources: GpuResources
    source: CountedSource
    store: Store  # how to ask the cluster's store (stores.store_of)

    @property
    def asked(self) -> int:
        """Questions asked of the store for this cluster-day so far, the store's detection included."""
        return self.source.asked

    def chunks(self) -> list[Chunk]:
        """The day's chunks, sized for the busiest hour's pods (chunks.chunks)."""
        return chunks(self.day, self.step, self.store.busiest)


def cluster_day(cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: GpuResources,
                source: PrometheusSource, store: Store | None = None) -> ClusterDay:
    """The cluster-day's context; `store` is asked of the source (once) when not given."""
    counted = CountedSource(source)
    return ClusterDay(cluster, day, step, gpu_resources, counted, store or store_of(counted, cluster, day))
