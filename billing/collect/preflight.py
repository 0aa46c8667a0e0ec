"""The preflight of a cluster-day: does the store hold every series the bill reads?

A metric family missing from the store is not an idle cluster. Dropped by a
`metric_relabel_configs` rule or kube-state-metrics' `--metric-denylist`, or
deleted, it makes the bill's queries answer nothing, and the day would be
billed as zero (or too low) and recorded complete. So `billing run` asks this
before it collects a cluster-day, and refuses the day where a family the bill
needs has no sample; `billing check` prints the same findings in the same
words. It takes the cluster-day's context (billing/collect/context.py), as
the collectors do: the store detected once, its questions counted with theirs.
Which families are needed depends on the day: pods' series where
kube-state-metrics listed pods, the pod's node where a pod ran, the GPU model
label where GPUs were requested, owners where workloads are broken down,
dcgm-exporter's DRA labels where pods held resource claims. A day on
which kube-state-metrics listed nodes and no pod is billed as zero.

Everything is asked in one instant query at the day's end (`presence_query`),
each family as `last_over_time` over the day and the 5 minutes before it,
which its first instants see (docs/spec.md "Rule 1: sampling instants").
Reading a family over the day costs the store as much as the bill's own
reading of it (the 20,000-pod day: 4.3 s of Prometheus' CPU, half the bill's
floor), so `billing run` asks the preflight after the usage and leaves out
what the usage's answers have shown already (`Seen`): a pod Running, a pod on
a node, the owners of ReplicaSets and Jobs, and with `requests: containers`
the requests. The judgement is the
same either way: a family the usage's answers hold has a sample in the day,
and the rest are asked as `billing check` asks them.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date
from typing import Literal

from billing.collect.chunks import Chunk
from billing.collect.context import ClusterDay
from billing.collect.promql import (
    APP_REQUESTS,
    CLAIM_INFO,
    CLAIM_PHASE,
    DRA_HELD,
    GPU_UTILISATION,
    INIT_INFO,
    INIT_REQUESTS,
    LOOKBACK,
    VOLUME_CAPACITY,
    GpuResources,
    Queries,
    one_of,
    quote,
)
from billing.config import ClusterConfig
from billing.days import BillingDay
from billing.errors import RunFailed

# kube-state-metrics exports a node label only when allowlisted, under a sanitised name; the usual GPU model labels
NODE_LABELS = {"label_nvidia_com_gpu_product": "nvidia.com/gpu.product",
               "label_cloud_google_com_gke_accelerator": "cloud.google.com/gke-accelerator",
               "label_node_kubernetes_io_instance_type": "node.kubernetes.io/instance-type"}
# extended resources of accelerators, as kube-state-metrics names them: a new one (a MIG profile) must not be free
GPU_LIKE = ("nvidia_com_.*", "amd_com_.*", "habana_ai_.*", "google_com_tpu.*")
SELECTOR_LABELS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
DROPPED = "and no --metric-denylist or metric_relabel_configs rule may drop it"
KUBE_STATE_METRICS = "kube-state-metrics"  # the family of a finding about the exporter as a whole
RENAMED = "a kube-state-metrics older than 2.1.0 (upgrade it) or a metric_relabel_configs rule dropping the label (labeldrop)"
Verdict = Literal["FAIL", "WARN"]


@dataclass(frozen=True)
class Finding:
    """What the preflight found about one metric family of a cluster-day; FAIL refuses the run."""

    family: str  # kube_pod_status_phase, ...; KUBE_STATE_METRICS where the exporter has no sample at all
    cluster: str
    verdict: Verdict
    sentence: str  # what is wrong and the fix, without the day


@dataclass(frozen=True)
class Findings:
    """Every finding of one cluster-day."""

    cluster: str
    day: date
    found: tuple[Finding, ...]

    def said(self, verdict: Verdict) -> str:
        """The findings of one verdict as one sentence, the way `billing check` and `billing run` both say them; ''
        without any."""
        sentences = [finding.sentence for finding in self.found if finding.verdict == verdict]
        return f"on {self.day}: " + "; ".join(sentences) if sentences else ""


class MissingSeries(RunFailed):
    """A family the bill needs has no sample on the cluster-day: the run is refused before the ledger is touched."""


def refuse_missing(findings: Findings) -> None:
    """Refuse the cluster-day where a finding FAILs, naming the cluster, the families and their fixes."""
    failed = findings.said("FAIL")
    if failed:
        raise MissingSeries(f"cluster {findings.cluster}: {failed}; nothing was billed and the ledger keeps the day "
                            "as it was")


@dataclass(frozen=True)
class Need:
    """A family the bill reads: its name, how a sentence names it, the `presence_query` branch that finds it, the
    branches of which any makes it needed on the day, and the fix."""

    family: str
    what: str
    found: str
    where: tuple[str, ...]
    fix: str


PODS = ("phase", "requests", "pod_info", "init_info")  # kube-state-metrics listed pods
NODES = ("allocatable", "node_labels", *PODS)  # kube-state-metrics exported anything at all


def needs(cluster: ClusterConfig, queries: Queries, workloads: bool) -> list[Need]:
    """Every family the bill reads, and where it is needed (`workloads`: broken down by workload)."""
    label = cluster.gpu_model_label
    allowlisted = NODE_LABELS.get(label, f"<the Kubernetes name of {label.removeprefix('label_')}>")
    by_rule = [
        Need(INIT_REQUESTS, INIT_REQUESTS, "init_requests", ("init_info",),
             f"what the scheduler reserves counts init containers' requests (requests: pod); {DROPPED}"),
        Need(INIT_INFO, INIT_INFO, "init_info", ("init_requests",),
             f"it tells native sidecars from init containers (requests: pod); {DROPPED}"),
    ] if queries.rule == "pod" else []
    owners = [
        Need("kube_replicaset_owner", "kube_replicaset_owner", "replicaset_owner", ("replicaset_pods",),
             f"workloads are broken down: a Deployment's pods would count as their ReplicaSet's; kube-state-metrics' "
             f"--resources must include replicasets, {DROPPED}"),
        Need("kube_job_owner", "kube_job_owner", "job_owner", ("job_pods",),
             f"workloads are broken down: a CronJob's pods would count as their Job's; kube-state-metrics' --resources "
             f"must include jobs, {DROPPED}"),
    ] if workloads else []
    return [
        Need("kube_pod_status_phase", "kube_pod_status_phase with the uid label", "phase", PODS,
             f"billing tells pods apart by uid: look for {RENAMED}, {DROPPED}"),
        Need(APP_REQUESTS, APP_REQUESTS, "requests", PODS,
             f"kube-state-metrics must export pods (its --resources must include pods), {DROPPED}"),
        Need("kube_pod_info", f"kube_pod_info with the {queries.ksm.node} label", "pod_node", ("ran",),
             f"a pod's node gives its GPU model and pool: look for {RENAMED}, {DROPPED}"),
        *by_rule,
        *owners,
        Need("kube_node_status_allocatable", "kube_node_status_allocatable", "allocatable", NODES,
             f"kube-state-metrics must export nodes (its --resources must include nodes), {DROPPED}"),
        Need("kube_node_labels", "kube_node_labels", "node_labels", NODES,
             f"the day's coverage is measured by it: kube-state-metrics must export nodes (its --resources must "
             f"include nodes), {DROPPED}"),
        Need("kube_node_labels", f"kube_node_labels with {label}", "gpu_model", ("gpus_on_labelled_nodes",),
             f"run kube-state-metrics with --metric-labels-allowlist=nodes=[{allowlisted}] "
             "(or set clusters[].gpu_model_label to the label your nodes have)"),
        # persistent volumes' storage (docs/spec.md "Storage"): where claims are listed, whether one is bound and
        # what its volume holds
        Need(CLAIM_PHASE, CLAIM_PHASE, "claim_phase", ("claim_info",),
             f"persistent volume claims are listed, and a claim is billed while Bound; {DROPPED}"),
        Need(VOLUME_CAPACITY, VOLUME_CAPACITY, "volume_capacity", ("claim_info",),
             "persistent volume claims are listed, and a bound claim is billed its volume's capacity; "
             f"kube-state-metrics' --resources must include persistentvolumes, {DROPPED}"),
        Need(GPU_UTILISATION, f"{GPU_UTILISATION} with dra_* labels", "dra", ("claims",),
             "pods held resource claims (Dynamic Resource Allocation), and GPUs held that way are in no "
             "container's requests: they would be billed nothing; run dcgm-exporter with --kubernetes-enable-dra "
             "(Helm: kubernetesDRA.enabled=true)"),
    ]


@dataclass(frozen=True)
class Seen:
    """What the usage's answers of a cluster-day showed of the families the preflight asks about (`needs`' names):
    a branch of `presence_query` whose family is here is not asked again. `resources`: the requested resources the
    usage read (its billed ones)."""

    found: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    pods: tuple[str, ...] = ()  # uids of a few pods the usage read requests of: see PROBED

    @staticmethod
    def joined(seen: Iterable[Seen]) -> Seen:
        """What several chunks' answers showed together, with the first PROBE_PODS of their pods."""
        parts = list(seen)
        return Seen(frozenset().union(*(part.found for part in parts)),
                    frozenset().union(*(part.resources for part in parts)),
                    first_pods(uid for part in parts for uid in part.pods))


