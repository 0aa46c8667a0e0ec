"""Energy collected from a real Prometheus (docs/spec.md "Energy and carbon"): the spec's worked example as a world of
dcgm-exporter's and Kepler's counters (a GPU moving between pods within the day and reset mid-day, a time-sliced GPU
shared by two namespaces then held by none, Kepler's pods and node on one node, a node without Kepler; the spec's
namespaces renamed to this directory's), its kWh worked out by hand below and by the reference (fixtures/reference.py,
from the world's model of watts), the collector's figures held to both, and `billing run`'s ledger to the reference:
priced, shown only, and refused where priced energy has no Kepler counters.

The world's blocks are written by promtool, so no staleness markers: a GPU's series of the pod that held it stay
visible for the 5-minute lookback after it moved, and the GPU's steps then split between the old pod and the new.
"""

import csv
import io
import json
import math
import re
from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from sqlalchemy import create_engine, text

from billing.cli import main
from billing.collect.context import cluster_day
from billing.collect.energy import collect_energy
from billing.collect.figures import ImpossibleFigure
from billing.collect.prometheus import LivePrometheus
from billing.config import WebConfig, load_config
from billing.config.energy import Energy as EnergySettings
from billing.days import billing_day
from billing.jobs.check import CheckWarning
from billing.jobs.check import energy as energy_line
from billing.notify.letters import admin_letter, team_letter
from billing.publish.answers import day_report
from billing.publish.cost_metrics import add_cost_metrics, read_cost_figures
from billing.web.app import create_app
from fixtures.energy import Energy, Gpu, KeplerNode, KeplerPod, Meter
from fixtures.ksm import Cluster, Container, Node, Pod, World
from fixtures.reference import reference_energy
from tests.helpers.focus13 import check_focus_13
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import write_config
from tests.helpers.prometheus_worlds import cluster
from tests.helpers.serve import get

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
BEFORE, AFTER = D - 3600, D + 25 * 3600
KWH = 3.6e6  # joules


def at(hour: float) -> float:
    return D + hour * 3600


ENERGY = Energy(
    gpus=(
        # 300 W all day; team-vision/train-1 holds it until 10:00, then team-nlp/bert-2; reset at 13:59:30
        Gpu("GPU-a-0", "n1", Meter(((BEFORE, 300.0),), resets=(at(13) + 59 * 60 + 30,), since=5e6),
            ((BEFORE, (("team-vision", "train-1"),)), (at(10), (("team-nlp", "bert-2"),)))),
        # time-sliced: team-vision/viz-3 and bob/asr-1 at 200 W until noon, then held by none at 60 W
        Gpu("GPU-b-1", "n1", Meter(((BEFORE, 200.0), (at(12), 60.0))),
            ((BEFORE, (("team-vision", "viz-3"), ("bob", "asr-1"))), (at(12), ()))),
    ),
    pods=(KeplerPod("team-vision", "train-1", "n1", Meter(((BEFORE, 40.0),), end=at(10))),
          KeplerPod("team-nlp", "bert-2", "n1", Meter(((at(10), 40.0),), start=at(10)))),
    nodes=(KeplerNode("n1", Meter(((BEFORE, 150.0),))),),  # n2 runs no Kepler
)


def pod(namespace: str, name: str, node: str, start: float, end: float, gpus: float, utilisation: bool = False) -> Pod:
    return Pod(namespace, name, f"uid-{name}", node, start, ((start, "Running"),), end,
               (Container("main", 1.0, 2**30, gpus),), gpu_utilisation=((start, 50.0),) if utilisation else ())


PODS = (pod("team-vision", "train-1", "n1", BEFORE, at(10), 1), pod("team-nlp", "bert-2", "n1", at(10), AFTER, 1),
        pod("team-vision", "viz-3", "n1", BEFORE, at(12), 1, utilisation=True),  # DCGM's utilisation series: UUIDs
        # of its own (GPU-uid-viz--0, and every node's GPUs unlabelled) that have no energy counter pod("bob", "asr-1", "n1", BEFORE, at(12), 1),
        pod("bob", "cpu-only", "n2", BEFORE, AFTER, 0))
NODES = tuple(Node(name, ((BEFORE, {"label_nvidia_com_gpu_product": "NVIDIA-A100-SXM4-80GB"}),),
                   {"cpu": 64.0, "memory": 512.0 * 2**30, "nvidia_com_gpu": 2.0})
              for name in ("n1", "n2"))
