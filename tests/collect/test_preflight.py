"""The preflight's judgement of what a day holds: which family is needed where (billing/collect/preflight.py).
A real Prometheus deleting each family: tests/integration/test_preflight_prometheus.py."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.context import ClusterDay, cluster_day
from billing.collect.preflight import Findings, MissingSeries, Seen, preflight, refuse_missing
from billing.collect.stores import DEFAULT_STORE
from billing.config import ClusterConfig
from billing.days import billing_day
from tests.helpers.config import MINIMAL_CONFIG

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
EVERYTHING = {"phase", "requests", "pod_info", "pod_node", "init_requests", "init_info", "allocatable", "node_labels",
              "gpu_model", "gpus_requested", "dra", "ran", "claims", "replicaset_pods", "replicaset_owner",
              "job_pods", "job_owner"}


class Answers:
    """A store holding exactly the facts `found` of a day (EVERYTHING's names), answering the preflight's query as
    Prometheus would: a series per family read, labelled by what tells needs apart; and whose kube_pod_info
    without the selector has `unselected`."""

    def __init__(self, found: set[str], unselected: list[dict] | None = None, gpu_like: tuple[str, ...] = (),
                 of_few: set[str] | None = None):
        self.found, self.unselected, self.gpu_like, self.asked = found, unselected or [], gpu_like, []
        self.of_few = found if of_few is None else of_few  # what a branch asked of a few pods (uid=~) finds

    def instant(self, query: str, at: float) -> list[dict]:
        self.asked.append((query, at))
        branches = re.findall(r'"found", "(\w+)"', query)
        if not branches:
            return self.unselected
        few = {branch for part in query.split("\nor ") if "uid=~" in part
               for branch in re.findall(r'"found", "(\w+)"', part)}
        return [{"metric": {"found": branch, **labels}, "value": [at, "1"]}
                for branch in branches if branch not in few or branch in self.of_few
                for labels in self.series(branch)]

    def series(self, branch: str) -> list[dict[str, str]]:
        """The label sets (besides `found`) the family's count has, grouped as the query groups it."""
        has = self.found
        if branch == "phase":
            return [{"ran": "1" if "ran" in has else "0"}] if "phase" in has else []
        if branch == "requests":
            resources = ["cpu", *(["nvidia_com_gpu"] if "gpus_requested" in has else []), *self.gpu_like]
            return [{"resource": resource} for resource in resources] if "requests" in has else []
        if branch == "unlisted":  # GPU-like resources outside gpu_resources (["nvidia_com_gpu"] here)
            return [{"resource": r} for r in self.gpu_like if r != "nvidia_com_gpu"] if "requests" in has else []
        if branch == "pod_info":
            kinds = {"": "pod_info", "ReplicaSet": "replicaset_pods", "Job": "job_pods"}
            return [{"created_by_kind": kind, **({"scheduled": "yes"} if "pod_node" in has else {})}
                    for kind, fact in kinds.items() if fact in has]
        if branch == "node_labels":
            return [{**({"model": "yes"} if "gpu_model" in has else {})}] if "node_labels" in has else []
        return [{}] if branch in has else []


def cluster(selector: str = "", requests: str = "pod") -> ClusterConfig:
    base = MINIMAL_CONFIG["clusters"][0]
    return ClusterConfig.model_validate({**base, "prometheus": {"url": "http://127.0.0.1:9", "selector": selector},
                                         "requests": requests})


def asking(answers: Answers, selector: str = "", rule: str = "pod") -> ClusterDay:
    """The cluster-day of DAY whose store is `answers`, a Prometheus 2 with plain labels."""
    return cluster_day(cluster(selector, rule), DAY, 60, ["nvidia_com_gpu"], answers, DEFAULT_STORE)


def families(answers: Answers, workloads: bool = True, rule: str = "pod") -> dict[str, str]:
    found = preflight(asking(answers, rule=rule), workloads)
    return {finding.family: finding.verdict for finding in found.found}


def test_a_day_with_every_family_finds_nothing_in_one_query_at_the_days_end():
    answers = Answers(EVERYTHING)
    context = asking(answers)
    assert preflight(context, True).found == ()
    assert context.asked == 1  # counted by the cluster-day, as the collectors' questions are
    [(query, at)] = answers.asked
    assert at == DAY.end.timestamp()
    assert "[86700s]" in query  # the day and the 5 minutes before it, which its first instants see
    assert query.count("kube_pod_status_phase") == query.count("kube_pod_container_resource_requests{") == 1


@pytest.mark.parametrize("missing, family", [
    ("phase", "kube_pod_status_phase"),
    ("requests", "kube_pod_container_resource_requests"),
    ("pod_node", "kube_pod_info"),
    ("init_requests", "kube_pod_init_container_resource_requests"),
    ("init_info", "kube_pod_init_container_info"),
    ("allocatable", "kube_node_status_allocatable"),
    ("gpu_model", "kube_node_labels"),
    ("replicaset_owner", "kube_replicaset_owner"),
    ("job_owner", "kube_job_owner"),
    ("dra", "DCGM_FI_DEV_GPU_UTIL"),
])
def test_each_family_missing_alone_fails_alone(missing, family):
    assert families(Answers(EVERYTHING - {missing})) == {family: "FAIL"}


@pytest.mark.parametrize("absent, not_needed", [
    ({"phase", "requests", "pod_info", "pod_node", "init_requests", "init_info", "ran", "claims", "replicaset_pods",
      "job_pods", "gpus_requested"}, "no pod listed: a day billed as zero needs no pod family"),
    ({"pod_node", "ran", "claims"}, "no pod ran: an unscheduled pod has no node"),
    ({"gpu_model", "gpus_requested"}, "no GPU requested: no GPU model needed"),
    ({"init_requests", "init_info"}, "no init container"),
    ({"replicaset_owner", "replicaset_pods", "job_owner", "job_pods"}, "no pod of a ReplicaSet or Job"),
    ({"dra", "claims"}, "no Running pod held a resource claim"),
])
def test_a_family_is_not_needed_where_the_day_does_not_call_for_it(absent, not_needed):
    assert families(Answers(EVERYTHING - absent)) == {}, not_needed


def test_owners_are_needed_only_with_workloads_and_init_series_only_with_requests_pod():
    assert families(Answers(EVERYTHING - {"replicaset_owner", "job_owner"}), workloads=False) == {}
    assert families(Answers(EVERYTHING - {"init_requests"}), rule="containers") == {}


def test_node_labels_missing_are_said_once_not_again_for_the_gpu_model():
    assert families(Answers(EVERYTHING - {"node_labels", "gpu_model"})) == {"kube_node_labels": "FAIL"}


def test_an_unlisted_gpu_like_resource_is_a_warning():
    found = preflight(asking(Answers(EVERYTHING, gpu_like=("nvidia_com_gpu", "amd_com_gpu"))), True)
    assert found.said("FAIL") == ""
    assert found.said("WARN") == ("on 2026-11-20: amd_com_gpu was requested but is not in gpu_resources, so it is "
                                  "billed nothing (add it there if it is a GPU or a slice of one)")


@pytest.mark.parametrize("selector, unselected, sentence", [
    ("", [], "the store holds no kube-state-metrics sample at all (a day outside its retention, or "
             "kube-state-metrics not scraped into it)"),
    ('cluster="jaguar"', [], 'the store holds no kube-state-metrics sample at all, with or without the selector '
                             'cluster="jaguar" (a day outside its retention, or kube-state-metrics not scraped into it)'),
    ('cluster="jagaur"', [{"metric": {"cluster": "jaguar"}, "value": [0, "40"]}],
     'the selector cluster="jagaur" matches no kube-state-metrics series; without it kube_pod_info has '
     'cluster="jaguar" (check clusters[].prometheus.selector)'),
])
def test_a_day_without_any_sample_says_whether_the_store_or_the_selector_is_empty(selector, unselected, sentence):
    found = preflight(asking(Answers(set(), unselected), selector), True)
    assert [(f.family, f.verdict, f.sentence) for f in found.found] == [("kube-state-metrics", "FAIL", sentence)]


def test_a_run_is_refused_naming_cluster_day_families_and_fixes_in_the_checks_words():
    findings = preflight(asking(Answers(EVERYTHING - {"phase", "allocatable"})), True)
    with pytest.raises(MissingSeries) as refused:
        refuse_missing(findings)
    assert str(refused.value) == (f"cluster jaguar: {findings.said('FAIL')}; nothing was billed and the ledger keeps "
                                  "the day as it was")
    assert findings.said("FAIL").startswith("on 2026-11-20: kube_pod_status_phase with the uid label is missing (")
    assert "; kube_node_status_allocatable is missing (kube-state-metrics must export nodes" in findings.said("FAIL")
    refuse_missing(Findings("jaguar", DAY.date, ()))  # nothing missing: no refusal


def usage_seen(has: set[str], rule: str) -> Seen:
    """What the usage's answers of a day holding the facts `has` show (usage._seen): a pod Running, pods on nodes
    with their controllers, and with `requests: containers` the requests of the billed resources."""
    found = {"phase", "ran"} if {"phase", "ran"} <= has else set()
    kinds = {"pod_info", "replicaset_pods", "job_pods"} & has  # kube_pod_info's series, by their controller
    found |= {"pod_info", "pod_node", *kinds} if kinds and "pod_node" in has else set()
    found |= {"replicaset_owner", "job_owner"} & has  # a ReplicaSet or Job with a controller of its own
    resources = {"cpu", *(["nvidia_com_gpu"] if "gpus_requested" in has else [])} if "requests" in has else set()
    found |= {"requests"} if resources and rule == "containers" else set()
    return Seen(frozenset(found), frozenset(resources))


FACT_SETS = [EVERYTHING, *(EVERYTHING - {fact} for fact in sorted(EVERYTHING)), EVERYTHING - {"ran", "pod_node"},
             EVERYTHING - {"phase", "ran"}, EVERYTHING - {"requests", "gpus_requested"}, set()]


@pytest.mark.parametrize("rule", ["pod", "containers"])
@pytest.mark.parametrize("has", FACT_SETS, ids=lambda has: ",".join(sorted(EVERYTHING - has)) or "everything")
def test_what_the_usage_showed_is_not_asked_again_and_the_findings_are_the_same(has, rule):
    gpu_like = ("nvidia_com_gpu", "amd_com_gpu")
    whole = preflight(asking(Answers(has, gpu_like=gpu_like), rule=rule), True)
    answers = Answers(has, gpu_like=gpu_like)
    seen = usage_seen(has, rule)
    folded = preflight(asking(answers, rule=rule), True, seen)
    assert folded == whole
    query = answers.asked[0][0]  # (a day without any sample asks a second time, why)
    asked = set(re.findall(r'"found", "(\w+)"', query))
    assert not asked & seen.found  # a family the usage showed is not read again
    assert ("requests" in asked) == ("requests" not in seen.found)
    assert ("unlisted" in asked) == ("requests" in seen.found)  # GPU-like resources the usage does not read


@pytest.mark.parametrize("of_few", [{"requests", "init_requests", "init_info"}, {"requests"}, set()],
                         ids=["found-among-them", "no-init-container-among-them", "none-among-them"])
def test_what_the_usage_cannot_show_is_asked_of_a_few_of_its_pods_first_then_of_every_pod(of_few):
    gpu_like = ("nvidia_com_gpu", "amd_com_gpu")
    for has in (EVERYTHING, EVERYTHING - {"init_requests"}, EVERYTHING - {"requests", "gpus_requested"}):
        whole = preflight(asking(Answers(has, gpu_like=gpu_like)), True)
        answers = Answers(has, gpu_like=gpu_like, of_few=of_few & has)
        seen = replace(usage_seen(has, "pod"), pods=("3f1c", "9a0b"))
        assert preflight(asking(answers), True, seen) == whole
        assert 'uid=~"3f1c|9a0b"' in answers.asked[0][0]
        unproven = {"requests", "init_requests", "init_info"} - (of_few & has)  # then asked of every pod
        asked_again = [set(re.findall(r'"found", "(\w+)"', query)) for query, _ in answers.asked[1:]]
        assert asked_again == ([unproven] if unproven else [])
        assert all("uid=~" not in query for query, _ in answers.asked[1:])
