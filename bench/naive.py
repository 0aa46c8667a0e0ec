"""The benchmark's baseline: the simple script one would write first.

For every pod that was Running during the day it asks Prometheus for three
range series at the billing step (the pod's requests, its Running phase, its
node) and integrates them in Python with pandas, following docs/spec.md literally.
It is the obvious way to write the job, and what `billing run` is compared
with. It asks one query at a time, as a simple script does.

    python -m bench.naive URL --date 2026-11-20 --selector 'cluster="jaguar"' --sample 3000 --out naive.json

With --sample N it integrates only N pods picked at random and reports how
long the pod loop took, so the caller can extrapolate to every pod.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import requests

from billing.days import billing_day

LOOKBACK = 300  # Prometheus' default lookback, seconds
GIB = 2**30
GPU_MODEL_LABEL = "label_nvidia_com_gpu_product"
GPU_RESOURCES = ("nvidia_com_gpu",)
USAGE = ["namespace", "resource", "gpu_model", "quantity"]


class Prometheus:
    """Asks with stats=all; counts the queries, the time spent waiting for answers, the samples touched and the largest
    peakSamples."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.queries = 0
        self.seconds = 0.0
        self.peak_samples = 0
        self.samples = 0  # totalQueryableSamples of every answer

    def ask(self, path: str, **params: str | float) -> list[dict]:
        started = time.perf_counter()
        response = self.session.post(f"{self.url}/api/v1/{path}", data={**params, "stats": "all"}, timeout=300)
        self.seconds += time.perf_counter() - started
        response.raise_for_status()
        data = response.json()["data"]
        self.queries += 1
        self.peak_samples = max(self.peak_samples, data["stats"]["samples"]["peakSamples"])
        self.samples += data["stats"]["samples"]["totalQueryableSamples"]
        return data["result"]

    def frame(self, query: str, start: float, end: float, step: float) -> pd.DataFrame:
        """A range query as one row per (series, instant): the series' labels, t and value."""
        answer = self.ask("query_range", query=query, start=start, end=end, step=step)
        return pd.DataFrame([{**series["metric"], "t": float(t), "value": float(v)}
                             for series in answer for t, v in series["values"]])


def running_pods(prom: Prometheus, selector: str, start: float, end: float, step: float) -> list[tuple[str, str, str]]:
    """(namespace, pod, uid) of every pod with a Running sample the day's instants can see."""
    window = int(end - start + LOOKBACK)
    query = (f'group by (namespace, pod, uid) '
             f'(max_over_time(kube_pod_status_phase{{phase="Running"{selector}}}[{window}s]) == 1)')
    answer = prom.ask("query", query=query, time=end - step)
    return sorted((s["metric"]["namespace"], s["metric"]["pod"], s["metric"]["uid"]) for s in answer)


def node_models(prom: Prometheus, selector: str, start: float, last: float, step: float) -> dict[str, pd.DataFrame]:
    """Per node, a frame of (node, t, gpu_model): its newest label set at each instant."""
    query = f"max by (node, {GPU_MODEL_LABEL}) (timestamp(kube_node_labels{{{selector.lstrip(', ')}}}))"
    labels = prom.frame(query, start, last, step)
    labels = labels.reindex(columns=["node", "t", "value", GPU_MODEL_LABEL]).fillna({GPU_MODEL_LABEL: ""})
    newest = labels.sort_values("value").drop_duplicates(["node", "t"], keep="last")
    newest = newest.rename(columns={GPU_MODEL_LABEL: "gpu_model"})[["node", "t", "gpu_model"]]
    return {node: frame for node, frame in newest.groupby("node")}


