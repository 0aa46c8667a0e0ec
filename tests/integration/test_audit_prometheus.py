"""The self-audit on a real Prometheus and a real VictoriaMetrics: it agrees on a generated day (also one
scraped with honor_labels: false), and catches a fast path gone wrong."""

from __future__ import annotations

from dataclasses import replace

import pytest

import billing.jobs.run
from billing.collect.audit import EXACT_PODS, audit_cluster
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.replay import prometheus_source
from billing.collect.usage import collect_cluster
from tests.helpers.faults import ledger_state
from tests.helpers.prometheus_jobs import run, write_config
from tests.helpers.prometheus_worlds import UTC_DAY, cluster, world_of


@pytest.mark.parametrize("cost_labels", [None, ["experiment", "example.com/project"]], ids=["", "workloads"])
@pytest.mark.parametrize("honor_labels", [True, False], ids=["plain-labels", "exported-labels"])
def test_the_audit_agrees_with_collection_on_a_generated_day(store_server, honor_labels, cost_labels):
    """Raw samples by range selectors: the same on both stores, whatever their lookback; with honor_labels:
    false the raw series' labels are read where the scrape put them, as the billing queries read them.
    With workloads, the billing queries broken down by workload and cost labels are the ones audited."""
    world = world_of(UTC_DAY, pods=300, clusters=("jaguar",))
    prom = store_server(replace(world, honor_labels=honor_labels))
    config = cluster("jaguar", prom.url)
    source = LivePrometheus("jaguar", config.prometheus)
    context = cluster_day(config, UTC_DAY, 60, ["nvidia_com_gpu"], source)
    assert bool(context.store.renames()) is not honor_labels
    usage = collect_cluster(context, cost_labels=cost_labels)
    assert usage.exact and len(usage.running) > 40  # both paths are audited
    audit = audit_cluster(context, usage.running, usage.exact, 20, cost_labels=cost_labels)
    assert audit.pods == 20 + min(len(usage.exact), EXACT_PODS)
    assert audit.queries > 4


class SkewedFastPath:
    """A store whose answers to the fast path's Running instants are 1% high, as a store with other PromQL semantics
    might give."""

    def __init__(self, source):
        self.source = source

    def instant(self, query: str, at: float) -> list[dict]:
        return self.source.instant(query, at)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        answer = self.source.range(query, start, end, step)
        if not query.startswith("max by (namespace, pod, uid, phase) (sum_over_time("):
            return answer
        return [{**s, "values": [[t, str(float(v) * 1.01)] for t, v in s["values"]]} for s in answer]

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        return self.source.buildinfo()


def test_a_fast_path_gone_wrong_fails_the_run_and_keeps_the_ledger(prometheus_server, tmp_path, monkeypatch):
    world = world_of(UTC_DAY, pods=150, clusters=("jaguar",))
    prom = prometheus_server(world)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": prom.url})
    assert run(config).exit_code == 0
    before = ledger_state(database)

    monkeypatch.setattr(billing.jobs.run, "prometheus_source", lambda name, c: SkewedFastPath(prometheus_source(name, c)))
    result = run(config)
    assert result.exit_code == 1
    sentence = result.stderr.strip()
    assert sentence.startswith("billing: self-audit of cluster jaguar on 2026-11-20 failed: pod ")
    assert "resource-hours instant by instant but " in sentence and "the ledger keeps its previous rows" in sentence
    assert "\n" not in sentence and "Traceback" not in result.output
    assert ledger_state(database) == before