WORLD = World((Cluster("jaguar", NODES, PODS, {"cluster": "jaguar"}, energy=ENERGY),), BEFORE, AFTER)

# By hand, in joules. GPU-a: 18,000 J a step; vision's steps end 00:00-09:59 (600), and 10:00-10:04 (its series'
# lookback) are split with nlp; nlp's the rest (835), less the 30 s before the reset (9,000 J)
GPU_A_VISION = 600 * 18_000 + 5 * 9_000
GPU_A_NLP = 835 * 18_000 + 5 * 9_000 - 9_000
# GPU-b: 12,000 J a step to 11:59, halved; the step ending 12:00 (still 200 W) and 12:01-12:04 (3,600 J) in thirds
# (the two pods' series in their lookback, the unlabelled one); the rest, 715 steps at 60 W, no pod's
GPU_B_EACH = 720 * 6_000 + 12_000 / 3 + 4 * 3_600 / 3
GPU_B_NONE = 12_000 / 3 + 4 * 3_600 / 3 + 715 * 3_600
# Kepler: train-1's steps end 00:00-09:59 (600 at 40 W); bert-2's from 10:01 (its first sample at 10:00 has no step
# before it) to 23:59 (839); n1 150 W all day; what n1's pods did not account for is unattributed
TRAIN, BERT, N1 = 600 * 2_400, 839 * 2_400, 1440 * 9_000
BY_HAND = {"team-vision": ((GPU_A_VISION + GPU_B_EACH) / KWH, TRAIN / KWH), "team-nlp": (GPU_A_NLP / KWH, BERT / KWH),
           "bob": (GPU_B_EACH / KWH, 0.0), "": (GPU_B_NONE / KWH, (N1 - TRAIN - BERT) / KWH)}


def figures(energy) -> dict:
    return {row.namespace: (row.gpu_kwh, row.cpu_kwh) for row in energy.itertuples()}


def assert_close(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for namespace, kwh in expected.items():
        assert got[namespace] == pytest.approx(kwh, rel=1e-9, abs=1e-12), namespace


def test_the_reference_gives_the_figures_worked_out_by_hand():
    assert_close(reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60), BY_HAND)


def test_collected_energy_on_prometheus_is_the_reference(prometheus_server):
    server = prometheus_server(WORLD)
    config = cluster("jaguar", server.url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    collected = collect_energy(context)
    assert_close(figures(collected.energy), reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60))
    assert collected.nodes == {"n1"}
    assert context.asked == 1 + 1 + len(context.chunks())  # buildinfo, the store's labels, one query per chunk


PRICE, INTENSITY = 0.30, 250.0
# Rule 7 for tests/helpers/prometheus_jobs.py's directory: bob is on robotics and vision, half each
OWNERS = {"team-vision": [("vision", 1.0)], "team-nlp": [("nlp", 1.0)], "bob": [("robotics", 0.5), ("vision", 0.5)]}


def run_billing(tmp_path, url: str, energy: dict):
    tmp_path.mkdir(exist_ok=True)
    path = write_config(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}", {"jaguar": url})
    with open(path) as file:
        config = yaml.safe_load(file)
    config["clusters"][0]["energy"] = energy
    with open(path, "w") as file:
        yaml.safe_dump(config, file)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", path])
    return result, create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")


def ledger(engine, query: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(query))]


