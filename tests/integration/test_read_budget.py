"""The night's reads are budgeted: every stage of billing/collect that asks the store touches at most the samples its
line of docs/performance.md's "The night's read budget" allows, as a multiple of what the bill's floor touches.

Samples touched (Prometheus' totalQueryableSamples) are a count, the same on every machine and run, so a new read
is weighed against the floor before it lands, without timing anything: a stage without a line in the table, or over
its line, fails here."""

import re
from collections import Counter
from pathlib import Path

import pytest

from bench.collect_bench import world_of
from bench.naive import Prometheus
from bench.query_costs import ask_alone, floor_asked, night_asked, stage

PERFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
PODS = 300


def read_budget() -> dict[str, float]:
    """Stage -> samples it may touch as a multiple of the floor's, from the budget's table."""
    section = PERFORMANCE.read_text().split("## The night's read budget", 1)[1].split("\n## ", 1)[0]
    return {name: float(share) for name, share in re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", section, re.M)}


@pytest.mark.integration
def test_every_stage_reads_within_its_budget(prometheus_server):
    server = prometheus_server(world_of(PODS, energy=True))
    prometheus = Prometheus(server.url)
    floor = sum(ask_alone(prometheus, None, query)[1] for query in floor_asked())
    touched: Counter[str] = Counter()
    for query in night_asked(server.url, energy=True):
        touched[stage(query.asker)] += ask_alone(prometheus, None, query)[1]
    shares = {name: samples / floor for name, samples in touched.items()}
    budget = read_budget()
    assert set(shares) <= set(budget), f"stages that read with no budget line: {sorted(set(shares) - set(budget))}"
    over = {name: f"{share:.3f} > {budget[name]}" for name, share in shares.items() if share > budget[name]}
    assert not over, f"stages over their read budget (samples touched ÷ the floor's): {over}"
