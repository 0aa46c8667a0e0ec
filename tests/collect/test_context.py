"""The cluster-day context: the store asked once per cluster and day, every question counted; and the query text
apart from the machinery that asks it."""

import ast
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import billing.collect.promql
from billing.collect.context import cluster_day
from billing.collect.stores import DEFAULT_STORE
from billing.config import ClusterConfig
from billing.days import billing_day

CLUSTER = ClusterConfig(name="jaguar", prometheus={"url": "http://prometheus:9090"},
                        prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


class Store:
    """A Prometheus 2.42 with plain labels that holds nothing; records what it was asked."""

    def __init__(self):
        self.asked: list[str] = []

    def instant(self, query: str, at: float) -> list[dict]:
        self.asked.append("instant")
        return []

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        self.asked.append("range")
        return []

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        self.asked.append("buildinfo")
        return {"version": "2.42.0", "goVersion": "go1.19.8"}, {}


def test_the_store_is_asked_once_when_the_context_is_built_and_every_question_counts():
    store = Store()
    context = cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], store)
    assert store.asked == ["buildinfo", "range"]  # the engine, then the label renames over the day
    assert context.store.engine.name == "Prometheus 2.42.0" and context.asked == 2
    context.source.instant("up", DAY.start.timestamp())
    assert context.asked == 3 == len(store.asked)


def test_a_context_given_its_store_asks_nothing_and_cuts_the_day_for_the_busiest_hour():
    store = Store()
    context = cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], store, DEFAULT_STORE)
    assert store.asked == [] and context.asked == 0
    assert len(context.chunks()) == 4  # 24 h in 6-hour chunks of 360 instants at a 60 s step


def test_the_query_text_asks_nothing():
    """promql.py writes queries; asking them (sources, threads, the day's chunks) is the collectors' machinery."""
    tree = ast.parse(Path(billing.collect.promql.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not imported & {"concurrent.futures", "threading", "billing.collect.asking", "billing.collect.context"}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"PrometheusSource", "ThreadPoolExecutor"}
