"""How long `billing run` takes for one big cluster-day, against a naive baseline.

    python -m bench.collect_bench [--pods 1000,10000,50000] [--baseline-pods 3000] [--show-queries]

For each size, a one-cluster day (60 s scrape) from fixtures.ksm.make_world
is loaded into a real Prometheus; the TSDB blocks are kept in
$BILLING_TSDB_CACHE (default /tmp/billing-tsdb-cache), since loading the
50,000-pod day takes about ten minutes the first time. Then

1. `billing run` for that day runs as a subprocess (one cluster, an LDIF
   directory, SQLite, no email), --repeat times (the fastest counts: the
   machine may be shared), and talks to Prometheus through a proxy that
   records every query and its round-trip time. Measured: wall time, the
   process' peak RSS and CPU time, the number of queries, the time during
   which at least one query was in flight ("waiting on Prometheus") and the
   rest of the wall time ("own": start-up, pandas, SQL, reports), and
   Prometheus' CPU time and peak RSS. Each recorded query is then asked
   again with stats=all for the most samples any one query touched. The
   run's self-audit (billing/audit.py) reports its own time and queries in
   the run's log; they are part of the run's figures and shown apart.
2. The naive baseline (bench.naive: per-pod range queries integrated with
   pandas) runs against a fresh Prometheus over the same blocks. Above
   --baseline-pods pods it integrates a random sample of that many pods and
   extrapolates its pod loop linearly; the table says so.

It ends with a Markdown table and the targets of issue 7.

    python -m bench.collect_bench --workloads [--pods 50000] [--repeat 2]

measures instead `billing run` with workloads and two cost labels against the same run without them
(issue 14): wall, client RSS and CPU, Prometheus CPU, and the rows per day in workload_costs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit
from zoneinfo import ZoneInfo

import requests
import yaml

from bench.naive import cpu_seconds
from billing.days import billing_day
from fixtures.demo.world import ldif
from fixtures.ksm import EXPERIMENT_LABEL, PROJECT_LABEL, Pod, World, make_world
from fixtures.servers import PrometheusServer, start_prometheus, world_blocks

ROOT = Path(__file__).resolve().parents[1]
DAY = date(2026, 11, 20)
PERIOD = billing_day(DAY, ZoneInfo("UTC"))
CLUSTER = "jaguar"
SEED = 1
MAX_SAMPLES_DEFAULT = 50_000_000  # Prometheus' --query.max-samples
TARGETS = {"wall": 60.0, "rss_mb": 500.0, "peak_samples": 0.2 * MAX_SAMPLES_DEFAULT, "own_share": 0.2,
           "audit_share": 0.05}
AUDIT_LOG = re.compile(r"self-audit of (\d+) pods from raw samples agrees \((\d+) queries, ([0-9.]+) s\)")
MB = 2**20


@dataclass(frozen=True)
class Asked:
    """One HTTP request billing made, as the proxy saw it."""

    path: str
    params: list[tuple[str, str]]
    started: float
    ended: float


class RecordingProxy:
    """Forwards every request to Prometheus unchanged and records it with its round-trip time."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname, parts.port
        self.asked: list[Asked] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as with a real Prometheus

            def do_POST(self) -> None:
                proxy._forward(self)

            do_GET = do_POST

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _forward(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        headers = {k: v for k in ("Content-Type", "Accept-Encoding") if (v := request.headers.get(k))}
        started = time.perf_counter()
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=600)
        upstream.request(request.command, request.path, body, headers)
        response = upstream.getresponse()
        answer = response.read()
        ended = time.perf_counter()
        upstream.close()
        target = urlsplit(request.path)
        params = parse_qsl(target.query) + parse_qsl(body.decode())
        with self._lock:
            self.asked.append(Asked(target.path, params, started, ended))
        request.send_response(response.status)
        for name in ("Content-Type", "Content-Encoding"):
            if value := response.getheader(name):
                request.send_header(name, value)
        request.send_header("Content-Length", str(len(answer)))
        request.end_headers()
        request.wfile.write(answer)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class Figures:
    """One strategy on one cluster-day."""

    wall: float  # seconds
    rss_mb: float  # peak RSS of the client process
    cpu: float  # user + system seconds of the client process
    queries: int
    peak_samples: int  # the most samples any one query touched
    waiting: float  # seconds during which at least one query was in flight
    prometheus_cpu: float  # user + system seconds of Prometheus meanwhile
    prometheus_rss_mb: float
    note: str = ""
    audit_pods: int = 0  # the self-audit's share of the above (billing only)
    audit_queries: int = 0
    audit_seconds: float = 0.0

    @property
    def own(self) -> float:
        """Wall time not spent waiting for Prometheus."""
        return self.wall - self.waiting