# Branches the usage's answers cannot show (with `requests: pod` its requests are app and init containers' summed),
# asked first of the few pods `Seen.pods` only: found there, the family is present, at the cost of an index lookup;
# else the branch is asked of every pod, as `billing check` asks it
PROBED = ("requests", "init_requests", "init_info")
PROBE_PODS = 50


def first_pods(uids: Iterable[str]) -> tuple[str, ...]:
    """The first PROBE_PODS uids in sorted order: the pods PROBED families are asked of first."""
    return tuple(heapq.nsmallest(PROBE_PODS, set(uids) - {""}))


def presence_query(queries: Queries, window: str, workloads: bool, seen: Seen = Seen(),
                   branches: Collection[str] | None = None) -> str:
    """One query answering a series {found="<family>"} for each family with a sample in the window. Each large family
    is read once, grouped by what tells the day's needs apart: the Running series by its values (`ran`="1" where a
    pod ran), the requests by `resource`, kube_pod_info by `created_by_kind` and whether it names a node
    (`scheduled`), kube_node_labels by whether it has the GPU model label (`model`). A branch whose family `seen`
    holds is left out, and PROBED ones are asked of `seen.pods` alone where it names some; where the requests are
    not asked of every pod, GPU-like resources the GPU resources do not list are asked alone (`unlisted`: the
    usage reads only the listed ones). `branches`: only these, of every pod."""
    q = queries
    pods = f"uid=~{quote(one_of(seen.pods))}" if seen.pods and branches is None else ""
    running = q.running('uid!=""')  # one series per pod, whatever its phase: every pod's, read once
    scheduled = f'label_replace(last_over_time({q.series("kube_pod_info")}[{window}]), "scheduled", "yes", "{q.ksm.node}", ".+")'
    model = f'label_replace(last_over_time({q.node_labels()}[{window}]), "model", "yes", "{q.model_labels[0]}", ".+")'
    read = {
        "phase": f'count_values("ran", max_over_time({running}[{window}]))',
        "requests": f"count by (resource) (last_over_time({q.series(APP_REQUESTS, pods)}[{window}]))",
        "pod_info": f"count by (created_by_kind, scheduled) ({scheduled})",
        "node_labels": f"count by (model) ({model})",
    }
    small = {"init_requests": INIT_REQUESTS, "init_info": INIT_INFO, "allocatable": "kube_node_status_allocatable",
             "claims": "kube_pod_resourceclaim_info", "claim_info": CLAIM_INFO, "claim_phase": CLAIM_PHASE,
             "volume_capacity": VOLUME_CAPACITY,
             **({"replicaset_owner": "kube_replicaset_owner", "job_owner": "kube_job_owner"} if workloads else {})}
    read |= {branch: f"count(last_over_time({q.series(metric, pods if branch in PROBED else '')}[{window}]))"
             for branch, metric in small.items()}
    read["dra"] = f"count(last_over_time({q.series(GPU_UTILISATION, DRA_HELD)}[{window}]))"
    if "requests" in seen.found or pods:
        listed = f"resource!~{quote(one_of(q.fractions))}" if q.fractions else ""
        unlisted = q.series(APP_REQUESTS, f"resource=~{quote('|'.join(GPU_LIKE))}", listed)
        read["unlisted"] = f"count by (resource) (last_over_time({unlisted}[{window}]))"
    read = {branch: count for branch, count in read.items()
            if branch not in seen.found and (branches is None or branch in branches)}
    return "\nor ".join(f'label_replace({count}, "found", "{branch}", "", "")' for branch, count in read.items())