def test_billing_run_bills_priced_energy_per_team_and_keeps_kwh_and_carbon(prometheus_server, tmp_path):
    """The ledger's energy rows are the reference's kWh split over teams at the price; the energy table keeps each
    namespace's kWh with its carbon, and the unattributed under namespace and team ''."""
    reference = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    result, engine = run_billing(tmp_path, prometheus_server(WORLD).url,
                                 {"price_kwh": PRICE, "carbon_g_per_kwh": INTENSITY})
    assert result.exit_code == 0, result.output
    expected: dict[str, float] = {}
    for namespace, owners in OWNERS.items():
        for team, share in owners:
            expected[team] = expected.get(team, 0.0) + sum(reference[namespace]) * share
    billed = ledger(engine, "select team, sum(quantity), sum(cost), min(unit_price) from chargeback "
                            "where resource = 'energy' group by team")
    assert {team: kwh for team, kwh, _, _ in billed} == pytest.approx(expected, rel=1e-9)
    assert {team: cost for team, _, cost, _ in billed} == pytest.approx({t: k * PRICE for t, k in expected.items()})
    assert {price for *_, price in billed} == {PRICE}
    kept = {(namespace, team): (gpu, cpu, carbon) for namespace, team, gpu, cpu, carbon in
            ledger(engine, "select namespace, team, gpu_kwh, cpu_kwh, carbon_g from energy")}
    wanted = {(namespace, team): (reference[namespace][0] * share, reference[namespace][1] * share,
                                  sum(reference[namespace]) * share * INTENSITY)
              for namespace, owners in OWNERS.items() for team, share in owners}
    wanted[("", "")] = (*reference[""], sum(reference[""]) * INTENSITY)
    assert kept.keys() == wanted.keys()
    for key, figures in wanted.items():
        assert kept[key] == pytest.approx(figures, rel=1e-9), key
    # carbon beside cost: the team's page and its report's JSON
    nlp = sum(reference["team-nlp"])
    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "nlp.html").read_text())
    # by hand: 15,066,000 J = 4.185 kWh (to the cent, half up), 2,013,600 J = 0.5593 kWh, 4.7443 kWh x 250 g
    assert page.tables["energy"][1:] == [["jaguar", "4.19 kWh", "0.56 kWh", "4.74 kWh", "1,186 g CO2e"]]
    asked = CliRunner().invoke(main, ["report", "--config", str(tmp_path / "billing.yaml"), "--team", "nlp", "--from",
                                      "2026-11-20", "--to", "2026-11-20", "--format", "json"])
    assert asked.exit_code == 0, asked.output
    (energy,) = json.loads(asked.output)["energy"]
    assert energy["team"] == "nlp" and energy["cluster"] == "jaguar"
    assert (energy["kwh"], energy["carbon_g"]) == pytest.approx((nlp, nlp * INTENSITY), rel=1e-9)
    day = day_report(engine, load_config(tmp_path / "billing.yaml"), DAY.date)
    letter = team_letter(day, "nlp")
    admins = [line.split() for line in admin_letter(day).text.splitlines()]
    assert ["(unattributed)", "jaguar", f"{sum(reference['']):.2f}", "kWh",
            f"{sum(reference['']) * INTENSITY:,.0f}", "g", "CO2e"] in admins
    assert ["jaguar", "4.74", "kWh", "1,186", "g", "CO2e"] in [line.split() for line in letter.text.splitlines()]
    words = re.sub(r"<[^>]+>|&nbsp;", " ", letter.html).split()
    assert "Energy and carbon" in letter.html and ["jaguar", "4.74", "kWh", "1,186", "g", "CO2e"] in [
        words[at:at + 6] for at in range(len(words))]
    # billing serve's team page: the same figures over the range asked
    web = load_config(tmp_path / "billing.yaml").model_copy(update={"web": WebConfig(admins=["root"])})
    served = get(create_app(web).test_client(), "/teams/nlp?from=2026-11-20&to=2026-11-20", "root")
    assert served.status_code == 200
    assert read_page(served.text).tables["energy"][1:] == [["jaguar", "4.19 kWh", "0.56 kWh", "4.74 kWh", "1,186 g CO2e"]]
    # serve's /metrics: the day's kWh, carbon and unattributed per cluster (and team)
    registry = CollectorRegistry()
    add_cost_metrics(registry, read_cost_figures(engine, web))
    assert registry.get_sample_value("billing_energy_kwh", {"cluster": "jaguar", "team": "nlp"}) == pytest.approx(nlp)
    assert registry.get_sample_value("billing_carbon_grams", {"cluster": "jaguar", "team": "nlp"}) == pytest.approx(
        nlp * INTENSITY)
    assert registry.get_sample_value("billing_energy_unattributed_kwh", {"cluster": "jaguar"}) == pytest.approx(
        sum(reference[""]))
    everyone = read_page((tmp_path / "reports" / "2026-11-20" / "index.html").read_text()).tables["energy"]
    assert everyone[1][:2] == ["(unattributed)", "jaguar"]
    # priced energy through the registry: billing report by resource, and FOCUS 1.3 charges in kWh
    by_resource = cli("report", "--all-teams", "--from", "2026-11-20", "--to", "2026-11-20", "--by", "resource",
                      "--format", "csv", "--config", str(tmp_path / "billing.yaml"))
    (row,) = [row for row in csv.DictReader(io.StringIO(by_resource)) if row["resource"] == "energy"]
    assert (float(row["energy_kwh"]), float(row["cost"])) == pytest.approx((sum(expected.values()),
                                                                             sum(expected.values()) * PRICE))
    focus = pd.read_csv(io.StringIO(cli("export", "--from", "2026-11-20", "--to", "2026-11-20", "--config",
                                        str(tmp_path / "billing.yaml"))), keep_default_na=False, na_values=[""])
    check_focus_13(focus)
    charged = focus[focus["ServiceName"] == "Kubernetes energy"]
    assert set(zip(charged["ServiceCategory"], charged["ServiceSubcategory"], charged["PricingUnit"],
                   charged["ConsumedUnit"], charged["SkuId"])) == {
        ("Compute", "Other (Compute)", "Kilowatt-Hours", "Kilowatt-Hours", "energy")}
    assert charged.groupby("BillingAccountId")["BilledCost"].sum().to_dict() == pytest.approx(
        {team: kwh * PRICE for team, kwh in expected.items()})
    carbon = [json.loads(tags)["billing/carbon_g"] for tags in charged.loc[charged["BillingAccountId"] == "nlp", "Tags"]]
    assert [float(grams) for grams in carbon] == pytest.approx([nlp * INTENSITY], rel=1e-5)  # its Tags carry carbon
    statement = cli("statement", "--month", "2026-11", "--config", str(tmp_path / "billing.yaml"))
    lines = [line for line in csv.DictReader(io.StringIO(statement)) if line["resource"] == "energy"]
    assert {line["team"]: float(line["quantity"]) for line in lines} == pytest.approx(expected)


