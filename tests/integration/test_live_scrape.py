"""A truly live scrape: a real Prometheus scrapes a small exporter every second while its pods come and go and
while the exporter itself is replaced (a new instance, 10 s of overlap), so the staleness markers are the ones
Prometheus writes, not fixtures.ksm's idea of them. The window is billed with a 2-second step.

The expected figures come from what Prometheus stored, read back without PromQL arithmetic: each series' raw
samples (range selectors return real samples, never markers) and every scrape of each target (`up`). A marker
goes where a series present in one scrape of its target is missing from the next, or the next failed; at an
instant a copy shows its latest sample of the last 5 minutes unless a marker came after it. That model is first
checked against Prometheus' own instant queries, instant by instant."""

from __future__ import annotations

import json
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from billing.collect.audit import audit_cluster
from billing.collect.prometheus import LivePrometheus
from billing.collect.stores import store_of
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from billing.days import BillingDay
from fixtures.servers import ManagedProcess, free_port, start_prometheus

STEP = 2
WINDOW = 90  # seconds billed
REPLACED = (41, 51)  # the second exporter starts, the first is killed (seconds after the origin)
# seconds after the origin, odd, so that no event falls on an even instant
PODS = [
    {"namespace": "alice", "pod": "steady", "uid": "u-steady", "cpu": 2, "created": -60, "deleted": 1000,
     "phases": [[-60, "Running"]]},
    {"namespace": "bob", "pod": "deleted", "uid": "u-deleted", "cpu": 1, "created": -60, "deleted": 31,
     "phases": [[-60, "Running"]]},
    {"namespace": "carol", "pod": "finished", "uid": "u-finished", "cpu": 0.5, "created": -60, "deleted": 81,
     "phases": [[-60, "Running"], [61, "Succeeded"]]},
    {"namespace": "dave", "pod": "late", "uid": "u-late", "cpu": 0.25, "created": 21, "deleted": 1000,
     "phases": [[21, "Pending"], [25, "Running"]]},
]


def exporter(port: int, schedule: Path, origin: int, work: Path) -> ManagedProcess:
    return ManagedProcess([sys.executable, "-m", "fixtures.live_exporter", "--port", str(port), "--schedule",
                           str(schedule), "--origin", str(origin)], work / f"exporter-{port}.log")


def sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))


def visible(samples: dict[float, float], scrapes: list[tuple[float, bool]], t: float) -> float | None:
    """What an instant query at t sees of one series of one target: its latest sample in [t - 300 s, t], unless a
    marker came after it (at the first scrape of the target that failed or did not have the series)."""
    events = sorted(samples.items())
    had = False
    for ts, ok in scrapes:
        present = ok and ts in samples
        if had and not present:
            events.append((ts, math.nan))
        had = present
    seen = [(ts, value) for ts, value in sorted(events) if t - 300 <= ts <= t]
    return None if not seen or math.isnan(seen[-1][1]) else seen[-1][1]


def test_a_live_scrape_with_a_replaced_exporter_bills_what_instant_queries_see(tmp_path):
    schedule = tmp_path / "pods.json"
    schedule.write_text(json.dumps({"nodes": {"node-a": 16}, "pods": [
        {**pod, "node": "node-a", "containers": [{"name": "main", "cpu": pod["cpu"], "memory": 0}]} for pod in PODS]}))
    origin = math.ceil((time.time() + 6) / 10) * 10
    first, second = free_port(), free_port()
    scrape = ("[{job_name: kube-state-metrics, scrape_interval: 1s, scrape_timeout: 900ms, honor_labels: true, "
              f"static_configs: [{{targets: ['127.0.0.1:{first}', '127.0.0.1:{second}']}}]}}]")
    prometheus = start_prometheus(None, tmp_path / "prometheus", scrape_configs=scrape)
    old = exporter(first, schedule, origin, tmp_path)
    new = None
    try:
        sleep_until(origin + REPLACED[0])
        new = exporter(second, schedule, origin, tmp_path)
        sleep_until(origin + REPLACED[1])
        old.kill()
        sleep_until(origin + WINDOW + 3)

        start, end = datetime.fromtimestamp(origin, timezone.utc), datetime.fromtimestamp(origin + WINDOW, timezone.utc)
        day = BillingDay(start.date(), start, end)
        config = ClusterConfig(name="live", prometheus={"url": prometheus.url, "retries": 0},
                               prices={"cpu_core_hour": 1.0, "memory_gib_hour": 0.0, "gpu_hour": 1.0})
        source = LivePrometheus("live", config.prometheus)
        at = origin + WINDOW + 2

        def raw(selector: str) -> list[dict]:
            return source.instant(f"{selector}[5m]", at)

        scrapes = {s["metric"]["instance"]: [(float(ts), v == "1") for ts, v in s["values"]]
                   for s in raw('up{job="kube-state-metrics"}')}
        assert len(scrapes) == 2 and not all(ok for _, ok in scrapes[f"127.0.0.1:{first}"])  # killed at 51 s
        running = {(s["metric"]["instance"], s["metric"]["uid"]): {float(ts): float(v) for ts, v in s["values"]}
                   for s in raw('kube_pod_status_phase{phase="Running"}')}
        cpu = {(s["metric"]["instance"], s["metric"]["uid"]): {float(ts): float(v) for ts, v in s["values"]}
               for s in raw('kube_pod_container_resource_requests{resource="cpu"}')}
        instants = range(origin, origin + WINDOW, STEP)

        # the model of markers against Prometheus' own instant queries, at every instant
        for t in instants:
            answered = {(s["metric"]["instance"], s["metric"]["uid"]): float(s["value"][1])
                        for s in source.instant('kube_pod_status_phase{phase="Running"}', t)}
            modelled = {key: value for key, samples in running.items()
                        if (value := visible(samples, scrapes[key[0]], t)) is not None}
            assert answered == modelled, t

        expected = {pod["namespace"]: 0.0 for pod in PODS}
        for pod in PODS:
            for t in instants:
                copies = [key for key in running if key[1] == pod["uid"]]
                if any(visible(running[key], scrapes[key[0]], t) == 1 for key in copies):
                    requests = [visible(cpu[key], scrapes[key[0]], t) for key in copies if key in cpu]
                    expected[pod["namespace"]] += max(r for r in requests if r is not None) * STEP / 3600
        # by the schedule: a pod counts at the even instants strictly inside its Running time
        assert expected == pytest.approx({"alice": 2 * 45 * STEP / 3600, "bob": 1 * 16 * STEP / 3600,
                                          "carol": 0.5 * 31 * STEP / 3600, "dave": 0.25 * 32 * STEP / 3600})

        store = store_of(source, config, day)
        usage = collect_cluster(config, day, STEP, ["nvidia_com_gpu"], source, store)
        assert usage.copies  # both exporters reported the pods between 41 and 51 s
        got = usage.usage.groupby("namespace")["quantity"].sum().to_dict()
        assert got == pytest.approx(expected, rel=1e-9)
        audit_cluster(config, day, STEP, ["nvidia_com_gpu"], source, usage.running, usage.exact, 10, store)
    finally:
        for process in (old, new):
            if process is not None and process.alive():
                process.stop()
        prometheus.stop()