def found_on(answer: list[dict], gpu_resources: GpuResources, seen: Seen = Seen()) -> tuple[set[str], list[str]]:
    """What the day holds, by the names `needs` uses, from the answer of `presence_query` and what the usage's
    answers showed; and the GPU-like resources requested."""
    found, requested = set(seen.found), set(seen.resources)
    for series in answer:
        labels = series["metric"]
        branch = labels.get("found", "")
        found.add(branch)
        if branch == "phase" and float(labels.get("ran") or 0) > 0:
            found.add("ran")
        elif branch in ("requests", "unlisted") and labels.get("resource"):
            requested.add(labels["resource"])
        elif branch == "pod_info":
            found |= {"pod_node"} if labels.get("scheduled") else set()
            found |= {KIND_PODS.get(labels.get("created_by_kind", ""), "")} - {""}
        elif branch == "node_labels" and labels.get("model"):
            found.add("gpu_model")
    if requested & set(gpu_resources) and "node_labels" in found:
        found.add("gpus_on_labelled_nodes")  # the GPU model label is asked of nodes that have labels at all
    gpu_like = [resource for resource in sorted(requested) if re.fullmatch("|".join(GPU_LIKE), resource)]
    return found, gpu_like


KIND_PODS = {"ReplicaSet": "replicaset_pods", "Job": "job_pods"}  # pods whose controller's owner a workload reads
OWNERS = {"ReplicaSet": "replicaset_owner", "Job": "job_owner"}  # the branches of those owners' families


