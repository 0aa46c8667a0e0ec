"""The day's charging (`bill_day`), and the DayBill that checks each frame where it crosses from charging to the ledger."""

from dataclasses import replace
from datetime import date
from decimal import Decimal

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill, bill_day
from billing.collect.day import CollectedDay
from billing.collect.energy import EnergyDay
from billing.collect.kueue import SAMPLES
from billing.collect.usage import ClusterUsage
from billing.config import Config
from billing.directory.people import Directory, Person, Team
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.money import cents, rounding, total
from billing.notify.letters import admin_letter, team_letter
from billing.publish.answers import day_report
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


# --- energy's unattributed shared (docs/spec.md "Energy and carbon", the worked example with `share_unattributed`)

KWH = 3.6e6  # joules
# the spec's worked example per namespace, in kWh (GPU, CPU and memory): 'speech' drew no CPU energy of Kepler's; the
# unattributed, GPU-b idle 2,600,400 J and n1's 3.6 kWh beyond its pods'
SPEC_ENERGY = {"team-vision": (4.2, 0.4), "team-nlp": (4.1975, 2_013_600 / KWH), "team-speech": (1.2, 0.0),
               "": (2_600_400 / KWH, 3.6 - 0.4 - 2_013_600 / KWH)}
TEAMS = Directory.of([Person("alice", "Alice", "alice@example.org")],
                     [Team(name, ("alice",), ("alice",)) for name in ("vision", "nlp", "speech")])


def energy_night(settings: dict, kwh: dict[str, tuple[float, float]] = SPEC_ENERGY) -> tuple[Config, CollectedDay]:
    """The spec's example (or `kwh`) as the collector hands it over, on a cluster whose energy is `settings`; no
    usage."""
    config = night(energy=settings)
    energy = pd.DataFrame([(namespace, gpu, cpu) for namespace, (gpu, cpu) in kwh.items()],
                          columns=frames.ENERGY.columns)
    empty = ClusterUsage("jaguar", frames.USAGE.empty(), 3, 40, 1.0)
    day = CollectedDay(config.clusters[0], empty, None, frames.WASTE.empty().assign(cluster=[]),
                       pd.DataFrame(columns=["cluster", *frames.WORKLOAD_WASTE.columns]), pd.DataFrame(columns=SAMPLES),
                       energy=EnergyDay(energy, frozenset({"gpu", "pod", "node"}), frozenset({"n1"})),
                       energy_in_force=config.clusters[0].energy_on(DAY))
    return config, day


