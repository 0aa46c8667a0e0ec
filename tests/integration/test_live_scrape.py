"""A truly live scrape: a real Prometheus scrapes a small exporter (fixtures/live_exporter.py) every second while
its pods come and go and while the exporter itself is replaced (a new instance, a few seconds of overlap), so the
staleness markers are the ones Prometheus writes, not fixtures.ksm's idea of them. The window is billed with a
2-second step, CPU and memory, and audited.

The expected figures come from what Prometheus stored, read back without PromQL arithmetic: each series' raw
samples (range selectors return real samples, never markers) and every scrape of each target (`up`). A marker
goes where a series present in one scrape of its target is missing from the next, or the next failed; at an
instant a copy shows its latest sample of the last 5 minutes unless a marker came after it. That model is first
checked against Prometheus' own instant queries, at every instant and on both sides of every marker."""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from billing.collect.audit import AuditError, audit_cluster
from billing.collect.context import cluster_day
from billing.collect.prometheus import LivePrometheus
from billing.collect.usage import collect_cluster
from billing.config import ClusterConfig
from billing.days import BillingDay
from fixtures.ksm import STALE_NAN
from fixtures.reference import latest_sample
from fixtures.servers import ManagedProcess, accepts_connections, free_port, start_prometheus

STEP = 2  # seconds between billed instants
WINDOW = 60  # seconds billed, from the origin: every event below is 4 s or more (4 scrapes) from the next
REPLACED = (27, 33)  # the second exporter starts, the first is killed (seconds after the origin)
LOOKBACK = 300_000  # ms: Prometheus 2.42 sees a sample this old, and no older
GPUS = ["nvidia_com_gpu"]
RUNNING = 'kube_pod_status_phase{phase="Running"}'
REQUESTS = "kube_pod_container_resource_requests"
MIB, GIB = 2**20, 2**30
NODES = {"node-a": 16}
# seconds after the origin, odd, so that no event falls on an even instant
PODS: list[dict[str, Any]] = [  # as the exporter's schedule has them
    {"namespace": "alice", "pod": "steady", "uid": "u-steady", "created": -60, "deleted": 1000,
     "phases": [[-60, "Running"]], "containers": [{"name": "main", "cpu": 2, "memory": GIB}]},
    {"namespace": "bob", "pod": "deleted", "uid": "u-deleted", "created": -60, "deleted": 21,
     "phases": [[-60, "Running"]], "containers": [{"name": "main", "cpu": 1, "memory": 512 * MIB}]},
    {"namespace": "carol", "pod": "finished", "uid": "u-finished", "created": -60, "deleted": 51,
     "phases": [[-60, "Running"], [41, "Succeeded"]], "containers": [{"name": "main", "cpu": 0.5, "memory": 256 * MIB}]},
    {"namespace": "dave", "pod": "late", "uid": "u-late", "created": 11, "deleted": 1000,
     "phases": [[11, "Pending"], [15, "Running"]],
     "containers": [{"name": "main", "cpu": 0.25, "memory": 256 * MIB}, {"name": "sidecar", "cpu": 0.125,
                                                                         "memory": 64 * MIB}]},
]
Usage = dict[tuple[str, str], float]  # (namespace, resource) -> resource-hours, memory in GiB-hours


@dataclass(frozen=True)
class Copy:
    """One series of a pod as one exporter instance reported it (container and resource: requests only)."""

    instance: str
    namespace: str
    uid: str
    container: str = ""
    resource: str = ""

    @classmethod
    def of(cls, labels: dict[str, str]) -> Copy:
        return cls(labels["instance"], labels["namespace"], labels["uid"], labels.get("container", ""),
                   labels.get("resource", ""))


Timeline = list[tuple[int, float]]  # (ms, value) in time order; STALE_NAN: a staleness marker


def ms(seconds: float | str) -> int:
    return round(float(seconds) * 1000)


def timeline(samples: dict[int, float], scrapes: list[tuple[int, bool]]) -> Timeline:
    """A series' samples and the markers Prometheus' scrape loop writes for it: at the first scrape of its target
    that failed or lacked it, after one that had it (the target stays configured, so no end-of-run marker)."""
    events = dict(samples)
    had = False
    for at, ok in scrapes:
        present = ok and at in samples
        if had and not present:
            events[at] = STALE_NAN
        had = present
    return sorted(events.items())