def test_billing_run_shares_the_unattributed_over_the_namespaces_and_bills_it_in_every_output(prometheus_server,
                                                                                              tmp_path):
    """energy.share_unattributed: the reference's unattributed GPU kWh over the namespaces' GPU kWh and its CPU kWh
    over their CPU kWh, billed as `unattributed-energy` per team at the price; the shares add up to the unattributed;
    the energy table keeps each share and the unattributed row gives it away; the statement, FOCUS, `report --by
    resource` and the team's page carry it."""
    reference = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    result, engine = run_billing(tmp_path, prometheus_server(WORLD).url,
                                 {"price_kwh": PRICE, "carbon_g_per_kwh": INTENSITY, "share_unattributed": True})
    assert result.exit_code == 0, result.output
    totals = [sum(reference[namespace][part] for namespace in OWNERS) for part in (0, 1)]
    share = {namespace: sum(reference[""][part] * reference[namespace][part] / totals[part] for part in (0, 1))
             for namespace in OWNERS}
    expected: dict[str, float] = {}
    for namespace, owners in OWNERS.items():
        for team, part in owners:
            expected[team] = expected.get(team, 0.0) + share[namespace] * part
    billed = ledger(engine, "select team, sum(quantity), sum(cost), min(unit_price), max(unit_price) from chargeback "
                            "where resource = 'unattributed-energy' group by team")
    assert {team: kwh for team, kwh, *_ in billed} == pytest.approx(expected, rel=1e-9)
    assert {team: cost for team, _, cost, *_ in billed} == pytest.approx({t: k * PRICE for t, k in expected.items()})
    assert {price for *_, low, high in billed for price in (low, high)} == {PRICE}
    unattributed = sum(reference[""])
    assert sum(kwh for _, kwh, *_ in billed) == pytest.approx(unattributed, rel=1e-12)  # all of it, no more
    kept = dict(ledger(engine, "select team, sum(shared_kwh) from energy group by team"))
    assert kept == pytest.approx({**expected, "": -unattributed}, rel=1e-9)
    assert ledger(engine, "select gpu_kwh, cpu_kwh from energy where team = ''") == [pytest.approx(reference[""])]
    # the outputs, each through the registry: the statement's lines, FOCUS charges, report by resource, the page
    statement = cli("statement", "--month", "2026-11", "--config", str(tmp_path / "billing.yaml"))
    lines = [line for line in csv.DictReader(io.StringIO(statement)) if line["resource"] == "unattributed-energy"]
    assert {line["team"]: float(line["quantity"]) for line in lines} == pytest.approx(expected)
    focus = pd.read_csv(io.StringIO(cli("export", "--from", "2026-11-20", "--to", "2026-11-20", "--config",
                                        str(tmp_path / "billing.yaml"))), keep_default_na=False, na_values=[""])
    check_focus_13(focus)
    charged = focus[focus["SkuId"] == "unattributed-energy"]
    assert set(zip(charged["ServiceName"], charged["PricingUnit"])) == {("Kubernetes energy", "Kilowatt-Hours")}
    assert charged.groupby("BillingAccountId")["BilledCost"].sum().to_dict() == pytest.approx(
        {team: kwh * PRICE for team, kwh in expected.items()})
    nlp = charged[charged["BillingAccountId"] == "nlp"]
    assert [float(json.loads(tags)["billing/carbon_g"]) for tags in nlp["Tags"]] == pytest.approx(
        [expected["nlp"] * INTENSITY], rel=1e-5)
    assert "no pod accounts for" in nlp["ChargeDescription"].iloc[0]
    by_resource = cli("report", "--all-teams", "--from", "2026-11-20", "--to", "2026-11-20", "--by", "resource",
                      "--format", "csv", "--config", str(tmp_path / "billing.yaml"))
    (row,) = [row for row in csv.DictReader(io.StringIO(by_resource)) if row["resource"] == "unattributed-energy"]
    assert float(row["cost"]) == pytest.approx(unattributed * PRICE, abs=0.005)
    page = read_page((tmp_path / "reports" / "2026-11-20" / "teams" / "nlp.html").read_text())
    (nlp_energy,) = page.tables["energy"][1:]
    assert page.tables["energy"][0][3] == "Shared unattributed"
    assert nlp_energy[3] == f"{expected['nlp']:.2f} kWh"
    assert nlp_energy[4] == f"{sum(reference['team-nlp']) + expected['nlp']:.2f} kWh"


