"""Where a run's memory goes: the client's resident size after each answer of one cluster-day.

    python -m bench.answer_memory [--pods 250000] [--waste | --no-waste]

Loads the generated day of bench.collect_bench (from its TSDB cache, made
there if missing), lets Prometheus compact it, and collects the day
in-process as `billing run` does (billing.collect.day.collect_day, the default
config) in a process of its own, which does not hold the generated world
(as the benchmark's does). After every answer it notes the process's peak resident size so far
(VmHWM) and its resident size now (VmRSS), and prints the answers after which
the peak rose by more than 10 MB, with their series and the query's start:
what the peak is made of, stage by stage (docs/performance.md, "Where the
client's memory goes"). Resident size, not tracemalloc, so that the
allocator's free lists and the libraries count as they do for the CronJob's
memory limit, and the run is not slowed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.collect_bench import PERIOD, billing_config, day_in_prometheus, resident_mb
from billing.collect.day import collect_day
from billing.collect.prometheus import LivePrometheus
from billing.config import load_config


class Noted:
    """A LivePrometheus that notes, after each answer: seconds since the start, peak and current RSS, series, query."""

    def __init__(self, live: LivePrometheus):
        self.live, self.started, self.notes = live, time.perf_counter(), []
        self._lock = threading.Lock()

    def _note(self, query: str, answer: list[dict]) -> list[dict]:
        with self._lock:
            self.notes.append((time.perf_counter() - self.started, resident_mb(os.getpid()), resident_mb(os.getpid(), "VmRSS"),
                               len(answer), " ".join(query.split())[:100]))
        return answer

    def instant(self, query: str, at: float) -> list[dict]:
        return self._note(query, self.live.instant(query, at))

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return self._note(query, self.live.range(query, start, end, step))

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        return self.live.buildinfo()


def measure(url: str, pods: int, waste: bool) -> None:
    """Collect the day from the Prometheus at `url` and print what the answers did to this process's memory."""
    with tempfile.TemporaryDirectory(prefix="answer-memory-") as tmp:
        config = load_config(billing_config(Path(tmp), url, {"waste": {"enabled": waste}}))
        cluster = config.clusters[0]
        source = Noted(LivePrometheus(cluster.name, cluster.prometheus))
        collect_day(config, cluster, PERIOD, source)
    print(f"{pods:,} pods, waste {'on' if waste else 'off'}: {len(source.notes)} answers, "
          f"peak RSS {resident_mb(os.getpid()):,.0f} MB")
    print("   after   peak MB    now MB   series  query")
    peak = 0.0
    for at, highest, now, series, query in source.notes:
        if highest - peak > 10:
            print(f"{at:7.1f} s {highest:9,.0f} {now:9,.0f} {series:8,}  {query}")
        peak = highest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=250_000)
    parser.add_argument("--waste", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--url", help="a Prometheus that holds the day already (how the measuring child is started)")
    args = parser.parse_args()
    if args.url:
        measure(args.url, args.pods, args.waste)
        return
    with day_in_prometheus(args.pods, "answer-memory-") as prometheus:
        subprocess.run([sys.executable, "-m", "bench.answer_memory", "--pods", str(args.pods), "--url", prometheus.url,
                        "--waste" if args.waste else "--no-waste"], check=True)

if __name__ == "__main__":
    main()
