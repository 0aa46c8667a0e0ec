"""The collection's refusal of a cluster-day without data (docs/spec.md "Rule 10: no data is not zero"), case by case."""

from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.collect.day import IncompleteDayError, refuse_no_data
from billing.collect.usage import ClusterUsage
from billing.config import ClusterConfig
from tests.helpers.config import MINIMAL_CONFIG

CLUSTER = ClusterConfig.model_validate(MINIMAL_CONFIG["clusters"][0])
USED = pd.DataFrame([["alice", "cpu", "", "", "", 2.0]], columns=frames.USAGE.columns)
NOTHING = pd.DataFrame(columns=frames.USAGE.columns)


@pytest.mark.parametrize("coverage, pods, usage", [
    (1.0, 0, NOTHING),  # kube-state-metrics scraped all day, no pod ran: a day billed at 0
    (5 / 1440, 0, NOTHING),  # five instants saw samples: data, if little
    (0.0, 3, USED),  # no kube_node_labels at all (billing check says so), but pods were seen Running
])
def test_a_day_with_some_sample_is_billed(coverage, pods, usage):
    refuse_no_data(ClusterUsage("jaguar", usage, pods, 8, coverage), CLUSTER, date(2026, 11, 20))


def test_a_day_without_any_sample_is_refused_naming_cluster_and_day():
    with pytest.raises(IncompleteDayError, match=r"^cluster jaguar: Prometheus holds no kube-state-metrics sample "
                                                 r"for 2026-11-20 at all \(a selector typo"):
        refuse_no_data(ClusterUsage("jaguar", NOTHING, 0, 8, 0.0), CLUSTER, date(2026, 11, 20))


def test_the_billed_day_leaves_out_what_only_the_collection_reads():
    """Waste's pod-hours, the pods' workloads per chunk and the Running and exact pods are not held through the bill,
    the ledger and the pages; the usage, its pods and coverage are."""
    collected = ClusterUsage("jaguar", USED, 3, 8, 1.0, running=frozenset({"uid-1"}), exact=frozenset({"uid-1"}),
                             pod_workloads=({("alice", "train-1"): "Job/train-1"},),
                             pod_hours=pd.DataFrame([["uid-1", "alice", "train-1", 3600, 60.0, 2.0]],
                                                    columns=frames.POD_HOURS.columns))
    billed = collected.billed()
    assert (billed.running, billed.exact, billed.pod_workloads, len(billed.pod_hours)) == (frozenset(), frozenset(), (), 0)
    assert (billed.usage is collected.usage, billed.pods, billed.coverage) == (True, 3, 1.0)