@dataclass(frozen=True)
class SizeResult:
    pods: int
    running_at_noon: int
    load_seconds: float
    billing: Figures
    baseline: Figures
    agreement: str


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of time intervals: the time at least one query was in flight."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def running_at(pod: Pod, t: float) -> bool:
    """Whether the model says the pod is Running at t (for the "running at noon" column)."""
    if not pod.created <= t < pod.deleted:
        return False
    phase = pod.phases[0][1]
    for ts, name in pod.phases:
        if ts <= t:
            phase = name
    return phase == "Running"


def world_of(pods: int) -> World:
    """The benchmark's cluster-day; the same arguments give the same world, so its blocks are cached."""
    return make_world(SEED, PERIOD.start.timestamp(), pods=pods, clusters=(CLUSTER,), day_seconds=PERIOD.seconds)


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a running process: its peak resident set so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / MB
    return math.nan


def run_measured(args: list[str], log: Path) -> tuple[float, resource.struct_rusage]:
    """Run a Python child in the worktree; return its wall time and resource usage (its own, via wait4)."""
    with open(log, "w") as out:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"{' '.join(args[:3])} failed with status {child.returncode}:\n{log.read_text()[-3000:]}")
    return wall, usage


def billing_config(workdir: Path, prometheus_url: str, settings: dict | None = None) -> Path:
    (workdir / "directory.ldif").write_text(ldif())
    config = {
        "timezone": "UTC",
        "step": "60s",
        "database": f"sqlite:///{workdir / 'ledger.db'}",
        "output_dir": str(workdir / "reports"),
        "clusters": [{
            "name": CLUSTER,
            "prometheus": {"url": prometheus_url, "selector": f'cluster="{CLUSTER}"', "retries": 0, "timeout": "600s"},
            "prices": {"cpu_core_hour": 0.012, "memory_gib_hour": 0.0015, "gpu_hour": 1.10,
                       "gpu_models": {"NVIDIA-H100-80GB-HBM3": 2.40, "NVIDIA-A100-SXM4-80GB": 1.60}},
        }],
        "directory": {"ldif": str(workdir / "directory.ldif"),
                      "people": {"base": "ou=people,dc=example,dc=org"}, "teams": {"base": "ou=teams,dc=example,dc=org"}},
        "namespaces": {"overrides": {"kube-system": "platform", "monitoring": "platform"}},
        "email": {"enabled": False},
        **(settings or {}),
    }
    path = workdir / "billing.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def replay_with_stats(url: str, asked: list[Asked], show: bool) -> int:
    """Ask each recorded query again with stats=all; the largest peakSamples."""
    peak = 0
    for query in asked:
        if not query.path.startswith("/api/v1/query"):
            continue
        answer = requests.post(url + query.path, data=[*query.params, ("stats", "all")], timeout=600).json()
        stats = answer["data"]["stats"]
        peak = max(peak, stats["samples"]["peakSamples"])
        if show:
            text = " ".join(dict(query.params)["query"].split())
            print(f"    {query.ended - query.started:6.2f} s in the run, {stats['timings']['execTotalTime']:6.2f} s alone, "
                  f"{stats['samples']['peakSamples'] / 1e6:5.2f} M samples: {text[:110]}")
    return peak


def billing_run(prometheus: PrometheusServer, workdir: Path, settings: dict | None = None) -> tuple[Figures, list[Asked]]:
    """One `billing run` of the day through a recording proxy, with a ledger of its own; `settings`: config keys."""
    workdir.mkdir()
    proxy = RecordingProxy(prometheus.url)
    try:
        config = billing_config(workdir, proxy.url, settings)
        cpu_before = cpu_seconds(prometheus.pid)
        wall, usage = run_measured(["-m", "billing", "run", "--date", DAY.isoformat(), "--config", str(config)],
                                   workdir / "billing.log")
        prometheus_cpu = cpu_seconds(prometheus.pid) - cpu_before
    finally:
        proxy.close()
    audits = AUDIT_LOG.findall((workdir / "billing.log").read_text())
    figures = Figures(wall=wall, rss_mb=usage.ru_maxrss / 1024, cpu=usage.ru_utime + usage.ru_stime,
                      queries=len(proxy.asked), peak_samples=0,
                      waiting=busy_seconds([(q.started, q.ended) for q in proxy.asked]),
                      prometheus_cpu=prometheus_cpu, prometheus_rss_mb=math.nan,
                      audit_pods=sum(int(p) for p, _, _ in audits), audit_queries=sum(int(q) for _, q, _ in audits),
                      audit_seconds=sum(float(t) for _, _, t in audits))
    return figures, proxy.asked