def cli(*arguments: str) -> str:
    result = CliRunner().invoke(main, list(arguments))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_energy_shown_only_is_unknown_where_kepler_is_not_scraped_and_priced_is_refused(prometheus_server, tmp_path):
    """Without Kepler: shown only, the CPU kWh and the carbon are NULL (unknown), not 0, and nothing is billed;
    priced, the day is refused naming Kepler's family and the ledger keeps nothing of it."""
    without_kepler = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=Energy(gpus=ENERGY.gpus)),))
    url = prometheus_server(without_kepler).url
    shown, engine = run_billing(tmp_path / "shown", url, {"carbon_g_per_kwh": INTENSITY})
    assert shown.exit_code == 0, shown.output
    assert ledger(engine, "select count(*) from chargeback where resource = 'energy'") == [(0,)]
    rows = ledger(engine, "select namespace, gpu_kwh, cpu_kwh, carbon_g from energy where team != 'robotics'")
    assert {namespace for namespace, *_ in rows} == {"team-vision", "team-nlp", "bob", ""}
    assert all(gpu > 0 and cpu is None and carbon is None for _, gpu, cpu, carbon in rows)
    refused, engine = run_billing(tmp_path / "priced", url, {"price_kwh": PRICE})
    assert refused.exit_code == 1
    assert "no sample of kepler_pod_cpu_joules_total" in refused.output and "nothing was billed" in refused.output
    assert ledger(engine, "select count(*) from energy") == [(0,)]


def test_collected_energy_on_victoria_metrics_is_the_reference(victoria_metrics_server):
    """MetricsQL's rollups read the same steps: the value a step before through `default_rollup`'s offset."""
    config = cluster("jaguar", victoria_metrics_server(WORLD).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    assert_close(figures(collect_energy(context).energy), reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60))


