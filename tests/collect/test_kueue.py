"""Of Kueue's replicas, which copy of a quota figure is read (docs/spec.md "Kueue quotas", Replicas)."""

import pytest

from billing.collect.kueue import NOMINAL, USAGE, ReplicasDisagree, one_replica

QUEUE = ("research", "robotics-cq", "h100", "nvidia.com/gpu")


def copy(role: str, instance: str, value: float, t: float = 0.0, family: str = NOMINAL) -> tuple:
    return (family, *QUEUE, role, instance, t, value)


def read(*copies: tuple) -> list[tuple]:
    return sorted(tuple(row) for row in one_replica(copies, "jaguar").itertuples(index=False))


def test_the_leaders_copy_is_read_whatever_the_others_say():
    assert read(copy("follower", "b", 100.0), copy("leader", "a", 8.0), copy("standalone", "c", 50.0)) == [
        (NOMINAL, *QUEUE, 0.0, 8.0)]


def test_without_a_leader_a_copy_that_is_no_followers_then_a_followers():
    assert read(copy("follower", "b", 100.0), copy("", "c", 8.0)) == [(NOMINAL, *QUEUE, 0.0, 8.0)]
    assert read(copy("follower", "b", 100.0)) == [(NOMINAL, *QUEUE, 0.0, 100.0)]


def test_each_family_and_instant_is_chosen_apart_and_copies_that_agree_count_once():
    assert read(copy("", "a", 8.0), copy("", "b", 8.0), copy("leader", "a", 2.0, family=USAGE),
                copy("follower", "b", 3.0, family=USAGE), copy("follower", "b", 16.0, t=60.0)) == [
        (NOMINAL, *QUEUE, 0.0, 8.0), (NOMINAL, *QUEUE, 60.0, 16.0), (USAGE, *QUEUE, 0.0, 2.0)]


def test_copies_of_one_role_that_disagree_refuse_the_day_with_both_figures():
    with pytest.raises(ReplicasDisagree) as refused:
        one_replica([copy("", "10.0.0.1:8443", 8.0, t=1795132800.0), copy("", "10.0.0.2:8443", 100.0, t=1795132800.0)],
                    "jaguar")
    assert str(refused.value) == (
        'cluster jaguar: kueue-controller-manager replicas disagree on kueue_cluster_queue_nominal_quota{cohort='
        '"research", cluster_queue="robotics-cq", flavor="h100", resource="nvidia.com/gpu"} at 2026-11-20T00:00:00+00:00: '
        "8 from 10.0.0.1:8443 (no replica_role) and 100 from 10.0.0.2:8443 (no replica_role), and no replica_role says "
        "which is the leader's; run a Kueue whose gauges carry replica_role, or scrape the leader only, then run the day "
        "again; nothing was billed")
