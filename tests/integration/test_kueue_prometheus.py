"""Kueue quotas billed as reserved capacity, against a real store: docs/spec.md "Kueue quotas", its worked example.

The cluster of the worked example (cohort `research`: robotics' quota raised at noon, vision borrowing from nlp
until 06:00 with one admitted pod never Running, nlp's two flavors), with Kueue's gauges as
kueue-controller-manager exports them (fixtures.ksm.ClusterQueue) and a namespace that bypasses Kueue. Prices of
tests/helpers/prometheus_jobs.py: H100 2.40, A100 1.60 per GPU-hour, 0.012 per core-hour, 0.0015 per GiB-hour.
"""

import json
import logging
from dataclasses import replace
from datetime import date
from email import message_from_bytes
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.days import billing_day
from billing.web.app import create_app
from fixtures.directory import directory_ldif
from fixtures.ksm import (
    A100,
    GPU_PRODUCT_LABEL,
    H100,
    Cluster,
    ClusterQueue,
    Container,
    Node,
    Pod,
    Quota,
    World,
)
from fixtures.reference import reference_quota_bill, reference_usage
from tests.helpers.html_tables import read_page
from tests.helpers.prometheus_jobs import PRICES, write_config
from tests.helpers.serve import get, web_config

DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
D = DAY.start.timestamp()
BEFORE, AFTER = D - 3600, D + 25 * 3600
GIB = 2**30


def at(hour: float) -> float:
    return D + hour * 3600


def node(name: str, model: str, gpus: float) -> Node:
    return Node(name, ((D - 86400, {GPU_PRODUCT_LABEL: model}),), {"cpu": 64.0, "memory": 512.0 * GIB, "nvidia_com_gpu": gpus})


def pod(namespace: str, name: str, on: str, start: float, end: float, gpus: float, phase: str = "Running") -> Pod:
    """GPUs only (no cpu or memory request), so that the figures are the worked example's."""
    return Pod(namespace, name, f"uid-{name}", on, start, ((start, phase), (end, "Succeeded")), end + 600,
               (Container("main", 0.0, 0.0, gpus),))


QUEUES = (
    ClusterQueue("robotics-cq", "research", (
        Quota("h100", "nvidia.com/gpu", ((BEFORE, 8.0), (at(12), 16.0)), ((BEFORE, 8.0),)),
        Quota("h100", "cpu", ((BEFORE, 64.0),)),  # 64 cores x 24 h x 0.012 = 18.432, nothing used
        Quota("h100", "memory", ((BEFORE, 512.0 * GIB),)),  # 512 GiB x 24 h x 0.0015 = 18.432
        Quota("h100", "pods", ((BEFORE, 100.0),)))),  # not billed
    ClusterQueue("vision-cq", "research", (
        Quota("h100", "nvidia.com/gpu", ((BEFORE, 8.0),), ((BEFORE, 0.0), (at(0), 12.0), (at(6), 0.0))),)),
    ClusterQueue("nlp-cq", "research", (
        Quota("h100", "nvidia.com/gpu", ((BEFORE, 8.0),), lending_limit=4.0),
        Quota("a100", "nvidia.com/gpu", ((BEFORE, 4.0),), ((BEFORE, 2.0),)))),
)
WORLD = World(
    (Cluster("jaguar",
             (node("h100-1", H100, 8), node("h100-2", H100, 8), node("h100-3", H100, 8), node("a100-1", A100, 4)),
             (pod("team-robotics", "train-a", "h100-1", BEFORE, AFTER, 4),
              pod("team-robotics", "train-b", "h100-1", BEFORE, AFTER, 4),
              pod("team-vision", "sweep-1", "h100-2", at(0), at(6), 8),
              pod("team-vision", "sweep-2", "h100-3", at(0), at(6), 2),
              pod("team-vision", "sweep-3", "h100-3", at(0), at(6), 2, phase="Pending"),  # admitted, pulling its image
              pod("team-robotics", "debug", "h100-3", at(14), at(16), 1),  # bypasses Kueue: 2 GPU-h, 4.80
              pod("team-nlp", "eval", "a100-1", BEFORE, AFTER, 2),
              pod("scratch", "notebook", "h100-3", at(10), at(15), 1)),  # bypasses Kueue: 5 GPU-h, 12.00
             {"cluster": "jaguar"}, kueue=QUEUES),),
    BEFORE, AFTER,
)
KUEUE = {"queues": {"robotics-cq": {"team": "robotics", "namespaces": ["team-robotics"]},
                    "vision-cq": {"team": "vision", "namespaces": ["team-vision"]},
                    "nlp-cq": {"team": "nlp", "namespaces": ["team-nlp"]}},
         "flavors": {"h100": H100, "a100": A100}}