def test_billing_check_names_the_gpus_without_an_energy_counter_and_the_nodes_without_kepler(prometheus_server):
    config = cluster("jaguar", prometheus_server(WORLD).url).model_copy(update={"energy": EnergySettings()})
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(CheckWarning) as warned:
        energy_line(context)
    reference = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    attributed = sum(sum(kwh) for namespace, kwh in reference.items() if namespace)
    assert str(warned.value) == (
        f"on 2026-11-20: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, kepler_node_cpu_joules_total, kepler_pod_cpu_joules_total; "
        f"{attributed:.2f} kWh of 3 namespaces, {sum(reference['']):.2f} unattributed, not shared; GPUs without an energy "
        "counter: "
        "GPU-n1-0 on n1, GPU-n1-1 on n1, GPU-n2-0 on n2, GPU-n2-1 on n2, GPU-uid-viz--0 on n1; nodes without Kepler: n2 "
        "(their energy is not counted)")
    sharing = config.model_copy(update={"energy": EnergySettings(share_unattributed=True)})
    context = cluster_day(sharing, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(CheckWarning) as warned:
        energy_line(context)
    assert f"{sum(reference['']):.2f} unattributed, shared over the namespaces by their kWh (energy.share_unattributed); " \
        in str(warned.value)


# The spec's worked example as a live store holds the day (series end at staleness markers, no lookback overlap), in
# joules: GPU-a's 1,440 steps of 18,000 J, 600 vision's, 840 nlp's less 9,000 J lost to the reset; GPU-b's 720 halves
# of 12,000 J each; no pod's the step ending 12:00 (200 W over 11:59-12:00) and 719 at 60 W
LIVE_BY_HAND = {"team-vision": ((600 * 18_000 + 720 * 6_000) / KWH, TRAIN / KWH),
                "team-nlp": ((840 * 18_000 - 9_000) / KWH, BERT / KWH), "bob": (720 * 6_000 / KWH, 0.0),
                "": ((12_000 + 719 * 3_600) / KWH, (N1 - TRAIN - BERT) / KWH)}


def test_a_live_store_gives_the_spec_s_worked_example(live_store):
    """Written by remote write as a live store fills itself: a GPU's old pod's series ends at its marker, so each step
    goes to the pod labelled at its end alone; the figures are docs/spec.md's worked example (4.6, 4.756833, 1.2 and
    3.363 kWh)."""
    live = replace(WORLD, staleness=True)
    assert_close(reference_energy(live, "jaguar", D, DAY.end.timestamp(), 60), LIVE_BY_HAND)
    assert sum(LIVE_BY_HAND["team-nlp"]) == pytest.approx(4.756833, abs=1e-6)
    assert sum(LIVE_BY_HAND[""]) == pytest.approx(3.363, abs=1e-6)
    config = cluster("jaguar", live_store(live).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    assert_close(figures(collect_energy(context).energy), LIVE_BY_HAND)


def test_a_mig_gpu_splits_each_step_equally_over_its_instances_pods_and_one_share_for_the_free(prometheus_server):
    """DCGM reports a MIG GPU's energy on every instance's series: at 100 W (6,000 J a step) with two instances held
    (team-vision, bob) and two free, each step splits in three, 2,000 J each: 1,440 steps, 0.8 kWh each."""
    mig = Gpu("GPU-m-2", "n1", Meter(((BEFORE, 100.0),)),
              ((BEFORE, (("team-vision", "mig-1"), ("bob", "mig-2"), ("", ""), ("", ""))),), mig=True)
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=Energy(gpus=(mig,))),))
    by_hand = dict.fromkeys(("team-vision", "bob", ""), 1440 * 2_000 / KWH)
    config = cluster("jaguar", prometheus_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    collected = collect_energy(context).energy
    assert dict(zip(collected["namespace"], collected["gpu_kwh"])) == pytest.approx(by_hand)
    assert collected["cpu_kwh"].isna().all()  # no Kepler in this world: unknown
    reference = reference_energy(world, "jaguar", D, DAY.end.timestamp(), 60)
    assert {namespace: gpu for namespace, (gpu, _) in reference.items()} == pytest.approx(by_hand)


def test_a_scrape_outage_longer_than_the_lookback_loses_the_energy_across_it(prometheus_server):
    """No scrape from 10:30 to 10:59 (a Prometheus down): the steps ending 10:30 to 11:00 see no value a step before
    them (or the same one), so the 31 minutes of draw from 10:29 to 11:00 are counted nowhere (docs/spec.md: unlike
    `increase`); the rest of the day is as without the outage."""
    outage = replace(WORLD, gaps=((at(10.5), at(11)),))
    before = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    lost = {"team-nlp": (31 * 18_000, 31 * 2_400), "team-vision": (31 * 6_000, 0), "bob": (31 * 6_000, 0),
            "": (0, 31 * (9_000 - 2_400))}  # GPU-a (nlp's), GPU-b halved; Kepler's bert-2 and n1 beyond it
    by_hand = {namespace: (gpu - lost[namespace][0] / KWH, cpu - lost[namespace][1] / KWH)
               for namespace, (gpu, cpu) in before.items()}
    assert_close(reference_energy(outage, "jaguar", D, DAY.end.timestamp(), 60), by_hand)
    config = cluster("jaguar", prometheus_server(outage).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    assert_close(figures(collect_energy(context).energy), by_hand)


def test_kepler_restarted_mid_day_counts_from_zero_again(prometheus_server):
    """Kepler's pod restarted at 15:00:30: every counter it exports starts again from 0, a reset; the step ending 15:01
    counts the 30 s since, so the 30 s before it are lost (bert-2's 1,200 J, n1's 4,500 J) and the rest is as before."""
    restarted = 15 * 3600 + 30
    kepler = replace(ENERGY, pods=tuple(replace(p, meter=replace(p.meter, resets=(D + restarted,))) for p in ENERGY.pods),
                     nodes=tuple(replace(n, meter=replace(n.meter, resets=(D + restarted,))) for n in ENERGY.nodes))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=kepler),))
    before = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    by_hand = {**before, "team-nlp": (before["team-nlp"][0], before["team-nlp"][1] - 1_200 / KWH),
               "": (before[""][0], before[""][1] - (4_500 - 1_200) / KWH)}
    assert_close(reference_energy(world, "jaguar", D, DAY.end.timestamp(), 60), by_hand)
    config = cluster("jaguar", prometheus_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    assert_close(figures(collect_energy(context).energy), by_hand)


# a hostile counter's value at every sample, in joules (a GPU's in mJ is a thousand times): below 0, NaN, +Inf, and one so
# large that a step of it is lost to rounding (at 1e300 mJ a double's spacing is about 1e284: every step reads 0)
HOSTILE = [-5e6, float("nan"), float("inf"), 1e297]


def summed(since: float) -> str:
    """The chunk's figure, as the refusal writes it: a NaN counter's steps are NaN, every other impossible one's +Inf."""
    return "NaN" if math.isnan(since) else "+Inf"


@pytest.mark.parametrize("since", HOSTILE)
def test_an_impossible_counter_refuses_the_day_naming_it(prometheus_server, since):
    """A GPU counter below 0, NaN, infinite or beyond any GPU's (1e18 mJ) at some sample: its step is +Inf (NaN, a NaN
    counter's), so the chunk's figure is, and the gate refuses the day naming the family, the namespace and what a
    counter cannot be, even where the day's sum would have come out positive (or 0)."""
    broken = Gpu("GPU-x-3", "n1", Meter(((BEFORE, 300.0),), since=since), ((BEFORE, (("team-nlp", "bert-2"),)),))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=Energy(gpus=(broken,))),))
    config = cluster("jaguar", prometheus_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(ImpossibleFigure) as refused:
        collect_energy(context)
    said = str(refused.value)
    assert f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{namespace="team-nlp"}} is {summed(since)}' in said
    assert ("a counter NaN, infinite, below 0 or above 1e+18 at a sample, or a step above 5000 W of one GPU over the "
            "step and its lookback, makes the sum of its steps NaN or infinite") in said
    assert "correct dcgm-exporter or its scrape" in str(refused.value)


