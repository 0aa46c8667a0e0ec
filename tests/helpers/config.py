"""A small valid configuration, and stubs for job tests that bring their own usage.

Every test process imports this module (tests/conftest.py), including the small pytest runs that
tests/fixtures/test_missing_programs.py starts: the stubs import the job when they are used.
"""

from __future__ import annotations

from datetime import date

import pytest

MINIMAL_CONFIG = {
    "timezone": "UTC",
    "currency": "EUR",
    "step": "60s",
    "database": "sqlite:///billing.db",
    "clusters": [
        {
            "name": "jaguar",
            "prometheus": {"url": "http://127.0.0.1:9"},
            "prices": {
                "cpu_core_hour": 0.01,
                "memory_gib_hour": 0.002,
                "gpu_hour": 1.0,
                "gpu_models": {"NVIDIA-H100-80GB-HBM3": 2.5},
            },
        }
    ],
    "directory": {"ldif": "directory.ldif"},
}


def assert_refused(path, key: str, words: str) -> None:
    """Loading the config at `path` is refused in one sentence naming `key` and saying `words`."""
    from billing.config import ConfigError, load_config

    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert f"{key}:" in message and words in message
    assert "\n" not in message


def stub_node_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """For job tests that stub collect_cluster: no node capacity, no waste metrics and no persistent volumes either, a
    Prometheus 2 with plain labels, asked of no one, and a preflight that finds nothing missing."""
    import billing.collect.day
    from billing import frames
    from billing.collect.context import cluster_day
    from billing.collect.preflight import Findings
    from billing.collect.storage import storage_day
    from billing.collect.stores import DEFAULT_STORE

    monkeypatch.setattr(billing.collect.day, "cluster_day", lambda *args: cluster_day(*args, store=DEFAULT_STORE))
    monkeypatch.setattr(billing.collect.day, "preflight", lambda context, *args: Findings(context.cluster.name, date.min, ()))
    monkeypatch.setattr(billing.collect.day, "collect_allocatable", lambda *args: frames.ALLOCATABLE.empty())
    monkeypatch.setattr(billing.collect.day, "collect_waste",  # per workload where the job asks so, as collect_waste does
                        lambda *args, by_workload=False, **kwargs: (frames.WORKLOAD_WASTE if by_workload else frames.WASTE).empty())
    monkeypatch.setattr(billing.collect.day, "collect_storage",
                        lambda context, cost_labels=None, *args: storage_day([], context.step, cost_labels))