def kueue_config(tmp_path: Path, url: str) -> str:
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = write_config(tmp_path, database, {"jaguar": url})
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["kueue"] = KUEUE
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    return config


def ledger_of(tmp_path: Path) -> pd.DataFrame:
    with create_engine(f"sqlite:///{tmp_path / 'ledger.db'}").connect() as conn:
        return pd.read_sql("select * from chargeback", conn)


def test_each_team_pays_its_quota_its_borrowing_and_is_paid_its_lending(store_server, tmp_path):
    config = kueue_config(tmp_path, store_server(WORLD).url)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    ledger = ledger_of(tmp_path)

    # by hand (docs/spec.md's worked example, plus robotics' cpu and memory quota, scratch's notebook and the
    # 2 GPU-h robotics ran beside Kueue's 192: M = 194 > U = 192, so 2 GPU-h are charged by requests)
    by_team = ledger.groupby("team")["cost"].sum()
    assert by_team.to_dict() == pytest.approx({"robotics": 691.2 + 18.432 + 18.432 + 4.8, "vision": 508.8, "nlp": 566.4,
                                               "unallocated": 12.0})
    quota = ledger[ledger["resource"].str.startswith("quota-")].groupby(["namespace", "resource", "gpu_model"])
    assert quota["quantity"].sum().to_dict() == pytest.approx({
        ("quota:robotics-cq", "quota-gpu", H100): 288.0, ("quota:robotics-cq", "quota-cpu", ""): 1536.0,
        ("quota:robotics-cq", "quota-memory", ""): 12288.0, ("quota:vision-cq", "quota-gpu", H100): 192.0,
        ("quota:nlp-cq", "quota-gpu", H100): 192.0, ("quota:nlp-cq", "quota-gpu", A100): 96.0})
    lent = ledger[ledger["resource"] == "lent-gpu"]
    assert lent[["namespace", "team"]].values.tolist() == [["team-vision", "nlp"]]
    assert lent["quantity"].tolist() == pytest.approx([-20.0]) and lent["cost"].tolist() == pytest.approx([-48.0])
    assert ledger["cost"].sum() == pytest.approx(1766.4 + 36.864 + 12.0 + 4.8)  # the quotas and the bypassing use

    # the independent reference, instant by instant from the samples, agrees on every team's GPUs
    usage = reference_usage(WORLD, "jaguar", D, D + 86400, 60)
    reference = reference_quota_bill(WORLD, "jaguar", D, D + 86400, 60,
                                     {q: (v["team"], v["namespaces"]) for q, v in KUEUE["queues"].items()},
                                     KUEUE["flavors"], PRICES["jaguar"]["gpu_models"], usage,
                                     {"team-robotics": "robotics", "team-vision": "vision", "team-nlp": "nlp",
                                      "scratch": "unallocated"})
    gpus = ledger[ledger["resource"].str.endswith("gpu")].groupby("team")["cost"].sum()
    assert gpus.to_dict() == pytest.approx(reference, rel=1e-9)


def test_a_live_store_bills_the_same_quotas(live_store, tmp_path):
    """Loaded by remote write as a live store fills itself: staleness markers where the pods' series end, Kueue's
    gauges scraped from their own target."""
    config = kueue_config(tmp_path, live_store(replace(WORLD, staleness=True)).url)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    by_team = ledger_of(tmp_path).groupby("team")["cost"].sum()
    assert by_team.to_dict() == pytest.approx({"robotics": 691.2 + 18.432 + 18.432 + 4.8, "vision": 508.8, "nlp": 566.4,
                                               "unallocated": 12.0})


