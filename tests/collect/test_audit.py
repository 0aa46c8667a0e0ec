"""The self-audit's Python arithmetic against fixtures.reference, and how it picks pods and words a failure."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from click.testing import CliRunner

import billing.collect.day
from billing.cli import main
from billing.collect.audit import EXACT_PODS, Audit, _disagreement, audited_pods, recompute
from billing.config import ConfigError, load_config
from billing.days import billing_day
from fixtures.ksm import GPU_PRODUCT_LABEL, make_world, series
from fixtures.reference import instants, latest_sample, reference_usage
from tests.helpers.jobs import config  # noqa: F401 (pytest fixtures)

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))


def gpu_model_of(labels: dict[str, str]) -> str:
    return labels.get(GPU_PRODUCT_LABEL, "")
START, END = DAY.start.timestamp(), DAY.end.timestamp()
TIMED = ("kube_pod_info", "kube_node_labels")  # the audit reads their samples' timestamps


def answered(raw, at):
    """What instant queries at `at` answer for raw series, by fixtures.reference's lookup: the value, or the
    sample's timestamp for kube_pod_info and kube_node_labels (as the audit asks the store for them)."""
    for name, labels, samples in raw:
        seen = [(t, latest_sample(samples, t)) for t in at]
        yield name, labels, [(t, sample[0] if name in TIMED else sample[1]) for t, sample in seen if sample]


@pytest.mark.parametrize("step", [60, 300])
def test_recomputed_pods_add_up_to_the_reference(step):
    world = make_world(21, START, pods=80)  # every resource and GPU model of a bigger world, at half the cost
    raw = list(series(world))  # every family and phase: recompute picks what the bill reads
    namespace_of = {labels["uid"]: labels["namespace"] for name, labels, _ in raw if name == "kube_pod_info"}
    at = instants(START, END, step)
    per_pod = recompute(answered(raw, at), at, step, ["nvidia_com_gpu"], gpu_model_of)
    by_namespace: dict[tuple, float] = defaultdict(float)
    for (uid, resource, model), hours in per_pod.items():
        by_namespace[(namespace_of[uid], resource, model)] += hours
    expected = reference_usage(world, "jaguar", START, END, step)
    assert sorted(by_namespace) == sorted(k for k, v in expected.items() if v)
    for key, hours in expected.items():
        assert by_namespace[key] == pytest.approx(hours, rel=1e-12), key
    assert {resource for _, resource, _ in per_pod} == {"cpu", "memory", "gpu"}


def test_replicas_of_a_series_count_once():
    running = [(START + 60 * i, 1.0) for i in range(10)]
    request = [(START + 60 * i, 2.0) for i in range(10)]
    pod = {"namespace": "alice", "pod": "p", "uid": "u1"}
    raw = [
        *[("kube_pod_status_phase", {**pod, "phase": "Running", "prometheus_replica": r}, running) for r in "ab"],
        *[("kube_pod_container_resource_requests", {**pod, "container": "c", "resource": "cpu", "replica": r}, request)
          for r in "ab"],
    ]
    # instants 0..9 minutes see a sample; 10..14 still see the one at 9 minutes (5 minutes of lookback)
    at = instants(START, END, 60)
    assert recompute(answered(raw, at), at, 60, ["nvidia_com_gpu"], gpu_model_of) == {
        ("u1", "cpu", ""): pytest.approx(2.0 * 15 / 60, rel=1e-15)}


def test_an_exporter_replaced_counts_each_instant_once():
    """kube-state-metrics replaced after 10 minutes: the old copy lingers for the lookback beside the new one,
    and the pod counts once per instant, at the larger request either copy shows."""
    pod = {"namespace": "alice", "pod": "p", "uid": "u1"}
    old, new = range(0, 10), range(10, 20)
    raw = [
        ("kube_pod_status_phase", {**pod, "phase": "Running", "instance": "a"}, [(START + 60 * i, 1.0) for i in old]),
        ("kube_pod_status_phase", {**pod, "phase": "Running", "instance": "b"}, [(START + 60 * i, 1.0) for i in new]),
        ("kube_pod_container_resource_requests", {**pod, "container": "c", "resource": "cpu", "instance": "a"},
         [(START + 60 * i, 2.0) for i in old]),
        ("kube_pod_container_resource_requests", {**pod, "container": "c", "resource": "cpu", "instance": "b"},
         [(START + 60 * i, 2.0) for i in new]),
    ]
    at = instants(START, END, 60)  # minutes 0 ... 19 seen, and 20 ... 24 through the lookback: 25 instants
    assert recompute(answered(raw, at), at, 60, ["nvidia_com_gpu"], gpu_model_of) == {
        ("u1", "cpu", ""): pytest.approx(2.0 * 25 / 60, rel=1e-15)}


