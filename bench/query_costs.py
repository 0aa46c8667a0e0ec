"""Where Prometheus' time goes: every query of one cluster-day asked again alone, summed by the line that asks it.

    python -m bench.query_costs [--pods 50000] [--no-waste] [--url URL --pid PID]

Loads the generated day of bench.collect_bench (from its TSDB cache, made
there if missing) and lets Prometheus compact it, or uses a Prometheus that
holds it already (`--url`, `--pid`: its process, whose CPU time is read).
It collects the day in-process as `billing run` does
(billing.collect.day.collect_day, the default config), noting every query with
the line of billing/collect that asked it. Then it asks each query again,
one at a time, and adds up Prometheus' CPU time and the samples it touched
(its `totalQueryableSamples`) per asking line. Beside that
it asks the bill's floor (bench.collect_bench) the same way, so each line's
cost reads as a share of the floor: what docs/performance.md's "Where the
rest goes" is made of. One at a time, so that no query's cost is another's;
the run itself asks two at a time, so its own total differs a little.
"""

from __future__ import annotations

import argparse
import collections
import linecache
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from bench.collect_bench import PERIOD, billing_config, bills_floor, day_in_prometheus
from bench.naive import Prometheus, cpu_seconds
from billing.collect.day import collect_day
from billing.collect.prometheus import UNCOMPRESSED, LivePrometheus
from billing.config import load_config

COLLECT = str(Path(__file__).resolve().parent.parent / "billing" / "collect")
PLUMBING = {"prometheus", "at_times", "_in_one_range", "instant", "range"}  # what only passes a query on


@dataclass(frozen=True)
class Query:
    asker: str  # module:line of billing/collect that asked it, and the line itself
    query: str
    times: tuple[float, ...]  # (at,) for an instant query; (start, end, step) for a range query


def asker() -> str:
    """The innermost line of billing/collect on the stack that does more than pass the query on: what asked it."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(COLLECT) and not {Path(path).stem, frame.f_code.co_name} & PLUMBING:
            line = " ".join(linecache.getline(path, frame.f_lineno).split())
            return f"{Path(path).stem}:{frame.f_lineno} {line}"
        frame = frame.f_back
    return "elsewhere"


class Noting:
    """A LivePrometheus that notes every query with what asked it."""

    def __init__(self, live: LivePrometheus):
        self.live, self.asked = live, []
        self._lock = threading.Lock()

    def _note(self, query: str, times: tuple[float, ...]) -> None:
        with self._lock:
            self.asked.append(Query(asker(), query, times))

    def instant(self, query: str, at: float) -> list[dict]:
        self._note(query, (at,))
        return self.live.instant(query, at)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        self._note(query, (start, end, step))
        return self.live.range(query, start, end, step)

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        return self.live.buildinfo()


def ask_alone(prometheus: Prometheus, pid: int | None, query: Query) -> tuple[float, int]:
    """Prometheus' CPU seconds for the query asked alone (0 without its process), and the samples it touched (its
    totalQueryableSamples)."""
    before, touched = cpu_seconds(pid), prometheus.samples
    if len(query.times) == 1:
        prometheus.ask("query", query=query.query, time=query.times[0])
    else:
        start, end, step = query.times
        prometheus.ask("query_range", query=query.query, start=start, end=end, step=step)
    return cpu_seconds(pid) - before, prometheus.samples - touched


def night_asked(url: str, waste: bool = True, energy: bool = False) -> list[Query]:
    """Every query one `billing run` of the generated day asks (the default configuration; `energy`: with the
    cluster's energy read), with what asked it."""
    with tempfile.TemporaryDirectory(prefix="query-costs-") as tmp:
        config = load_config(billing_config(Path(tmp), url, {"waste": {"enabled": waste}}, energy=energy))
        cluster = config.clusters[0]
        noting = Noting(LivePrometheus(cluster.name, cluster.prometheus))
        collect_day(config, cluster, PERIOD, noting)
    return noting.asked


def floor_asked() -> list[Query]:
    """The bill's floor (bench.collect_bench), as queries."""
    return [Query("floor", query, (at,)) for query, at in bills_floor()]


def stage(asker: str) -> str:
    """The stage of billing/collect an asking line belongs to: its module (`usage`, `waste`, ...)."""
    return asker.split(":", 1)[0]


def measure(url: str, pid: int, pods: int, waste: bool) -> None:
    asked_by_night = night_asked(url, waste)
    prometheus = Prometheus(url)
    prometheus.session.headers.update(UNCOMPRESSED)  # as billing asks: no answer compressed
    floor = floor_asked()
    floor_cpu, floor_samples = (sum(figures) for figures in zip(*(ask_alone(prometheus, pid, query) for query in floor)))
    cpu: collections.Counter[str] = collections.Counter()
    samples: collections.Counter[str] = collections.Counter()
    asked: collections.Counter[str] = collections.Counter()
    for query in asked_by_night:
        seconds, touched = ask_alone(prometheus, pid, query)
        cpu[query.asker] += seconds
        samples[query.asker] += touched
        asked[query.asker] += 1
    total = sum(cpu.values())
    print(f"{pods:,} pods, waste {'on' if waste else 'off'}: {len(asked_by_night)} queries asked one at a time, "
          f"Prometheus CPU {total:.1f} s = {total / floor_cpu:.2f}× the bill's floor ({floor_cpu:.1f} s, "
          f"{len(floor)} queries), {sum(samples.values()) / 1e6:,.0f} M samples touched "
          f"= {sum(samples.values()) / floor_samples:.2f}× the floor's ({floor_samples / 1e6:,.0f} M)")
    print(" Prometheus CPU   ÷ floor  samples  ÷ floor's  queries  asked by")
    for line, seconds in cpu.most_common():
        print(f"{seconds:14.1f} s {seconds / floor_cpu:8.2f} {samples[line] / 1e6:6.1f} M "
              f"{samples[line] / floor_samples:9.3f} {asked[line]:8d}  {line[:140]}")
    by_stage: collections.Counter[str] = collections.Counter()
    for line, touched in samples.items():
        by_stage[stage(line)] += touched
    print("samples touched per stage ÷ the floor's: " + ", ".join(
        f"{name} {touched / floor_samples:.3f}" for name, touched in by_stage.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--waste", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--url", help="a Prometheus that holds the day already")
    parser.add_argument("--pid", type=int, help="with --url: its process id")
    args = parser.parse_args()
    if args.url:
        if not args.pid:
            parser.error("--url needs --pid, whose CPU time is measured")
        measure(args.url, args.pid, args.pods, args.waste)
        return
    with day_in_prometheus(args.pods, "query-costs-") as prometheus:
        measure(prometheus.url, prometheus.pid, args.pods, args.waste)

if __name__ == "__main__":
    main()