def test_check_names_the_queues_their_teams_and_warns_of_what_maps_to_nothing_or_twice(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["kueue"]["queues"] = {
        "robotics-cq": {"team": "robotics", "namespaces": ["team-robotics", "team-vision"]},
        "vision-cq": {"team": "vision", "namespaces": ["team-vision"]}}  # nlp-cq left out
    Path(config).write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", config])
    line = next(line for line in result.output.splitlines() if "kueue jaguar" in line)
    assert line.startswith("WARN")
    assert ("ClusterQueues on 2026-11-20: nlp-cq (cohort research) -> no team; robotics-cq (cohort research) -> "
            "robotics; vision-cq (cohort research) -> vision") in line
    assert "ClusterQueue nlp-cq maps to no team: its quota is billed to nobody" in line
    assert "namespace team-vision is listed under robotics-cq and vision-cq: it counts as robotics-cq's" in line


def test_a_kueue_cluster_whose_store_has_no_quotas_is_refused(prometheus_server, tmp_path):
    """Rule 10: without Kueue's gauges every team would pay no quota and the day would look complete."""
    bare = replace(WORLD, clusters=(replace(WORLD.clusters[0], kueue=()),))
    config = kueue_config(tmp_path, prometheus_server(bare).url)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 1
    assert ("cluster jaguar: the store holds no kueue_cluster_queue_nominal_quota sample on 2026-11-20 under the "
            "cluster's selector") in result.output
    assert not (tmp_path / "ledger.db").exists() or ledger_of(tmp_path).empty
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", config])
    assert next(line for line in checked.output.splitlines() if "kueue jaguar" in line).startswith("FAIL")


def test_the_team_pages_and_the_admins_page_show_quota_use_within_it_borrowed_and_lent(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    teams = tmp_path / "reports" / "2026-11-20" / "teams"
    vision_html = (teams / "vision.html").read_text()
    vision = read_page(vision_html)
    # vision: 192 GPU-h of quota, 60 Running of which 2/3 within it, 20 borrowed (lent by nlp)
    assert vision.tables["team-quotas"][1:] == [["jaguar", f"GPU {H100}", "192.00 GPU-h", "40.00 GPU-h",
                                                 "20.00 GPU-h", "0.00 GPU-h"]]
    nlp = read_page((teams / "nlp.html").read_text())
    assert nlp.tables["team-quotas"][1:] == [["jaguar", f"GPU {A100}", "96.00 GPU-h", "48.00 GPU-h", "0.00 GPU-h",
                                              "0.00 GPU-h"],
                                             ["jaguar", f"GPU {H100}", "192.00 GPU-h", "0.00 GPU-h", "0.00 GPU-h",
                                              "20.00 GPU-h"]]
    robotics = read_page((teams / "robotics.html").read_text())
    assert ["jaguar", "CPU", "1,536.00 core-h", "0.00 core-h", "0.00 core-h", "0.00 core-h"] in robotics.tables["team-quotas"]
    assert ["jaguar", f"Kueue quota, GPU {H100}", "288.00 GPU-h", "691.20 USD"] in robotics.tables["team-usage"]
    assert ["jaguar", f"Quota lent, credited, GPU {H100}", "-20.00 GPU-h", "-48.00 USD"] in nlp.tables["team-usage"]
    assert "<strong>Kueue quotas</strong>: each ClusterQueue&#39;s nominal quota is charged to its team" in vision_html

    # the admins' page: every team's rows as on its page, by team (robotics' 192 GPU-h within its quota: of its
    # 194 Running, the 2 beyond what Kueue admitted are charged by requests)
    index_html = (tmp_path / "reports" / "2026-11-20" / "index.html").read_text()
    assert read_page(index_html).tables["quotas"][1:] == [
        ["nlp", *nlp.tables["team-quotas"][1]], ["nlp", *nlp.tables["team-quotas"][2]],
        ["robotics", "jaguar", "CPU", "1,536.00 core-h", "0.00 core-h", "0.00 core-h", "0.00 core-h"],
        ["robotics", "jaguar", f"GPU {H100}", "288.00 GPU-h", "192.00 GPU-h", "0.00 GPU-h", "0.00 GPU-h"],
        ["robotics", "jaguar", "Memory", "12,288.00 GiB-h", "0.00 GiB-h", "0.00 GiB-h", "0.00 GiB-h"],
        ["vision", "jaguar", f"GPU {H100}", "192.00 GPU-h", "40.00 GPU-h", "20.00 GPU-h", "0.00 GPU-h"]]
    assert "<strong>Kueue quotas</strong>: each ClusterQueue&#39;s nominal quota is charged to its team" in index_html


def test_borrowing_no_queue_could_lend_is_shown_where_the_pages_show_borrowing(prometheus_server, tmp_path):
    """nlp lends at most 1 H100 (lending_limit): of the 4 vision borrows until 06:00 it lends 1, nobody the other 3.
    So of vision's 72 admitted GPU-h, 24 borrowed, 6 lent by nlp; of its 60 Running GPU-h (a = 1), 40 within its
    quota, 60 x 6/72 = 5 lent by nlp and 60 x 18/72 = 15 borrowed beyond what the cohort could lend (36.00 at 2.40,
    which vision pays and nobody is credited)."""
    robotics, vision, nlp = QUEUES
    stingy = replace(nlp, quotas=(replace(nlp.quotas[0], lending_limit=1.0), nlp.quotas[1]))
    world = replace(WORLD, clusters=(replace(WORLD.clusters[0], kueue=(robotics, vision, stingy)),))
    config = with_email(tmp_path, kueue_config(tmp_path, prometheus_server(world).url))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    ledger = ledger_of(tmp_path)
    assert ledger.loc[ledger["team"] == "vision", "cost"].sum() == pytest.approx(508.8)  # as when nlp lent all 4
    lent = ledger[ledger["resource"] == "lent-gpu"]
    assert lent[["namespace", "team"]].values.tolist() == [["team-vision", "nlp"]]
    assert lent["cost"].tolist() == pytest.approx([-12.0])
    day = tmp_path / "reports" / "2026-11-20"
    vision_page = read_page((day / "teams" / "vision.html").read_text())
    assert vision_page.tables["team-quotas"] == [
        ["Cluster", "Resource", "Quota", "Used within it", "Borrowed", "Borrowed beyond what the cohort could lend", "Lent"],
        ["jaguar", f"GPU {H100}", "192.00 GPU-h", "40.00 GPU-h", "5.00 GPU-h", "15.00 GPU-h", "0.00 GPU-h"]]
    index = read_page((day / "index.html").read_text()).tables["quotas"]
    assert ["vision", "jaguar", f"GPU {H100}", "192.00 GPU-h", "40.00 GPU-h", "5.00 GPU-h", "15.00 GPU-h",
            "0.00 GPU-h"] in index
    assert ["nlp", "jaguar", f"GPU {H100}", "192.00 GPU-h", "0.00 GPU-h", "0.00 GPU-h", "0.00 GPU-h",
            "5.00 GPU-h"] in index
    lines = vision_leads_email(tmp_path)
    assert "Cluster Resource Quota Used within it Borrowed Borrowed beyond what the cohort could lend Lent" in lines
    assert f"jaguar GPU {H100} 192.00 GPU-h 40.00 GPU-h 5.00 GPU-h 15.00 GPU-h 0.00 GPU-h" in lines


def test_report_by_resource_lists_quota_credits_and_lending_and_says_what_they_are(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    assert CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config]).exit_code == 0
    result = CliRunner().invoke(main, ["report", "--team", "nlp", "--from", "2026-11-20", "--to", "2026-11-20",
                                       "--by", "resource", "--format", "json", "--config", config])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    costs = {row["resource"]: row["cost"] for row in rows}
    # nlp: quotas 460.80 + 153.60, its A100 use 76.80 and its credit, and 48.00 for what it lent vision
    assert costs == pytest.approx({"quota-gpu": 614.4, "nvidia_com_gpu": 76.8, "credit-gpu": -76.8, "lent-gpu": -48.0})
    table = CliRunner().invoke(main, ["report", "--team", "nlp", "--from", "2026-11-20", "--to", "2026-11-20",
                                      "--by", "resource", "--config", config])
    assert "Kueue quotas: each ClusterQueue's nominal quota is charged to its team" in " ".join(table.output.split())


def test_the_focus_export_names_quotas_and_books_lending_as_credit(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    assert CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config]).exit_code == 0
    output = tmp_path / "focus.csv"
    result = CliRunner().invoke(main, ["export", "--config", config, "--format", "focus", "--from", "2026-11-20",
                                       "--to", "2026-11-20", "--output", str(output)])
    assert result.exit_code == 0, result.output
    focus = pd.read_csv(output)
    # the quotas' rows; their credits, allocated charges of the quota (billing/kueue-quota), name it too
    quotas = focus[(focus["ResourceType"] == "Kueue quota") & (focus["ChargeCategory"] == "Usage")]
    assert quotas.groupby("BillingAccountId")["BilledCost"].sum().to_dict() == pytest.approx(
        {"robotics": 691.2 + 36.864, "vision": 460.8, "nlp": 614.4})
    lent = focus[focus["ChargeDescription"].str.contains("quota lent", na=False)]
    assert lent[["BillingAccountId", "ChargeCategory"]].values.tolist() == [["nlp", "Credit"]]
    assert lent["BilledCost"].tolist() == pytest.approx([-48.0])
    assert focus["BilledCost"].sum() == pytest.approx(1766.4 + 36.864 + 12.0 + 4.8)