def test_the_spec_s_worked_example_shares_the_unattributed_gpu_and_cpu_energy_apart_and_bills_it(tmp_path):
    """By hand (docs/spec.md): GPUs' unattributed 0.722333 kWh over GPU kWh 4.2 : 4.1975 : 1.2 (of 9.5975), CPU and
    memory's 2.640667 kWh over 0.4 : 0.559333 : 0 (of 0.959333): vision 0.316103 + 1.101042 = 1.417146 kWh, nlp
    0.315915 + 1.539624 = 1.855539, speech 0.090315 + 0 = 0.090315; together 3.363, all of it. At 0.30 a kWh 0.425144,
    0.556662 and 0.027095 (0.43, 0.56, 0.03 to the cent; their exact sum 1.0089 reads 1.01); at 250 g a kWh 354.29,
    463.88 and 22.58 g."""
    config, day = energy_night({"price_kwh": 0.30, "carbon_g_per_kwh": 250, "share_unattributed": True})
    bill = bill_day([day], {"jaguar": config.clusters[0].prices_on(DAY)}, TEAMS, config)
    by_hand = {"vision": 1.4171455424, "nlp": 1.8555392713, "speech": 0.0903151862}
    shared = bill.rows[bill.rows["resource"] == "unattributed-energy"].set_index("team")
    assert shared["quantity"].to_dict() == pytest.approx(by_hand, abs=1e-9)
    assert shared["cost"].to_dict() == pytest.approx({team: kwh * 0.30 for team, kwh in by_hand.items()}, abs=1e-9)
    assert set(shared["unit_price"]) == {0.30} and set(shared["namespace"]) == {"team-vision", "team-nlp", "team-speech"}
    assert shared["quantity"].sum() == pytest.approx(3.363, abs=1e-12)  # the rows add up to what was unattributed
    costs = shared.loc[["vision", "nlp", "speech"], "cost"].tolist()
    assert ([cents(cost) for cost in costs], cents(total(costs)), rounding(costs)) == (
        [Decimal("0.43"), Decimal("0.56"), Decimal("0.03")], Decimal("1.01"), Decimal("-0.01"))
    own = bill.rows[bill.rows["resource"] == "energy"].set_index("team")["quantity"].to_dict()
    assert own == pytest.approx({"vision": 4.6, "nlp": 4.7568333333, "speech": 1.2})
    kept = bill.energy.set_index("team")
    assert kept["shared_kwh"].to_dict() == pytest.approx({**by_hand, "": -3.363}, abs=1e-9)
    assert kept["shared_carbon_g"].to_dict() == pytest.approx({t: k * 250 for t, k in {**by_hand, "": -3.363}.items()})
    assert kept.loc["", ["gpu_kwh", "cpu_kwh"]].tolist() == pytest.approx([0.7223333333, 2.6406666667])  # kept as read

    ledger = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    replace_day(ledger, DAY, bill, "EUR")
    report = day_report(ledger, config, DAY)
    write_pages(report, tmp_path / "out")
    page = read_page((tmp_path / "out" / DAY.isoformat() / "index.html").read_text())
    assert page.tables["energy"] == [
        ["Team", "Cluster", "GPUs", "CPU and memory", "Shared unattributed", "Energy", "Carbon"],
        ["(unattributed)", "jaguar", "0.72 kWh", "2.64 kWh", "-3.36 kWh", "0.00 kWh", "0 g CO2e"],
        ["nlp", "jaguar", "4.20 kWh", "0.56 kWh", "1.86 kWh", "6.61 kWh", "1,653 g CO2e"],
        ["speech", "jaguar", "1.20 kWh", "0.00 kWh", "0.09 kWh", "1.29 kWh", "323 g CO2e"],
        ["vision", "jaguar", "4.20 kWh", "0.40 kWh", "1.42 kWh", "6.02 kWh", "1,504 g CO2e"],
    ]
    # the emails: the share beside the energy, in its text and HTML tables
    admins = [line.split() for line in admin_letter(report).text.splitlines()]
    assert ["Team", "Cluster", "Shared", "unattributed", "Energy", "Carbon"] in admins
    assert ["(unattributed)", "jaguar", "-3.36", "kWh", "0.00", "kWh", "0", "g", "CO2e"] in admins
    nlp = team_letter(report, "nlp")
    assert ["jaguar", "1.86", "kWh", "6.61", "kWh", "1,653", "g", "CO2e"] in [line.split() for line in nlp.text.splitlines()]
    assert "Shared unattributed" in nlp.html and "each team's share of what no pod accounts for" in nlp.html


def test_shown_only_the_shared_kwh_and_its_carbon_are_kept_and_nothing_billed():
    config, day = energy_night({"carbon_g_per_kwh": 250, "share_unattributed": True})
    bill = bill_day([day], {"jaguar": config.clusters[0].prices_on(DAY)}, TEAMS, config)
    assert bill.rows.empty
    assert bill.energy.set_index("team")["shared_kwh"].to_dict() == pytest.approx(
        {"vision": 1.4171455424, "nlp": 1.8555392713, "speech": 0.0903151862, "": -3.363}, abs=1e-9)


def test_off_by_default_the_unattributed_stays_the_clusters_and_nobody_pays_it():
    config, day = energy_night({"price_kwh": 0.30})
    bill = bill_day([day], {"jaguar": config.clusters[0].prices_on(DAY)}, TEAMS, config)
    assert set(bill.rows["resource"]) == {"energy"} and (bill.energy["shared_kwh"] == 0).all()


def test_a_day_no_namespace_drew_energy_keeps_the_unattributed_shown_and_bills_none_of_it():
    """Every GPU idle and Kepler counting no pod, sharing on and priced: nobody to share with, so the 3.363 kWh stay
    the cluster's unattributed (shown, its carbon too) and no row bills them; the namespaces' 0 kWh bill nothing."""
    idle = {"team-vision": (0.0, 0.0), "team-nlp": (0.0, 0.0), "": SPEC_ENERGY[""]}
    config, day = energy_night({"price_kwh": 0.30, "carbon_g_per_kwh": 250, "share_unattributed": True}, idle)
    bill = bill_day([day], {"jaguar": config.clusters[0].prices_on(DAY)}, TEAMS, config)
    assert bill.rows.empty
    kept = bill.energy.set_index("team")
    assert (kept["shared_kwh"] == 0).all()
    assert kept.loc["", "gpu_kwh"] + kept.loc["", "cpu_kwh"] == pytest.approx(3.363)
    assert kept.loc["", "carbon_g"] == pytest.approx(3.363 * 250)