def seen(events: Timeline, t: int) -> float | None:
    """What an instant query at t (ms) sees of one series: its latest sample in [t - 5 min, t], none if that is
    a marker (fixtures.reference's lookup)."""
    sample = latest_sample(events, t, LOOKBACK)
    return None if sample is None else sample[1]


def modelled(timelines: dict[Copy, Timeline], t: int) -> dict[Copy, float]:
    return {copy: value for copy, events in timelines.items() if (value := seen(events, t)) is not None}


def expected_usage(running: dict[Copy, Timeline], requests: dict[Copy, Timeline], instants: Iterable[int]) -> Usage:
    """docs/spec.md's arithmetic over what instant queries see: at each instant a pod counts once, Running if any
    copy says 1, each container's request the largest any copy shows, summed over containers."""
    usage: Usage = defaultdict(float)
    pods = {(copy.namespace, copy.uid) for copy in running}
    for t in instants:
        for namespace, uid in pods:
            if not any(seen(events, t) == 1 for copy, events in running.items() if copy.uid == uid):
                continue
            largest: dict[tuple[str, str], float] = {}
            for copy, events in requests.items():
                if copy.uid == uid and (value := seen(events, t)) is not None:
                    key = (copy.container, copy.resource)
                    largest[key] = max(largest.get(key, value), value)
            for (_, resource), value in largest.items():
                usage[(namespace, resource)] += value / (GIB if resource == "memory" else 1) * STEP / 3600
    return dict(usage)


def scheduled_usage(instants: Iterable[int]) -> Usage:
    """The same figures from the schedule alone: what the live run should have given if every scrape went well."""
    usage: Usage = defaultdict(float)
    for t in instants:
        for pod in PODS:
            now = t / 1000
            if pod["created"] <= now < pod["deleted"] and [p for at, p in pod["phases"] if at <= now][-1] == "Running":
                for container in pod["containers"]:
                    usage[(pod["namespace"], "cpu")] += container["cpu"] * STEP / 3600
                    usage[(pod["namespace"], "memory")] += container["memory"] / GIB * STEP / 3600
    return dict(usage)


@pytest.fixture
def started() -> Iterator[list[ManagedProcess]]:
    """Prometheus and the exporters the test starts, stopped by process id at its end."""
    processes: list[ManagedProcess] = []
    yield processes
    for process in reversed(processes):
        process.stop()


def exporter(port: int, schedule: Path, origin: int, work: Path) -> ManagedProcess:
    return ManagedProcess([sys.executable, "-m", "fixtures.live_exporter", "--port", str(port), "--schedule",
                           str(schedule), "--origin", str(origin)], work / f"exporter-{port}.log",
                          cwd=Path(__file__).parents[2])


def sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))