def preflight(context: ClusterDay, workloads: bool, seen: Seen = Seen()) -> Findings:
    """What the store holds of the families the bill reads on the cluster-day (`workloads`: broken down by workload,
    which reads the owners too): a FAIL per needed family without a sample, a WARN per GPU-like resource requested
    that the context's GPU resources do not list (it would be billed nothing). What the usage's answers have shown
    (`seen`) is taken from them and not asked again."""
    cluster, gpu_resources, day = context.cluster, context.gpu_resources, context.day
    queries, (window, end) = day_queries(context), window_of(day)
    answer = context.source.instant(presence_query(queries, window, workloads, seen), end)
    unproven = [branch for branch in PROBED if seen.pods and branch not in seen.found | found_on(answer, gpu_resources)[0]]
    if unproven:  # not among the few pods: asked of every pod
        answer += context.source.instant(presence_query(queries, window, workloads, seen, unproven), end)
    found, gpu_like = found_on(answer, gpu_resources, seen)
    if not found & set(NODES):
        sentence = no_samples(context)
        return Findings(cluster.name, day.date, (Finding(KUBE_STATE_METRICS, cluster.name, "FAIL", sentence),))
    missing = [Finding(need.family, cluster.name, "FAIL", f"{need.what} is missing ({need.fix})")
               for need in needs(cluster, queries, workloads) if found & set(need.where) and need.found not in found]
    unlisted = [Finding(APP_REQUESTS, cluster.name, "WARN", f"{resource} was requested but is not in gpu_resources, "
                        "so it is billed nothing (add it there if it is a GPU or a slice of one)")
                for resource in gpu_like if resource not in gpu_resources]
    return Findings(cluster.name, day.date, tuple(missing + unlisted))


def day_queries(context: ClusterDay) -> Queries:
    """The queries of the whole cluster-day as one chunk."""
    start, end = int(context.day.start.timestamp()), int(context.day.end.timestamp())
    return Queries(context.cluster, context.gpu_resources, Chunk(start, end, end - start), context.store)


def window_of(day: BillingDay) -> tuple[str, int]:
    """The window of `last_over_time` that sees what the day's instants see (the day and the lookback before it),
    and the time to ask at (the day's end)."""
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    return f"{end - start + LOOKBACK}s", end


def no_samples(context: ClusterDay) -> str:
    """Why a cluster-day has no kube-state-metrics sample under the cluster's selector: the day has none at all
    (outside the store's retention, a scrape that never ran), said first; else the selector matches none of those
    it has, with the values its labels have without it."""
    selector = context.cluster.prometheus.selector.strip()
    names = sorted(set(SELECTOR_LABELS.findall(selector)))
    window, at = window_of(context.day)
    found = context.source.instant(f"count by ({', '.join(names)}) (last_over_time(kube_pod_info[{window}]))", at)
    if not found or not selector:
        unselected = f", with or without the selector {selector}" if selector else ""
        return (f"the store holds no kube-state-metrics sample at all{unselected} (a day outside its retention, or "
                "kube-state-metrics not scraped into it)")
    values = sorted(", ".join(f'{n}="{s["metric"].get(n, "")}"' for n in names) for s in found)
    return (f"the selector {selector} matches no kube-state-metrics series; without it kube_pod_info has "
            f"{' or '.join(values[:10])}{' or more' if len(values) > 10 else ''} (check clusters[].prometheus.selector)")
