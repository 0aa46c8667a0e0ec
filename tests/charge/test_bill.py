"""The day's charging (`bill_day`), and the DayBill that checks each frame where it crosses from charging to the ledger."""

from dataclasses import replace
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
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.publish.dayview import read_report
from billing.publish.pages import write_pages
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.html_tables import read_page

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


def test_unclaimed_storage_goes_from_the_collected_day_through_the_ledger_to_the_admins_page(tmp_path):
    """docs/spec.md's worked example of storage per class, in GiB-hours: fast-nvme provisioned 3,000, claimed 2,100,
    unclaimed 900 (pv-1 Released 18:00-23:59, 150 GiB x 6 h); bulk 10,752 all claimed; and an `archive` volume of
    10 GiB Available all day (240 unclaimed) of a class with no price. At 0.0005 a GiB-hour of fast-nvme the
    unclaimed would cost 900 x 0.0005 = 0.45, bulk's 0 x 0.00003 = 0.00; none of it is billed."""
    prices = {**MINIMAL_CONFIG["clusters"][0]["prices"], "storage_classes": {"fast-nvme": 0.0005, "bulk": 0.00003}}
    config = night(prices=prices)
    classes = pd.DataFrame([("bulk", 10752.0, 10752.0, 0.0), ("fast-nvme", 3000.0, 2100.0, 900.0),
                            ("archive", 240.0, 0.0, 240.0)], columns=frames.STORAGE_CLASSES.columns)
    day = replace(collected(config, None), storage_classes=classes)
    bill = bill_day([day], {"jaguar": config.clusters[0].prices_on(DAY)}, DIRECTORY, config)
    assert bill.cost() == pytest.approx(26.0)  # alice's 25.00 and team-robotics' 1.00: the unclaimed is not billed

    ledger = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(ledger, DAY, bill, "EUR")
    write_pages(read_report(ledger, DAY, "EUR", "unallocated"), tmp_path / "out")
    page = read_page((tmp_path / "out" / DAY.isoformat() / "index.html").read_text())
    assert page.tables["storage"] == [
        ["Cluster", "Storage class", "Provisioned", "Claimed", "Unclaimed", "Unclaimed at the class's price (not billed)"],
        ["jaguar", "archive", "240.00 GiB-h", "0.00 GiB-h", "240.00 GiB-h", "class not priced"],
        ["jaguar", "bulk", "10,752.00 GiB-h", "10,752.00 GiB-h", "0.00 GiB-h", "0.00 EUR"],
        ["jaguar", "fast-nvme", "3,000.00 GiB-h", "2,100.00 GiB-h", "900.00 GiB-h", "0.45 EUR"],
    ]

    replace_day(ledger, DAY, replace(bill, storage=frames.STORAGE_CAPACITY.empty()), "EUR")  # the day run again
    write_pages(read_report(ledger, DAY, "EUR", "unallocated"), tmp_path / "again")
    html = (tmp_path / "again" / DAY.isoformat() / "index.html").read_text()
    assert "storage" not in read_page(html).tables and "Storage: claimed and unclaimed" not in html