def pod_usage(prom: Prometheus, pod: tuple[str, str, str], selector: str, start: float, last: float, step: float,
              models: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """docs/spec.md "Billing arithmetic", rules 1 to 5 for one pod: request x Running at every instant, with the node's GPU model."""
    namespace, name, uid = pod
    match = f'namespace="{namespace}", pod="{name}", uid="{uid}"{selector}'
    running = prom.frame(f'kube_pod_status_phase{{phase="Running", {match}}}', start, last, step)
    requests_ = prom.frame(f"kube_pod_container_resource_requests{{{match}}}", start, last, step)
    nodes = prom.frame(f'timestamp(kube_pod_info{{node!="", {match}}})', start, last, step)
    if running.empty or requests_.empty:
        return pd.DataFrame(columns=USAGE)
    running = running.loc[running["value"] == 1, ["t"]].drop_duplicates()
    requests_ = requests_[requests_["resource"].isin(["cpu", "memory", *GPU_RESOURCES])]
    per_container = requests_.groupby(["t", "container", "resource"], as_index=False)["value"].max()
    usage = per_container.merge(running, on="t")
    if nodes.empty:
        usage["node"] = ""
    else:
        newest = nodes.sort_values("value").drop_duplicates("t", keep="last")[["t", "node"]]
        usage = usage.merge(newest, on="t", how="left")
    seen = [models[node] for node in usage["node"].dropna().unique() if node in models]
    if seen:
        usage = usage.merge(pd.concat(seen), on=["node", "t"], how="left").fillna({"gpu_model": ""})
    else:
        usage["gpu_model"] = ""
    usage["quantity"] = usage["value"] * step / 3600
    usage.loc[usage["resource"] == "memory", "quantity"] /= GIB
    is_gpu = usage["resource"].isin(GPU_RESOURCES)
    usage.loc[is_gpu, "resource"] = "gpu"
    usage.loc[~is_gpu, "gpu_model"] = ""
    usage["namespace"] = namespace
    return usage.groupby(USAGE[:3], as_index=False)["quantity"].sum()


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (0 without a pid)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--date", required=True, type=date.fromisoformat)
    parser.add_argument("--timezone", default="UTC")
    parser.add_argument("--step", type=int, default=60)
    parser.add_argument("--selector", default="", help="extra label matchers, e.g. cluster=\"jaguar\"")
    parser.add_argument("--sample", type=int, default=0, help="integrate only this many pods (0: all)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prometheus-pid", type=int, help="to report Prometheus' CPU time during the pod loop")
    args = parser.parse_args()

    started = time.perf_counter()
    day = billing_day(args.date, ZoneInfo(args.timezone))
    start, end = day.start.timestamp(), day.end.timestamp()
    last = end - args.step
    selector = f", {args.selector}" if args.selector else ""
    prom = Prometheus(args.url)
    pods = running_pods(prom, selector, start, end, args.step)
    models = node_models(prom, selector, start, last, args.step)
    chosen = pods if not args.sample or args.sample >= len(pods) else random.Random(0).sample(pods, args.sample)

    loop_started, queries_before, waited_before = time.perf_counter(), prom.queries, prom.seconds
    cpu_before, own_cpu_before = cpu_seconds(args.prometheus_pid), time.process_time()
    parts = [pod_usage(prom, pod, selector, start, last, args.step, models) for pod in chosen]
    usage = pd.concat(parts, ignore_index=True).groupby(USAGE[:3], as_index=False)["quantity"].sum()
    finished = time.perf_counter()

    args.out.write_text(json.dumps({
        "pods": len(pods), "sampled": len(chosen),
        "seconds": finished - started, "prometheus_seconds": prom.seconds, "queries": prom.queries,
        "loop_seconds": finished - loop_started, "loop_prometheus_seconds": prom.seconds - waited_before,
        "loop_queries": prom.queries - queries_before, "peak_samples": prom.peak_samples,
        "loop_cpu": time.process_time() - own_cpu_before,
        "loop_prometheus_cpu": cpu_seconds(args.prometheus_pid) - cpu_before,
        "usage": usage[USAGE].values.tolist(),
    }))


if __name__ == "__main__":
    main()