@pytest.mark.parametrize("since", HOSTILE)
def test_an_impossible_kepler_counter_refuses_the_day_naming_it(prometheus_server, since):
    """The same of Kepler's pod counters (joules, beyond 1e15 impossible): refused naming the family and the pod's
    namespace and node."""
    broken = KeplerPod("team-nlp", "bert-2", "n1", Meter(((BEFORE, 40.0),), since=since))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=replace(ENERGY, pods=(broken,))),))
    config = cluster("jaguar", prometheus_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(ImpossibleFigure) as refused:
        collect_energy(context)
    said = str(refused.value)
    assert ('kepler_pod_cpu_joules_total{namespace="team-nlp", node_name="n1", pod_namespace="team-nlp"} is '
            f'{summed(since)}') in said
    assert ("a counter NaN, infinite, below 0 or above 1e+15 at a sample, or a step above 10000 W of a node over the "
            "step and its lookback, makes the sum of its steps NaN or infinite") in said


@pytest.mark.parametrize("since", [since for since in HOSTILE if not math.isnan(since)])
def test_victoria_metrics_refuses_an_impossible_counter_too(victoria_metrics_server, since):
    """VictoriaMetrics drops NaN from its answers, so an impossible counter's steps are +Inf, which it keeps: a counter
    below 0 was billed 6.11 kWh, one of +Inf or 1e300 mJ made the GPUs' family look unscraped. (It stores no NaN sample:
    a NaN counter there is a gap, whose energy is lost as across a scrape outage.)"""
    broken = Gpu("GPU-x-3", "n1", Meter(((BEFORE, 300.0),), since=since), ((BEFORE, (("team-nlp", "bert-2"),)),))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=Energy(gpus=(broken,))),))
    config = cluster("jaguar", victoria_metrics_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(ImpossibleFigure, match=r'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{namespace="team-nlp"\} is \+Inf'):
        collect_energy(context)


# 10 MJ in the minute to 11:01 (166 kW from one GPU), 300 W before and after: every value of the counter is possible
JUMP = Gpu("GPU-x-3", "n1", Meter(((BEFORE, 300.0), (at(11), 10e6 / 60), (at(11) + 60, 300.0))),
           ((BEFORE, (("team-nlp", "bert-2"),)),))
# Kepler's pod counter of bert-2 jumps by 10 MJ too; then a Kepler restart, which counts from 0 again: not a jump
KEPLER_JUMP = KeplerPod("team-nlp", "bert-2", "n1", Meter(((BEFORE, 40.0), (at(11), 10e6 / 60), (at(11) + 60, 40.0)),
                                                          resets=(at(15),)))


@pytest.mark.parametrize(("gpus", "pods", "said", "first"), [
    ((JUMP,), (), 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{namespace="team-nlp"} is +Inf',
     'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID="GPU-x-3"}'),
    ((), (KEPLER_JUMP,), 'kepler_pod_cpu_joules_total{namespace="team-nlp", node_name="n1", pod_namespace="team-nlp"} '
                         'is +Inf', 'kepler_pod_cpu_joules_total{node_name="n1", pod_id="uid-bert-2", '
                                    'pod_namespace="team-nlp", zone="dram"}')])  # both zones jumped: the first by name
def test_a_counter_stepping_faster_than_any_device_draws_refuses_the_day(store_server, gpus, pods, said, first):
    """A counter that rises by 10 MJ in a minute (166 kW) while every value stays possible would bill 2.8 kWh of
    nothing: a step above the most a device draws (5 kW a GPU, 10 kW a node's CPUs or memory, over the step and its
    lookback) is +Inf, and the gate refuses the day naming the family, the namespace and the bound, on either store,
    and the series and step that jumped (the step ending 11:01, the minute of 166 kW)."""
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=Energy(gpus=gpus, pods=pods)),))
    config = cluster("jaguar", store_server(world).url)
    context = cluster_day(config, DAY, 60, ["nvidia_com_gpu"], LivePrometheus(config.name, config.prometheus))
    with pytest.raises(ImpossibleFigure) as refused:
        collect_energy(context)
    assert said in str(refused.value)
    assert "or a step above " in str(refused.value)
    assert f"(the first such step: {first} at the step ending 2026-11-20 11:01:00 UTC)" in str(refused.value)