def test_a_live_scrape_with_a_replaced_exporter_bills_what_instant_queries_see(tmp_path, started):
    first, second = free_port(), free_port()
    old, new = f"127.0.0.1:{first}", f"127.0.0.1:{second}"
    scrape = ("[{job_name: kube-state-metrics, scrape_interval: 1s, scrape_timeout: 900ms, honor_labels: true, "
              f"static_configs: [{{targets: ['{old}', '{new}']}}]}}]")
    prometheus = start_prometheus(None, tmp_path / "prometheus", scrape_configs=scrape)
    started.append(prometheus.process)
    config = ClusterConfig(name="live", prometheus={"url": prometheus.url, "retries": 0},
                           prices={"cpu_core_hour": 1.0, "memory_gib_hour": 1.0, "gpu_hour": 1.0})
    source = LivePrometheus(config.name, config.prometheus)
    # Prometheus applies its targets up to 5 s after it is ready: the window starts once it scrapes them (and fails)
    prometheus.process.wait_until(lambda: bool(source.instant("up", time.time())), "Prometheus' first scrape")
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"nodes": NODES, "pods": [{**pod, "node": "node-a"} for pod in PODS]}))
    origin = math.ceil((time.time() + 3) / 10) * 10  # step-aligned, with a few scrapes of the first exporter before
    replaced = exporter(first, schedule, origin, tmp_path)
    started.append(replaced)
    replaced.wait_until(accepts_connections(first), "live exporter", timeout=3)
    sleep_until(origin + REPLACED[0])
    started.append(exporter(second, schedule, origin, tmp_path))
    sleep_until(origin + REPLACED[1])
    replaced.kill()
    read_at = origin + WINDOW + 3
    sleep_until(read_at)  # the markers after the last instant are written

    def stored(selector: str) -> dict[Copy, dict[int, float]]:
        return {Copy.of(s["metric"]): {ms(ts): float(v) for ts, v in s["values"]}
                for s in source.instant(f"{selector}[10m]", read_at)}

    scrapes = {s["metric"]["instance"]: [(ms(ts), v == "1") for ts, v in s["values"]]
               for s in source.instant('up{job="kube-state-metrics"}[10m]', read_at)}
    assert sorted(scrapes) == sorted([old, new]) and not scrapes[old][-1][1]  # killed at REPLACED[1]
    running = {copy: timeline(samples, scrapes[copy.instance]) for copy, samples in stored(RUNNING).items()}
    requests = {copy: timeline(samples, scrapes[copy.instance]) for copy, samples in stored(REQUESTS).items()}
    for copy, events in (running | requests).items():  # every sample came from a scrape of its own target
        assert {at for at, value in events if not math.isnan(value)} <= {at for at, _ in scrapes[copy.instance]}

    # what the run should have made Prometheus write: markers for the deleted pod, the finished one, the killed exporter
    def first_marker(copy: Copy) -> float:
        return next((at for at, value in running[copy] if math.isnan(value)), math.inf) / 1000 - origin

    deleted = {pod["uid"]: pod["deleted"] for pod in PODS}
    assert deleted["u-deleted"] <= first_marker(Copy(old, "bob", "u-deleted")) < deleted["u-deleted"] + 2
    assert deleted["u-finished"] <= first_marker(Copy(new, "carol", "u-finished")) < deleted["u-finished"] + 2
    assert REPLACED[1] <= first_marker(Copy(old, "alice", "u-steady")) < REPLACED[1] + 2
    assert Copy(new, "bob", "u-deleted") not in running

    # the model of markers against Prometheus' own instant queries: at every instant, and on both sides of every marker
    instants = range(origin * 1000, (origin + WINDOW) * 1000, STEP * 1000)
    markers = {at for events in (running | requests).values() for at, value in events if math.isnan(value)}
    for t in sorted({*instants, *markers, *(at - 1 for at in markers)}):
        for selector, timelines in ((RUNNING, running), (REQUESTS, requests)):
            answered = {Copy.of(s["metric"]): float(s["value"][1]) for s in source.instant(selector, t / 1000)}
            assert answered == modelled(timelines, t), (selector, t / 1000 - origin)

    expected = expected_usage(running, requests, instants)

    start = datetime.fromtimestamp(origin, timezone.utc)
    day = BillingDay(start.date(), start, datetime.fromtimestamp(origin + WINDOW, timezone.utc))
    context = cluster_day(config, day, STEP, GPUS, source)
    usage = collect_cluster(context)
    assert usage.copies  # both exporters reported the pods between REPLACED[0] and REPLACED[1]
    billed = {key: float(value) for key, value in usage.usage.groupby(["namespace", "resource"])["quantity"].sum().items()}
    try:
        audit_cluster(context, [pod["uid"] for pod in PODS], usage.exact, len(PODS))
        audit = "passed"
    except AuditError as error:
        audit = str(error)
    assert billed == pytest.approx(expected, rel=1e-9), f"self-audit: {audit}"
    assert audit == "passed"
    # by the schedule: a pod counts at the even instants strictly inside its Running time
    assert expected == pytest.approx(scheduled_usage(range(0, WINDOW * 1000, STEP * 1000)), rel=1e-9), \
        "the live run did not go as scheduled (scrapes failed or came late?)"