def with_email(tmp_path: Path, config: str) -> str:
    """The config with emails to the outbox, and a directory in which bob leads vision."""
    settings = yaml.safe_load(Path(config).read_text())
    settings["email"] = {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": ["infra@example.org"]}
    Path(config).write_text(yaml.safe_dump(settings))
    (tmp_path / "directory.ldif").write_text(directory_ldif(  # every team the config names is in it
        ["alice", "bob", "carol"], {"vision": ["bob"], "robotics": [], "nlp": [], "platform": []},
        leads={"vision": ["bob"]}))
    return config


def vision_leads_email(tmp_path: Path) -> list[str]:
    """The plain text of bob's email, each line's spaces collapsed."""
    letters = [message_from_bytes(path.read_bytes()) for path in (tmp_path / "outbox").rglob("*.eml")]
    to_bob = next(letter for letter in letters if letter["To"] == "bob@example.org")
    text = next(part for part in to_bob.walk() if part.get_content_type() == "text/plain").get_payload(decode=True)
    return [" ".join(line.split()) for line in text.decode().splitlines()]


def test_the_team_leads_email_shows_the_quotas(prometheus_server, tmp_path):
    config = with_email(tmp_path, kueue_config(tmp_path, prometheus_server(WORLD).url))
    result = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert result.exit_code == 0, result.output
    lines = vision_leads_email(tmp_path)
    assert "KUEUE QUOTAS" in lines
    assert f"jaguar GPU {H100} 192.00 GPU-h 40.00 GPU-h 20.00 GPU-h 0.00 GPU-h" in lines


def test_serve_shows_the_quota_and_says_what_it_is(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    assert CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config]).exit_code == 0
    app = create_app(web_config(f"sqlite:///{tmp_path / 'ledger.db'}")).test_client()
    page = get(app, "/teams/nlp?from=2026-11-20&to=2026-11-20", "root")
    assert page.status_code == 200
    namespaces = read_page(page.text).tables["by-namespace"]
    assert any(row[0] == "quota:nlp-cq" and row[-1].startswith("614.40") for row in namespaces), namespaces
    assert "Kueue quotas: each ClusterQueue&#39;s nominal quota is charged to its team" in page.text


