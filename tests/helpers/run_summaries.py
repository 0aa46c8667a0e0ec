"""Run summaries of the nightly job, and the metric samples they become."""

from __future__ import annotations

from datetime import date

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from billing.collect.day import hours_by_resource
from billing.collect.usage import ClusterUsage
from billing.jobs.run import RunSummary


def usage(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["namespace", "resource", "gpu_model", "quantity"]).assign(priority_class="", pool="")


def usages() -> list[ClusterUsage]:
    """Two clusters; ibis ran CPU and memory only."""
    jaguar = ClusterUsage(
        "jaguar",
        usage([
            ("alice", "gpu", "NVIDIA-H100-80GB-HBM3", 24.0),
            ("alice", "cpu", "", 96.0),
            ("team-vision", "gpu", "", 2.5),
            ("team-vision", "cpu", "", 4.0),
            ("alice", "memory", "", 512.0),
        ]),
        pods=3,
        queries=8,
        coverage=1.0,
    )
    ibis = ClusterUsage("ibis", usage([("bob", "cpu", "", 10.0), ("bob", "memory", "", 40.0)]), pods=1, queries=8, coverage=1.0)
    return [jaguar, ibis]


def summary() -> RunSummary:
    """The run of `usages`: ibis cost nothing in GPUs."""
    # jaguar: 24 GPU-h x 2.40 + 2.5 GPU-h x 1.10 + 100 core-h x 0.012 + 512 GiB-h x 0.0015 = 62.318
    # ibis: 10 core-h x 0.034 + 40 GiB-h x 0.0045 = 0.52
    return RunSummary(date(2026, 11, 20), 7, 62.838, {u.cluster: hours_by_resource(u) for u in usages()},
                      {"jaguar": 62.318, "ibis": 0.52})


def samples(text: str) -> dict[tuple, float]:
    """{(name, (label, value), ...): value} from the exposition text the gateway received."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, *sorted(sample.labels.items()))] = sample.value
    return found