def measure_billing(blocks: Path, workdir: Path, repeat: int, show: bool) -> Figures:
    """The fastest of `repeat` runs (the machine is shared: the others were slowed by someone else)."""
    prometheus = start_prometheus(blocks, workdir / "prometheus-billing")
    try:
        runs = [billing_run(prometheus, workdir / f"run-{n}") for n in range(repeat)]
        fastest, asked = min(runs, key=lambda run: run[0].wall)
        prometheus_rss = peak_rss_mb(prometheus.pid)
        peak = replay_with_stats(prometheus.url, asked, show)
    finally:
        prometheus.stop()
    note = "" if repeat == 1 else f"the fastest of {repeat} runs: " + ", ".join(
        f"{figures.wall:.1f} s" for figures, _ in runs)
    return replace(fastest, peak_samples=peak, prometheus_rss_mb=prometheus_rss, note=note)


def measure_baseline(blocks: Path, workdir: Path, sample: int) -> tuple[Figures, dict]:
    prometheus = start_prometheus(blocks, workdir / "prometheus-naive")
    out = workdir / "naive.json"
    try:
        cpu_before = cpu_seconds(prometheus.pid)
        wall, usage = run_measured(["-m", "bench.naive", prometheus.url, "--date", DAY.isoformat(),
                                    "--selector", f'cluster="{CLUSTER}"', "--sample", str(sample), "--out", str(out),
                                    "--prometheus-pid", str(prometheus.pid)],
                                   workdir / "naive.log")
        prometheus_cpu = cpu_seconds(prometheus.pid) - cpu_before
        prometheus_rss = peak_rss_mb(prometheus.pid)
    finally:
        prometheus.stop()
    result = json.loads(out.read_text())
    scale = result["pods"] / max(result["sampled"], 1)
    more = scale - 1  # the pod loop, extrapolated from the sample to every pod
    note = "" if more == 0 else (f"{result['sampled']:,} of {result['pods']:,} pods integrated; the time, CPU and "
                                 f"queries of the pod loop are extrapolated ×{scale:.1f}, peak RSS is the sample's")
    figures = Figures(wall=wall + result["loop_seconds"] * more, rss_mb=usage.ru_maxrss / 1024,
                      cpu=usage.ru_utime + usage.ru_stime + result["loop_cpu"] * more,
                      queries=round(result["queries"] + result["loop_queries"] * more),
                      peak_samples=result["peak_samples"],
                      waiting=result["prometheus_seconds"] + result["loop_prometheus_seconds"] * more,
                      prometheus_cpu=prometheus_cpu + result["loop_prometheus_cpu"] * more,
                      prometheus_rss_mb=prometheus_rss, note=note)
    return figures, result


def agreement(ledger: Path, baseline: dict) -> str:
    """How far the baseline's per-namespace quantities are from the ledger's (only when it saw every pod)."""
    if baseline["sampled"] < baseline["pods"]:
        return "not compared (sampled)"
    with sqlite3.connect(ledger) as db:
        ledger = {(ns, r, m): q for ns, r, m, q in db.execute(
            "select namespace, resource, gpu_model, sum(quantity) from chargeback group by 1, 2, 3")}
    naive = {(ns, r, m): q for ns, r, m, q in baseline["usage"] if q}
    if set(ledger) != set(naive):
        return f"DIFFERENT keys: {sorted(set(ledger) ^ set(naive))[:3]}"
    worst = max(abs(ledger[k] - naive[k]) / abs(naive[k]) for k in naive)
    return f"agree to {worst:.1e} relative"


