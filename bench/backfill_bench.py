"""Days per hour of `billing backfill`, serial against parallel, over a real Prometheus holding many days.

    python -m bench.backfill_bench [--days 10] [--pods-per-day 1000] [--runs 1:2,2:2,4:4]

A one-cluster world of `--days` days with about `--pods-per-day` pods alive
each day, with cAdvisor and DCGM utilisation so that waste is measured
(fixtures.ksm.make_world; TSDB blocks cached as for
bench/collect_bench.py), is loaded into a real Prometheus. Each run
`PARALLEL:IN_FLIGHT` is `billing backfill --parallel PARALLEL` of every day,
with `max_queries_in_flight: IN_FLIGHT`, as a subprocess into a fresh SQLite
ledger (an LDIF directory, no email). Measured: wall time, days per hour,
the child's CPU time and peak RSS, and Prometheus' CPU time over the run.
Every run must bill the same ledger to 1e-9: the table says so.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import yaml

from bench.collect_bench import CACHE, billing_config, run_measured, running_at
from bench.naive import cpu_seconds
from billing.days import billing_day
from fixtures.ksm import make_world
from fixtures.servers import start_prometheus, wait_for_compaction, world_blocks

FIRST_DAY = date(2026, 10, 1)


def ledger_totals(database: Path) -> dict[tuple, float]:
    with sqlite3.connect(database) as conn:
        return {row[:-1]: row[-1] for row in conn.execute(
            "select day, namespace, team, resource, gpu_model, sum(quantity) from chargeback group by 1, 2, 3, 4, 5")}


def same(a: dict[tuple, float], b: dict[tuple, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-12) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--pods-per-day", type=int, default=1000)
    parser.add_argument("--runs", default="1:2,2:2,4:4", help="PARALLEL:IN_FLIGHT,... (the first is the baseline)")
    args = parser.parse_args()
    runs = [tuple(int(n) for n in run.split(":")) for run in args.runs.split(",")]
    days = [FIRST_DAY + timedelta(days=n) for n in range(args.days)]

    start = billing_day(FIRST_DAY, ZoneInfo("UTC")).start.timestamp()
    world = make_world(11, start, pods=args.pods_per_day * args.days, nodes=max(4, math.ceil(args.pods_per_day / 100)),
                       day_seconds=args.days * 86400.0, utilisation=True)
    blocks = world_blocks(world, CACHE)
    print(f"world: {args.days} days, {len(world.clusters[0].pods):,} pods ({args.pods_per_day:,} a day)", flush=True)
    pods = world.clusters[0].pods
    for n, day in enumerate(days):
        begin, noon = start + n * 86400, start + n * 86400 + 43200
        alive = sum(p.created < begin + 86400 and p.deleted > begin for p in pods)
        print(f"  {day}: {alive:,} pods alive, {sum(running_at(p, noon) for p in pods):,} running at noon", flush=True)

    rows, baseline, first_ledger = [], None, None
    with tempfile.TemporaryDirectory(prefix="backfill-bench.") as scratch:
        for parallel, in_flight in runs:
            workdir = Path(scratch) / f"p{parallel}-q{in_flight}"
            workdir.mkdir()
            prometheus = start_prometheus(blocks, workdir / "prometheus")
            try:
                wait_for_compaction(prometheus)
                config = billing_config(workdir, prometheus.url)
                settings = yaml.safe_load(config.read_text())
                settings["clusters"][0]["prometheus"]["max_queries_in_flight"] = in_flight
                config.write_text(yaml.safe_dump(settings))
                prometheus_cpu = cpu_seconds(prometheus.pid)
                child = run_measured("billing", ["backfill", "--config", str(config), "--from", str(days[0]),
                                                 "--to", str(days[-1]), "--parallel", str(parallel)],
                                     workdir / "backfill.log")
                prometheus_cpu = cpu_seconds(prometheus.pid) - prometheus_cpu
            finally:
                prometheus.stop()
            ledger = ledger_totals(workdir / "ledger.db")
            first_ledger = first_ledger or ledger
            baseline = baseline or child.wall
            rows.append(f"| {parallel} | {in_flight} | {child.wall:.1f} s | {len(days) * 3600 / child.wall:,.0f} | "
                        f"{baseline / child.wall:.2f}× | {child.cpu:.1f} s | "
                        f"{child.rss_mb:,.0f} MB | {prometheus_cpu:.1f} s | "
                        f"{'yes' if same(ledger, first_ledger) else 'NO'} |")
            print(rows[-1], flush=True)

    print(f"\n{args.days} days, about {args.pods_per_day:,} pods a day, one cluster:\n")
    print("| --parallel | max_queries_in_flight | wall | days per hour | speed-up | billing CPU | billing RSS | "
          "Prometheus CPU | same ledger |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