def test_the_statement_books_quota_as_reserved_and_lending_as_credit(prometheus_server, tmp_path):
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    assert CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config]).exit_code == 0
    result = CliRunner().invoke(main, ["statement", "--month", "2026-11", "--team", "nlp", "--format", "json",
                                       "--config", config])
    assert result.exit_code == 0, result.output
    lines = json.loads(result.output)["teams"][0]["lines"]
    amounts = {(line["kind"], line["resource"], line["gpu_model"]): line["amount"] for line in lines}
    assert amounts == pytest.approx({("reserved", "quota-gpu", H100): 460.8, ("reserved", "quota-gpu", A100): 153.6,
                                     ("charge", "gpu", A100): 76.8, ("credit", "credit-gpu", A100): -76.8,
                                     ("credit", "lent-gpu", H100): -48.0})


def with_kueue(config: str, **kueue) -> str:
    """The config with `kueue` changed (its keys replaced), for a case on the same store."""
    settings = yaml.safe_load(Path(config).read_text())
    settings["clusters"][0]["kueue"] = {**KUEUE, **kueue}
    Path(config).write_text(yaml.safe_dump(settings))
    return config


def run_and_check(config: str):
    run = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-20", "--config", config])
    return run, checked


def line_of(checked, dependency: str) -> str:
    return next(line for line in checked.output.splitlines() if line[6:26].strip() == dependency)