def measure(pods: int, cache: Path, baseline_pods: int, repeat: int, show: bool) -> SizeResult:
    world = world_of(pods)
    noon = PERIOD.start.timestamp() + PERIOD.seconds / 2
    running = sum(running_at(p, noon) for p in world.clusters[0].pods)
    started = time.perf_counter()
    blocks = world_blocks(world, cache)
    load = time.perf_counter() - started
    print(f"{pods:,} pods ({running:,} running at noon): blocks ready in {load:.0f} s", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"bench-{pods}-") as tmp:
        workdir = Path(tmp)
        billing = measure_billing(blocks, workdir, repeat, show)
        print(f"  billing run: {billing.wall:.1f} s, {billing.rss_mb:.0f} MB, {billing.queries} queries, "
              f"peak {billing.peak_samples / 1e6:.2f} M samples, Prometheus CPU {billing.prometheus_cpu:.1f} s; "
              f"self-audit of {billing.audit_pods} pods {billing.audit_seconds:.2f} s, {billing.audit_queries} queries "
              f"({billing.audit_seconds / billing.wall:.1%} of the run); {billing.note}", flush=True)
        baseline, result = measure_baseline(blocks, workdir, baseline_pods)
        print(f"  per-pod script: {baseline.wall:.1f} s {baseline.note}", flush=True)
        agreed = agreement(workdir / "run-0" / "ledger.db", result)
    return SizeResult(pods, running, load, billing, baseline, agreed)


def table(results: list[SizeResult]) -> str:
    """A Markdown table of every size and strategy, with footnotes for extrapolated figures."""
    lines = ["| pods over the day (running at noon) | strategy | wall | ÷ billing | client peak RSS | client CPU "
             "| queries | peak samples | waiting on Prometheus | own time | own ÷ waiting | Prometheus CPU "
             "| Prometheus peak RSS |",
             "|---" * 13 + "|"]
    notes = []
    for r in results:
        for name, f in (("`billing run`", r.billing), ("per-pod script", r.baseline)):
            mark = ""
            if f.note:
                notes.append(f.note)
                mark = f" [{len(notes)}]"
            lines.append(f"| {r.pods:,} ({r.running_at_noon:,}) | {name} | {f.wall:,.1f} s{mark} "
                         f"| {f.wall / r.billing.wall:,.1f} | {f.rss_mb:,.0f} MB | {f.cpu:,.1f} s | {f.queries:,} "
                         f"| {f.peak_samples / 1e6:.2f} M | {f.waiting:,.1f} s | {f.own:,.1f} s "
                         f"| {f.own / f.waiting:.0%} | {f.prometheus_cpu:,.1f} s | {f.prometheus_rss_mb:,.0f} MB |")
    lines += [""] + [f"[{n}] {note}" for n, note in enumerate(notes, 1)]
    return "\n".join(lines)


def targets(results: list[SizeResult]) -> list[str]:
    """Issue 7's targets, on the largest size; growth between each size and the largest."""
    big = results[-1]
    b = big.billing
    peak = max(r.billing.peak_samples for r in results)
    checks = [
        (f"wall at {big.pods:,} pods ≤ 60 s", b.wall <= TARGETS["wall"], f"{b.wall:.1f} s"),
        (f"peak RSS at {big.pods:,} pods ≤ 500 MB", b.rss_mb <= TARGETS["rss_mb"], f"{b.rss_mb:.0f} MB"),
        ("no query above 10 M samples (20% of the default limit)", peak <= TARGETS["peak_samples"],
         f"at most {peak / 1e6:.2f} M"),
        (f"self-audit ≤ 5% of the run at {big.pods:,} pods", b.audit_seconds <= TARGETS["audit_share"] * b.wall,
         f"{b.audit_seconds:.2f} s of {b.wall:.1f} s ({b.audit_seconds / b.wall:.1%}), {b.audit_queries} of "
         f"{b.queries} queries"),
        (f"own time ≤ 20% of Prometheus' at {big.pods:,} pods", b.own <= TARGETS["own_share"] * b.waiting,
         f"{b.own:.1f} s = {b.own / b.waiting:.0%} of the {b.waiting:.1f} s waiting for answers, "
         f"{b.own / b.prometheus_cpu:.0%} of Prometheus' {b.prometheus_cpu:.1f} s of CPU"),
    ]
    for small in results[:-1]:
        pods, wall = big.pods / small.pods, b.wall / small.billing.wall
        checks.append((f"time grows linearly or better from {small.pods:,} to {big.pods:,} pods", wall <= pods,
                       f"pods ×{pods:.0f}, wall ×{wall:.1f}"))
    return [f"{'PASS' if ok else 'FAIL'}  {what}: {value}" for what, ok, value in checks]


# issue 14: the run with workloads and two cost labels against the run without them
WORKLOADS_OFF = {"workloads": {"enabled": False}}
WORKLOADS_ON = {"workloads": {"enabled": True}, "cost_labels": [EXPERIMENT_LABEL, PROJECT_LABEL]}
WORKLOAD_TARGETS = {"wall_ratio": 1.3, "rss_mb": 500.0}