def test_the_request_is_what_the_scheduler_reserves_instant_by_instant():
    """App 1 core, a 4-core init container, a 0.5-core sidecar and a 0.25-core overhead, Running for 10 minutes
    (10 instants, and 5 more through the lookback): max(1 + 0.5, 4 + 0.5) + 0.25 = 4.75 cores. Before the
    sidecar's info series shows (its first 3 instants) it counts as an init container: max(1, 4, 0.5) + 0.25 =
    4.25. With `requests: containers`, 1 core."""
    pod = {"namespace": "alice", "pod": "p", "uid": "u1"}
    minutes = [START + 60 * i for i in range(10)]
    raw = [
        ("kube_pod_status_phase", {**pod, "phase": "Running"}, [(t, 1.0) for t in minutes]),
        ("kube_pod_container_resource_requests", {**pod, "container": "main", "resource": "cpu"},
         [(t, 1.0) for t in minutes]),
        ("kube_pod_init_container_resource_requests", {**pod, "container": "fetch", "resource": "cpu"},
         [(t, 4.0) for t in minutes]),
        ("kube_pod_init_container_resource_requests", {**pod, "container": "proxy", "resource": "cpu"},
         [(t, 0.5) for t in minutes]),
        ("kube_pod_init_container_info", {**pod, "container": "proxy", "restart_policy": "Always"},
         [(t, 1.0) for t in minutes[3:]]),
        ("kube_pod_init_container_info", {**pod, "container": "fetch"}, [(t, 1.0) for t in minutes]),
        ("kube_pod_overhead_cpu_cores", pod, [(t, 0.25) for t in minutes]),
    ]
    at = instants(START, END, 60)
    assert recompute(answered(raw, at), at, 60, ["nvidia_com_gpu"], gpu_model_of) == {
        ("u1", "cpu", ""): pytest.approx((3 * 4.25 + 12 * 4.75) / 60, rel=1e-15)}
    assert recompute(answered(raw, at), at, 60, ["nvidia_com_gpu"], gpu_model_of, rule="containers") == {
        ("u1", "cpu", ""): pytest.approx(15 / 60, rel=1e-15)}


def test_the_pods_audited_are_the_same_on_every_run_and_include_the_exact_path():
    running = [f"uid-{n:03d}" for n in range(200)]
    exact = [f"exact-{n:02d}" for n in range(30)]
    chosen = audited_pods("jaguar", DAY, running, exact, 20)
    assert chosen == audited_pods("jaguar", DAY, reversed(running), exact, 20)
    assert len([u for u in chosen if u.startswith("uid-")]) == 20
    assert len([u for u in chosen if u.startswith("exact-")]) == EXACT_PODS
    assert chosen != audited_pods("ibis", DAY, running, exact, 20)  # another cluster, another sample
    assert audited_pods("jaguar", DAY, running[:5], exact[:2], 20) == sorted(running[:5] + exact[:2])  # all when fewer


def test_a_disagreement_names_cluster_pod_resource_and_both_figures():
    raw = {("u1", "cpu", ""): 3.0, ("u1", "gpu", "H100"): 1.5}
    assert _disagreement("jaguar", DAY, raw, dict(raw), {"u1": "alice/train-1"}) is None
    close = {key: value * (1 + 1e-12) for key, value in raw.items()}
    assert _disagreement("jaguar", DAY, raw, close, {"u1": "alice/train-1"}) is None
    sentence = _disagreement("jaguar", DAY, raw, {**raw, ("u1", "gpu", "H100"): 1.6}, {"u1": "alice/train-1"})
    assert sentence.startswith("self-audit of cluster jaguar on 2026-11-20 failed: pod alice/train-1 (uid u1) has "
                               "1.5 gpu (H100) resource-hours instant by instant but 1.6 by the billing queries")
    missing = _disagreement("jaguar", DAY, raw, {("u1", "cpu", ""): 3.0}, {"u1": "alice/train-1"})
    assert "has 1.5 gpu (H100) resource-hours instant by instant but 0 by the billing queries" in missing


def test_audit_pods_must_be_positive(write_config):
    with pytest.raises(ConfigError, match=r"audit\.pods"):
        load_config(write_config(audit={"pods": 0}))


@pytest.mark.parametrize("enabled", [True, False])
def test_the_run_audits_each_cluster_unless_switched_off(config, monkeypatch, tmp_path, enabled):
    audited = []
    monkeypatch.setattr(billing.collect.day, "audit_cluster",
                        lambda context, *args: audited.append(context.cluster.name) or Audit(20, 26, 0.5))
    path = Path(config())
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "audit": {"enabled": enabled}}))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert audited == (["jaguar"] if enabled else [])