def test_a_queue_team_the_directory_spells_otherwise_or_lacks_is_refused(prometheus_server, tmp_path):
    """`team: ROBOTICS` beside the directory's `robotics` split robotics in two; `team: visoin` billed vision's quota
    to a team nobody leads. Both are configuration errors: exit 2 from run and check, nothing written."""
    queues = {**KUEUE["queues"], "robotics-cq": {"team": "ROBOTICS", "namespaces": ["team-robotics"]},
              "vision-cq": {"team": "visoin", "namespaces": ["team-vision"]}}
    config = with_kueue(kueue_config(tmp_path, prometheus_server(WORLD).url), queues=queues)
    run, checked = run_and_check(config)
    sentence = ("clusters[0].kueue.queues.robotics-cq.team: the directory spells this team 'robotics', not 'ROBOTICS': "
                "write it so, or its costs are kept apart from the rest of the team's; "
                "clusters[0].kueue.queues.vision-cq.team: the directory has no team 'visoin' (the closest: vision)")
    assert (run.exit_code, run.stderr.splitlines()[-1]) == (2, f"billing: {sentence}")
    assert not (tmp_path / "ledger.db").exists() or ledger_of(tmp_path).empty
    assert checked.exit_code == 2 and line_of(checked, "directory").startswith("FAIL") and sentence in checked.output


def test_gpus_of_a_flavor_without_a_priced_model_refuse_the_day(prometheus_server, tmp_path):
    """Without a model for h100 its quota was priced at gpu_hour under model '' and the queues' H100 use was not
    credited against it: each team paid quota and use. Refused instead (exit 1), naming flavor, queues and key."""
    config = kueue_config(tmp_path, prometheus_server(WORLD).url)
    missing = ("ClusterQueues nlp-cq, robotics-cq and vision-cq hold GPUs of flavor h100, which "
               "clusters[0].kueue.flavors does not name: add h100 with the GPU model its nodes have")
    unpriced = ("ClusterQueue nlp-cq holds GPUs of flavor a100, whose model NVIDIA-A100-PCIE-40GB "
                "(clusters[0].kueue.flavors.a100) the cluster's prices do not list in gpu_models: price it there, or "
                "name the model its nodes have")
    for flavors, sentences in (({"a100": A100}, [missing]), ({"h100": H100, "a100": "NVIDIA-A100-PCIE-40GB"}, [unpriced]),
                               ({}, [unpriced.replace("whose model NVIDIA-A100-PCIE-40GB (clusters[0].kueue.flavors.a100) "
                                                      "the cluster's prices do not list in gpu_models: price it there, or "
                                                      "name the model its nodes have",
                                                      "which clusters[0].kueue.flavors does not name: add a100 with the "
                                                      "GPU model its nodes have"), missing])):
        run, checked = run_and_check(with_kueue(config, flavors=flavors))
        assert run.exit_code == 1, run.output
        assert run.stderr.splitlines()[-1] == (f"billing: cluster jaguar on 2026-11-20: {'; '.join(sentences)}; "
                                               "nothing was billed and the day stays missing")
        assert not (tmp_path / "ledger.db").exists() or ledger_of(tmp_path).empty
        assert checked.exit_code == 1
        assert line_of(checked, "kueue jaguar") .startswith("FAIL") and "; ".join(sentences) in checked.output


def test_the_nights_log_names_a_queue_billed_to_nobody_and_a_listed_queue_without_series(prometheus_server, tmp_path,
                                                                                         caplog):
    queues = {"robotics-cq": KUEUE["queues"]["robotics-cq"], "vision-cq": KUEUE["queues"]["vision-cq"],
              "speech-cq": {"team": "nlp", "namespaces": ["team-speech"]}}  # nlp-cq left out, speech-cq has no series
    config = with_kueue(kueue_config(tmp_path, prometheus_server(WORLD).url), queues=queues)
    with caplog.at_level(logging.WARNING, logger="billing"):
        run = CliRunner().invoke(main, ["run", "--date", "2026-11-20", "--config", config])
    assert run.exit_code == 0, run.output
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "ClusterQueue" in r.getMessage()]
    assert warnings == ["cluster jaguar: ClusterQueue nlp-cq maps to no team: its quota is billed to nobody (list it in "
                        "clusters[].kueue.queues)",
                        "cluster jaguar: ClusterQueue speech-cq of clusters[].kueue.queues has no quota series"]
