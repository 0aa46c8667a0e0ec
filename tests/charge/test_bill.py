"""The day's charging (`bill_day`), and the DayBill that checks each frame where it crosses from charging to the ledger."""

from datetime import date

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill, bill_day
from billing.collect.day import CollectedDay
from billing.collect.kueue import SAMPLES
from billing.collect.usage import ClusterUsage
from billing.config import Config
from billing.directory.people import Directory, Person, Team
from tests.helpers.config import MINIMAL_CONFIG

DAY = date(2026, 11, 20)


def test_a_frame_without_a_column_of_its_schema_is_refused_naming_it():
    rows = frames.ROWS.empty()
    assert DayBill(rows).workloads is None and DayBill(rows).capacity.empty
    with pytest.raises(ValueError, match="the day's ledger rows lacks the columns list_cost"):
        DayBill(rows.drop(columns="list_cost"))
    with pytest.raises(ValueError, match="waste per team lacks the columns owner"):
        DayBill(rows, wasted=pd.DataFrame(columns=["cluster", "namespace", "team", *frames.WASTE_MEASURES]))


# --- bill_day: what collect produced for each cluster-day, charged (the figures worked out by hand below)

DIRECTORY = Directory.of([Person("alice", "Alice", "alice@example.org")], [Team("robotics", ("alice",), ("alice",))])
H100 = "NVIDIA-H100-80GB-HBM3"  # 2.50 an hour on MINIMAL_CONFIG's jaguar; a core-hour 0.01


def night(**cluster: object) -> Config:
    """MINIMAL_CONFIG's jaguar with `cluster`'s keys; workloads and waste off, so the day is its rows."""
    jaguar = {**MINIMAL_CONFIG["clusters"][0], **cluster}
    return Config.model_validate({**MINIMAL_CONFIG, "clusters": [jaguar], "workloads": {"enabled": False},
                                  "waste": {"enabled": False}})


def collected(config: Config, allocatable: pd.DataFrame | None, capacity_unknown: str = "") -> CollectedDay:
    """jaguar's day: alice's pods requested 10 H100-hours, 2 of them while bound to a node and not yet Running (in
    ImagePullBackOff); team-robotics' 100 core-hours."""
    usage = pd.DataFrame([("alice", "gpu", H100, "", "", 10.0), ("team-robotics", "cpu", "", "", "", 100.0)],
                         columns=frames.USAGE.columns)
    pending = pd.DataFrame([("alice", "", "gpu", H100, "", "", "ImagePullBackOff", 2.0)],
                           columns=frames.BOUND_PENDING.columns)
    return CollectedDay(config.clusters[0], ClusterUsage("jaguar", usage, 3, 40, 1.0, bound_pending=pending),
                        allocatable, frames.WASTE.empty().assign(cluster=[]),
                        pd.DataFrame(columns=["cluster", *frames.WORKLOAD_WASTE.columns]), pd.DataFrame(columns=SAMPLES),
                        capacity_unknown)


def test_a_day_is_owned_priced_and_its_unrequested_capacity_shared_by_cost():
    """alice pays 10 x 2.50 = 25.00 (robotics, her team), team-robotics 100 x 0.01 = 1.00; the nodes offered 24 H100-hours
    and 200 core-hours, so 14 H100-hours (35.00) and 100 core-hours (1.00) went unrequested, shared 25 : 1."""
    config = night(unrequested="share", bound_pending="charge")
    allocatable = pd.DataFrame([("gpu", H100, "", 24.0), ("cpu", "", "", 200.0)], columns=frames.ALLOCATABLE.columns)
    bill = bill_day([collected(config, allocatable)], {"jaguar": config.clusters[0].prices_on(DAY)}, DIRECTORY, config)

    costs = bill.rows.groupby(["namespace", "team", "resource"])["cost"].sum().to_dict()
    assert costs == pytest.approx({
        ("alice", "robotics", "gpu"): 25.0, ("team-robotics", "robotics", "cpu"): 1.0,
        ("alice", "robotics", "unrequested-gpu"): 35.0 * 25 / 26, ("team-robotics", "robotics", "unrequested-gpu"): 35.0 / 26,
        ("alice", "robotics", "unrequested-cpu"): 1.0 * 25 / 26, ("team-robotics", "robotics", "unrequested-cpu"): 1.0 / 26,
    })
    assert bill.cost() == bill.cost("jaguar") == pytest.approx(62.0) and bill.cost("ibis") == 0.0
    assert bill.capacity.set_index("resource")["unrequested"].to_dict() == {"gpu": 14.0, "cpu": 100.0}
    held = bill.bound_pending
    assert held[["namespace", "team", "reason", "quantity", "cost"]].values.tolist() == [
        ["alice", "robotics", "ImagePullBackOff", 2.0, 5.0]]
    assert held["charged"].tolist() == [True]
    assert bill.workloads is None and bill.coverage == {"jaguar": 1.0} and bill.capacity_unknown == {}


def test_a_cluster_whose_capacity_is_unknown_is_billed_what_it_requested_and_says_why():
    """No allocatable figure (an impossible one the bill did not need): no capacity and nothing unrequested to share;
    what was held while Pending is shown, not charged, where the cluster says `show`."""
    config = night(unrequested="share")
    bill = bill_day([collected(config, None, "kube_node_status_allocatable is -1")],
                    {"jaguar": config.clusters[0].prices_on(DAY)}, DIRECTORY, config)
    assert bill.cost() == pytest.approx(26.0) and bill.capacity.empty
    assert bill.capacity_unknown == {"jaguar": "kube_node_status_allocatable is -1"}
    assert bill.bound_pending["charged"].tolist() == [False]