def test_billing_run_refuses_a_day_of_an_absurd_counter_and_bills_nothing(prometheus_server, tmp_path):
    """1e300 mJ on a GPU's counter (steps of 18,000 J vanish in its rounding: 0 kWh billed, were it let through): `billing
    run` exits 1 naming the family, and the ledger keeps nothing of the day."""
    broken = Gpu("GPU-x-3", "n1", Meter(((BEFORE, 300.0),), since=1e297), ((BEFORE, (("team-nlp", "bert-2"),)),))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], energy=replace(ENERGY, gpus=(broken,))),))
    result, engine = run_billing(tmp_path, prometheus_server(world).url, {"price_kwh": PRICE, "share_unattributed": True})
    assert result.exit_code == 1
    assert "cluster jaguar on 2026-11-20: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in result.output
    assert "nothing was billed" in result.output
    assert ledger(engine, "select count(*) from chargeback") == [(0,)]


def test_a_gpu_model_the_prices_do_not_name_changes_no_kwh(prometheus_server, tmp_path):
    """Energy follows a GPU's UUID, never its model's name: nodes labelled `NVIDIA-A100-PCIE-40GB` (a model the price
    list does not name, priced at gpu_hour) bill each team the same kWh as the reference. (A model the price list
    names in another case refuses the day: docs/spec.md "Rule 6: price".)"""
    lower = tuple(replace(node, labels=((BEFORE, {"label_nvidia_com_gpu_product": "NVIDIA-A100-PCIE-40GB"}),))
                  for node in NODES)
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], nodes=lower),))
    result, engine = run_billing(tmp_path, prometheus_server(world).url, {"price_kwh": PRICE})
    assert result.exit_code == 0, result.output
    reference = reference_energy(WORLD, "jaguar", D, DAY.end.timestamp(), 60)
    kept = {namespace: (gpu, cpu) for namespace, gpu, cpu in
            ledger(engine, "select namespace, sum(gpu_kwh), sum(cpu_kwh) from energy group by namespace")}
    assert_close(kept, reference)