def ledger_rows(ledger: Path) -> tuple[int, int]:
    """Rows of the day in chargeback and in workload_costs."""
    with sqlite3.connect(ledger) as db:
        return tuple(db.execute(f"select count(*) from {table}").fetchone()[0]
                     for table in ("chargeback", "workload_costs"))


def measure_workloads(pods: int, cache: Path, repeat: int) -> list[str]:
    """`billing run` with workloads off and on (alternately, `repeat` times each; the fastest counts), on one
    Prometheus over the cached blocks: wall, client RSS and CPU, Prometheus CPU, queries, rows per day."""
    blocks = world_blocks(world_of(pods), cache)
    with tempfile.TemporaryDirectory(prefix=f"bench-workloads-{pods}-") as tmp:
        prometheus = start_prometheus(blocks, Path(tmp) / "prometheus")
        try:
            runs: dict[str, list[tuple[Figures, tuple[int, int]]]] = {"off": [], "on": []}
            for n in range(repeat):
                for name, settings in (("off", WORKLOADS_OFF), ("on", WORKLOADS_ON)):
                    workdir = Path(tmp) / f"{name}-{n}"
                    figures, _ = billing_run(prometheus, workdir, settings)
                    runs[name].append((figures, ledger_rows(workdir / "ledger.db")))
        finally:
            prometheus.stop()
    off, on = (min(runs[name], key=lambda run: run[0].wall) for name in ("off", "on"))
    lines = [f"{pods:,} pods, workloads {name}: wall {f.wall:.1f} s (runs: {', '.join(f'{r.wall:.1f}' for r, _ in runs[name])}), "
             f"client peak RSS {f.rss_mb:.0f} MB, client CPU {f.cpu:.1f} s, Prometheus CPU {f.prometheus_cpu:.1f} s, "
             f"{f.queries} queries, self-audit {f.audit_seconds:.1f} s; rows per day: {rows[0]:,} chargeback, "
             f"{rows[1]:,} workload_costs" for name, (f, rows) in (("off", off), ("on", on))]
    ratio = on[0].wall / off[0].wall
    lines += [f"{'PASS' if ratio <= WORKLOAD_TARGETS['wall_ratio'] else 'FAIL'}  wall with workloads and two cost "
              f"labels ≤ 1.3× without: ×{ratio:.2f} (Prometheus CPU ×{on[0].prometheus_cpu / off[0].prometheus_cpu:.2f})",
              f"{'PASS' if on[0].rss_mb <= WORKLOAD_TARGETS['rss_mb'] else 'FAIL'}  client peak RSS with workloads ≤ "
              f"500 MB: {on[0].rss_mb:.0f} MB"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", default="1000,10000,50000", help="comma-separated sizes (default %(default)s)")
    parser.add_argument("--baseline-pods", type=int, default=3000,
                        help="the baseline integrates at most this many pods and extrapolates (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="run billing this many times per size and keep the fastest (default %(default)s)")
    parser.add_argument("--show-queries", action="store_true", help="print each of billing's queries with its figures")
    parser.add_argument("--workloads", action="store_true",
                        help="instead: the run with workloads and two cost labels against the run without (issue 14)")
    args = parser.parse_args()
    missing = [program for program in ("prometheus", "promtool") if not shutil.which(program)]
    if missing:
        sys.exit(f"the benchmark needs {' and '.join(missing)} (Debian package prometheus)")
    sizes = sorted(int(n) for n in args.pods.split(","))
    cache = Path(os.environ.get("BILLING_TSDB_CACHE") or "/tmp/billing-tsdb-cache")
    cache.mkdir(parents=True, exist_ok=True)

    started, load_before = time.perf_counter(), os.getloadavg()[0]
    if args.workloads:
        for n in sizes:
            print("\n".join(measure_workloads(n, cache, args.repeat)), flush=True)
        print(f"took {time.perf_counter() - started:.0f} s (load average {load_before:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after)")
        return
    results = [measure(n, cache, args.baseline_pods, args.repeat, args.show_queries) for n in sizes]
    print()
    print(table(results))
    print()
    for r in results:
        print(f"{r.pods:,} pods: baseline and billing {r.agreement}")
    print("\n".join(targets(results)))
    loads = ", ".join(f"{r.pods:,} pods {r.load_seconds:.0f} s" for r in results)
    print(f"\nbenchmark took {time.perf_counter() - started:.0f} s on {os.cpu_count()} cores "
          f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after); "
          f"loading the days into Prometheus took {loads}")


if __name__ == "__main__":
    main()
